"""`StoreTaskCache`: cache hits found in the metadata store, by content-addressed key."""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from headwater.artifacts.base import ArtifactStore
from headwater.caching.base import CacheHit, TaskCache
from headwater.caching.keys import cache_key, content_digest
from headwater.metadata.base import ArtifactRecord, EventRecord, MetadataStore
from headwater.task import Launch, Outputs


def _local_path(uri: str) -> str | None:
    if uri.startswith("file://"):
        return uri[len("file://") :]
    return None if "://" in uri else uri


class StoreTaskCache(TaskCache):
    """Look up executions with the same cache key in the metadata store.

    Input artifact digests come from the store, computed once when their producer finished,
    unless the file was modified since (its mtime is newer than the record): then, and for
    artifacts the store does not know (imported files, pipeline inputs), the content is
    hashed here. A hit reuses the original artifacts in place; if one of them is gone or was
    changed since it was recorded, it is a miss.
    """

    def __init__(self, store: MetadataStore, artifacts: ArtifactStore) -> None:
        self.store = store
        self.artifacts = artifacts
        self._hashed: dict[tuple[str, float, int], str | None] = {}
        # Artifacts seen in hits: a chain of cached tasks needs no store read per input.
        self._known: dict[str, ArtifactRecord] = {}

    def _hash(self, uri: str) -> str | None:
        path = _local_path(uri)
        if path is None:
            found = self.artifacts.digest(uri)
            return found[0] if found else None
        try:
            st = os.stat(path)
        except OSError:
            return None
        memo = (path, st.st_mtime, st.st_size)
        if memo not in self._hashed:
            self._hashed[memo] = content_digest(path)
        return self._hashed[memo]

    def _digest(self, uri: str) -> str | None:
        known = self._known.get(uri) or self.store.get_artifact(uri)
        ours = known is not None and known.digest and _inside(uri, self.artifacts.root)
        if ours and known is not None and not _modified_since(known):
            return known.digest
        return self._hash(uri)

    def fingerprint(self, *, launch: Launch) -> str:
        """SHA-256 over the executor, inputs (artifacts by content), outputs and cache_key."""
        return cache_key(launch, self._digest)

    def lookup(self, *, launch: Launch, key: str) -> CacheHit | None:
        """The newest successful execution with `key`, if its artifacts are as recorded."""
        if not key:
            return None
        hit = self.store.cached_outputs(key)
        if hit is None or hit[0].id is None:
            return None
        found, events = hit
        outputs, with_content = outputs_from(events, found.outputs)
        if not all(self.intact(art) for art in with_content):
            return None
        self._known.update((art.uri, art) for art in with_content)
        ids = {art.uri: art.id for _, art in events if art.id is not None}
        return CacheHit(outputs, source=found.id, artifact_ids=ids)

    def intact(self, art: ArtifactRecord) -> bool:
        """True if the artifact is still where it was, with the content it was recorded with."""
        path = _local_path(art.uri)
        if path is None:
            return self.artifacts.exists(art.uri)
        if not os.path.exists(path):
            return False
        return not _modified_since(art) or self._hash(art.uri) == art.digest


def _inside(uri: str, root: str) -> bool:
    return uri.startswith(root.rstrip("/") + "/")


def _modified_since(art: ArtifactRecord) -> bool:
    """True if a local artifact's file (or a file in its directory) changed after recording."""
    path = _local_path(art.uri)
    if path is None or not art.created_at:
        return False
    try:
        if os.path.isdir(path):
            # A directory's own mtime moves when a file in it is added, removed or renamed.
            return any(
                os.stat(os.path.join(root, name)).st_mtime > art.created_at
                for root, _, files in os.walk(path)
                for name in [".", *files]
            )
        return os.stat(path).st_mtime > art.created_at
    except OSError:
        return True


def outputs_of(
    store: MetadataStore, execution_id: int, parameters: dict[str, Any]
) -> tuple[Outputs, list[ArtifactRecord]]:
    """An execution's outputs rebuilt from the store, and its artifacts that hold content."""
    return outputs_from(store.artifacts_of(execution_id), parameters)


def outputs_from(
    events: list[tuple[EventRecord, ArtifactRecord]], parameters: dict[str, Any]
) -> tuple[Outputs, list[ArtifactRecord]]:
    """Outputs from an execution's events, and its artifacts that hold content.

    Metrics artifacts are metadata only (no digest), so they are not in the second list.
    """
    slots: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    with_content = []
    for event, art in events:
        if event.kind != "OUTPUT":
            continue
        if art.digest:
            with_content.append(art)
        slots[event.slot].append(
            (
                event.index,
                {
                    "name": art.name or event.slot,
                    "type": {"schemaTitle": art.schema_title, "schemaVersion": "0.0.1"},
                    "uri": art.uri,
                    "metadata": dict(art.metadata),
                },
            )
        )
    artifacts = {
        slot: [a for _, a in sorted(items, key=lambda i: i[0])] for slot, items in slots.items()
    }
    return Outputs(dict(parameters), artifacts), with_content
