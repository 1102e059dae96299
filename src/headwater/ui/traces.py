"""Profiler traces kept in artifacts: finding them, and the file to download for each.

The PyTorch components write a gzip Chrome trace (`trace.json.gz`, see
`headwater.components.torch.profiling`) into a folder artifact; `torch.profiler`'s own
handler names its files `*.pt.trace.json[.gz]`. The Artifact page lists such files with a
download link: Perfetto (ui.perfetto.dev) and chrome://tracing open them as they are, and the
download works offline, where a link to Perfetto alone would not.

A trace is served only if it resolves (after `..` and symlinks) inside both the artifact's
own folder and an artifact store the UI may read, like every other file the UI reads.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from headwater.api.artifacts import ArtifactInfo
from headwater.errors import NotFoundError
from headwater.paths import is_remote_uri, resolve_inside

__all__ = ["MAX_TRACES", "find_traces", "media_type", "trace_file"]

#: Files listed per artifact, and folder entries looked at to find them (a folder artifact
#: can hold a whole dataset: the listing must not walk it all).
MAX_TRACES, _MAX_ENTRIES, _MAX_DEPTH = 50, 2000, 4
_TRACE = re.compile(r"(trace.*\.json(\.gz)?|\.pftrace|\.perfetto-trace)$", re.IGNORECASE)


def is_trace(name: str) -> bool:
    """True for a file name a trace viewer opens: `trace.json.gz`, `x.pt.trace.json`..."""
    return bool(_TRACE.search(os.path.basename(name)))


def find_traces(art: ArtifactInfo, roots: list[str]) -> list[dict[str, Any]]:
    """The trace files of `art` (the artifact itself, or files in its folder), each as
    `{"name": path inside the artifact, "size": bytes, "url": download URL}`; none for a
    remote artifact or one outside `roots`."""
    base = _local_base(art, roots)
    if base is None:
        return []
    if base.is_file():
        named = is_trace(base.name) or _named_trace(art) == base.name
        return [_entry(art, base, base.name)] if named else []
    found = []
    for path in _walk(base):
        name = path.relative_to(base).as_posix()
        if not (is_trace(name) or name == _named_trace(art)):
            continue
        if resolve_inside(path, [base]) is None or resolve_inside(path, list(roots)) is None:
            continue  # a symlink leading out of the artifact is not listed
        found.append(_entry(art, path, name))
        if len(found) >= MAX_TRACES:
            break
    return sorted(found, key=lambda t: t["name"])


def trace_file(art: ArtifactInfo, roots: list[str], name: str) -> Path:
    """The resolved path of the trace `name` of `art` (as `find_traces` names it).

    Raises:
        NotFoundError: No such trace, or its path leads out of the artifact or the store.
    """
    base = _local_base(art, roots)
    if base is not None and (is_trace(name) or name == _named_trace(art)):
        candidate = base / name if base.is_dir() else base if name == base.name else None
        path = None if candidate is None else resolve_inside(candidate, [base])
        path = None if path is None else resolve_inside(path, list(roots))
        if path is not None and path.is_file():
            return path
    raise NotFoundError(f"artifact {art.id} has no trace file {name!r}")


def media_type(name: str) -> str:
    """What the download is, for its Content-Type (a .gz stays compressed on disk)."""
    if name.lower().endswith(".gz"):
        return "application/gzip"
    if name.lower().endswith(".json"):
        return "application/json"
    return "application/octet-stream"


def _local_base(art: ArtifactInfo, roots: list[str]) -> Path | None:
    if is_remote_uri(art.uri):
        return None
    return resolve_inside(art.uri, list(roots))


def _named_trace(art: ArtifactInfo) -> str | None:
    """The file the torch components record in a trace artifact's metadata."""
    if art.metadata.get("format") == "chrome-trace" and isinstance(art.metadata.get("file"), str):
        return str(art.metadata["file"])
    return None


def _walk(base: Path) -> list[Path]:
    files: list[Path] = []
    seen = 0
    for folder, dirs, names in os.walk(base):
        depth = len(Path(folder).relative_to(base).parts)
        if depth >= _MAX_DEPTH:
            dirs.clear()
        dirs.sort()
        for name in sorted(names):
            seen += 1
            if seen > _MAX_ENTRIES:
                return files
            files.append(Path(folder) / name)
    return files


def _entry(art: ArtifactInfo, path: Path, name: str) -> dict[str, Any]:
    from urllib.parse import quote

    return {
        "name": name,
        "size": path.stat().st_size,
        "url": f"/api/v1/artifacts/{art.id}/traces/{quote(name)}",
    }
