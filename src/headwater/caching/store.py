"""`StoreTaskCache`: cache hits found in the metadata store, by content-addressed key."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from headwater.artifacts.base import ArtifactStore
from headwater.caching.base import CacheHit, TaskCache
from headwater.caching.keys import cache_key, content_digest
from headwater.engine.model import Launch, Outputs
from headwater.metadata.base import MetadataStore


class StoreTaskCache(TaskCache):
    """Look up executions with the same cache key in the metadata store.

    Input artifact digests come from the store (computed once, when their producer finished);
    an artifact the store does not know yet is hashed here. A hit reuses the original
    artifacts in place; if any of them is gone, it is a miss.
    """

    def __init__(self, store: MetadataStore, artifacts: ArtifactStore) -> None:
        self.store = store
        self.artifacts = artifacts

    def _digest(self, uri: str) -> str | None:
        known = self.store.get_artifact(uri)
        if known is not None and known.digest:
            return known.digest
        if "://" in uri and not uri.startswith("file://"):
            found = self.artifacts.digest(uri) if uri.startswith(self.artifacts.root) else None
            return found[0] if found else None
        return content_digest(uri)

    def fingerprint(self, *, launch: Launch) -> str:
        """SHA-256 over the executor, inputs (artifacts by content), outputs and cache_key."""
        return cache_key(launch, self._digest)

    def lookup(self, *, launch: Launch, key: str) -> CacheHit | None:
        """The newest successful execution with `key`, if its artifacts still exist."""
        if not key:
            return None
        found = self.store.find_cached(key)
        if found is None or found.id is None:
            return None
        outputs, with_content = outputs_of(self.store, found.id, found.outputs)
        # Metrics artifacts are metadata only; the others must still be where they were.
        if not all(_exists(self.artifacts, uri) for uri in with_content):
            return None
        return CacheHit(outputs, source=found.id)


def outputs_of(
    store: MetadataStore, execution_id: int, parameters: dict[str, Any]
) -> tuple[Outputs, list[str]]:
    """An execution's outputs rebuilt from the store, and the URIs that held content."""
    slots: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    with_content = []
    for event, art in store.artifacts_of(execution_id):
        if event.kind != "OUTPUT":
            continue
        if art.digest:
            with_content.append(art.uri)
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


def _exists(artifacts: ArtifactStore, uri: str) -> bool:
    if "://" in uri and not uri.startswith("file://"):
        return artifacts.exists(uri) if uri.startswith(artifacts.root) else True
    import os

    return os.path.exists(uri[len("file://") :] if uri.startswith("file://") else uri)
