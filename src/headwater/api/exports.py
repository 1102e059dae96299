"""An artifact's content, to download: a file as itself, a folder (or, for KFP's `:read`,
anything) as a .tar.gz.

The same rules as every other read of an artifact's files by a server (the web UI's previews,
logs and traces): only what lies inside an artifact store the run wrote to (its pipeline
root, or the default one) is read, after `..` and symlinks are resolved; a remote artifact
(`s3://`, `gs://`) is read through its store. What is read is bounded: an artifact over
`HEADWATER_ARTIFACT_READ_LIMIT` bytes (default 256 MiB) is refused with its URI, to be read
there instead; one whose size was not recorded is refused once it is on this machine (a
remote one downloaded whole first, into a temporary folder removed at once).
"""

from __future__ import annotations

import contextlib
import io
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from headwater.api._store import MetadataArg
from headwater.api.artifacts import ArtifactInfo, get_artifact
from headwater.errors import InvalidArgumentError, NotFoundError

__all__ = ["ArtifactExport", "artifact_roots", "export_artifact"]


@dataclass(frozen=True)
class ArtifactExport:
    """An artifact's content: `data` to save as `filename`, of `media_type`."""

    filename: str
    media_type: str
    data: bytes


def export_artifact(
    ref: int | str, *, metadata: MetadataArg = None, tar: bool = False
) -> ArtifactExport:
    """The artifact `ref` (an id or URI), read whole: a file as itself (`tar` false), else a
    .tar.gz of the file or folder.

    Raises:
        NotFoundError: No such artifact, nothing is at its URI, or it lies outside every
            artifact store its run wrote to.
        InvalidArgumentError: It is over the read limit.
    """
    from headwater import config

    art = get_artifact(ref, metadata=metadata)
    limit = config.artifact_read_limit()

    def check(size: int) -> None:
        if size > limit:
            raise InvalidArgumentError(
                f"artifact {art.id} is {size:,} bytes, over the read limit of {limit:,} "
                f"({config.ARTIFACT_READ_LIMIT_ENV}): read it from {art.uri}"
            )

    if art.size is not None:
        check(art.size)  # known before anything is read
    with tempfile.TemporaryDirectory(prefix="headwater-export-") as scratch:
        path = _local_copy(art, artifact_roots(art, metadata), scratch)
        check(_size(path))
        name = path.name or f"artifact-{art.id}"
        if path.is_file() and not tar:
            return ArtifactExport(name, "application/octet-stream", path.read_bytes())
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            archive.add(str(path), arcname=name)
        return ArtifactExport(f"{name}.tar.gz", "application/gzip", buffer.getvalue())


def artifact_roots(art: ArtifactInfo, metadata: MetadataArg) -> list[str]:
    """The artifact stores `art` may be read from (by an export, or the UI): its run's
    pipeline root, then the default."""
    from headwater import config
    from headwater.api.runs import get_run

    roots = [config.pipeline_root()]
    if art.producer is not None:
        with contextlib.suppress(NotFoundError):
            roots.insert(0, get_run(art.producer.run_id, metadata=metadata).pipeline_root)
    return [r for r in roots if r]


def _local_copy(art: ArtifactInfo, roots: list[str], scratch: str) -> Path:
    """The artifact's files on this machine: where they are, or a copy from its store."""
    from headwater.artifacts import is_remote_uri, store_for
    from headwater.paths import resolve_inside

    outside = NotFoundError(
        f"artifact {art.id} at {art.uri!r} is not served: it lies outside the artifact "
        "stores its run wrote to"
    )
    if not is_remote_uri(art.uri):
        path = resolve_inside(art.uri, roots, strict=True)
        if path is None:
            raise outside
        if not path.exists():
            raise NotFoundError(f"artifact {art.id}: nothing is at {art.uri!r} any more")
        return path
    root = next((r for r in roots if art.uri.startswith(r.rstrip("/") + "/")), None)
    if root is None:
        raise outside
    store = store_for(root)
    if not store.exists(art.uri):
        raise NotFoundError(f"artifact {art.id}: nothing is at {art.uri!r} any more")
    target = Path(scratch) / (art.uri.rstrip("/").rsplit("/", 1)[-1] or f"artifact-{art.id}")
    store.download(art.uri, str(target))
    return target


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
