"""Which local files the UI may read: only those that resolve inside folders it was given.

Paths come from the metadata store (artifact URIs, task log paths), and a record, or a
symlink planted in a store folder, could point anywhere; so every read first resolves the
path (`..` and symlinks) and checks it lies under one of the allowed roots.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["is_remote", "resolve_inside"]


def is_remote(uri: str) -> bool:
    """True for a URI with a scheme other than `file://` (`s3://...`): not a local path."""
    return "://" in uri and not uri.startswith("file://")


def resolve_inside(path: str | Path, roots: list[str | Path]) -> Path | None:
    """`path` resolved (after `..` and symlinks) if it lies inside one of `roots`, else None.

    Remote roots are skipped; a root is resolved too, so a store under a symlinked folder
    still matches.
    """
    resolved = Path(str(path).removeprefix("file://")).resolve()
    for root in roots:
        if not str(root) or is_remote(str(root)):
            continue
        base = Path(str(root).removeprefix("file://")).resolve()
        if resolved == base or base in resolved.parents:
            return resolved
    return None
