"""Local or remote, and inside or outside: the URI and path tests every layer shares.

A URI is remote when it has a scheme other than `file` (`s3://b/k`, `gs://b/k`,
`memory://x`); a plain path and a `file://` URI are on this machine's disk. A path is
confined to a root only after `..` and symlinks are resolved on both sides, so that neither a
record naming `root/../etc` nor a symlink planted under the root reaches beyond it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

__all__ = ["is_remote_uri", "local_path", "resolve_inside", "scheme_of"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def scheme_of(uri: str) -> str:
    """The URI's scheme in lower case, `file` for a plain path."""
    match = _SCHEME.match(uri)
    return match.group(1).lower() if match else "file"


def is_remote_uri(uri: str) -> bool:
    """True if `uri` is not on this machine's disk (anything but a path or `file://`)."""
    return scheme_of(uri) != "file"


def local_path(uri: str) -> str | None:
    """The local path of a plain path or `file://` URI; None for a remote URI."""
    match = _SCHEME.match(uri)
    if match is None:
        return uri
    return uri[match.end() :] if match.group(1).lower() == "file" else None


def resolve_inside(
    path: str | os.PathLike[str],
    roots: Iterable[str | os.PathLike[str]],
    *,
    strict: bool = False,
) -> Path | None:
    """`path` resolved (`..` and symlinks) if it lies inside one of `roots`, else None.

    Each root is resolved too, so a root under a symlinked folder still matches; empty and
    remote roots are skipped. A `file://` URI counts as its path.

    Args:
        path: A local path or `file://` URI (a remote URI lies inside no local root).
        roots: The folders `path` may be in.
        strict: Refuse `path` if it is a root itself: only what lies below one is inside.

    Returns:
        The resolved path, or None when it lies outside every root.
    """
    local = local_path(os.fspath(path))
    if local is None:
        return None
    resolved = Path(local).resolve()
    for root in roots:
        base_path = local_path(os.fspath(root))
        if not base_path:
            continue
        base = Path(base_path).resolve()
        if base in resolved.parents or (resolved == base and not strict):
            return resolved
    return None
