"""Artifacts in the metadata store: one by id or URI, with the task that produced it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from headwater.api import iso_time
from headwater.api._args import INT64_MAX
from headwater.api._store import MetadataArg, reading
from headwater.errors import NotFoundError

__all__ = ["ArtifactInfo", "Producer", "artifact_ref", "get_artifact"]


@dataclass(frozen=True)
class Producer:
    """The task execution that wrote an artifact."""

    execution_id: int
    task: str
    run_id: str

    def to_json(self) -> dict[str, Any]:
        """`{"execution_id", "task", "run_id"}`."""
        return {"execution_id": self.execution_id, "task": self.task, "run_id": self.run_id}


@dataclass(frozen=True)
class ArtifactInfo:
    """One artifact as recorded: its URI, type, content digest, size and metadata."""

    id: int | None
    uri: str
    name: str
    type: str
    digest: str | None
    size: int | None
    metadata: dict[str, Any]
    created_at: float
    producer: Producer | None

    def to_json(self) -> dict[str, Any]:
        """The artifact's JSON shape (`artifacts show --json`)."""
        return {
            "id": self.id,
            "uri": self.uri,
            "name": self.name,
            "type": self.type,
            "digest": self.digest,
            "size": self.size,
            "metadata": self.metadata,
            "created_at": iso_time(self.created_at),
            "producer": None if self.producer is None else self.producer.to_json(),
        }


def artifact_ref(ref: int | str) -> int | str | None:
    """An artifact reference as an id (int) or a URI (str); None for an id that no store
    can hold (beyond 64 bits), which therefore names no artifact."""
    if isinstance(ref, int) and not isinstance(ref, bool):
        return ref if 0 <= ref <= INT64_MAX else None
    text = str(ref).strip()
    digits = text[2:] if text.startswith("a:") else text
    if digits.isdigit():
        number = int(digits)
        return number if number <= INT64_MAX else None
    return text


def get_artifact(ref: int | str, *, metadata: MetadataArg = None) -> ArtifactInfo:
    """One artifact by id (`12`, `"12"`, `"a:12"`) or URI, with its producer. Reads only.

    Raises:
        NotFoundError: No artifact matches `ref`.
        StorageError: The store cannot be opened for reading.
    """
    key = artifact_ref(ref)
    with reading(metadata) as store:
        art = None if store is None or key is None else store.get_artifact(key)
        if store is None or art is None:
            raise NotFoundError(f"no artifact {str(ref)!r}: pass an artifact URI or numeric id")
        execution = store.get_execution(art.producer) if art.producer is not None else None
    producer = None
    if execution is not None and execution.id is not None:
        producer = Producer(execution.id, execution.task, execution.run_id)
    return ArtifactInfo(
        id=art.id,
        uri=art.uri,
        name=art.name,
        type=art.schema_title,
        digest=art.digest,
        size=art.size,
        metadata=art.metadata,
        created_at=art.created_at,
        producer=producer,
    )
