"""`StoreTaskCache`: cache hits found in the metadata store, by content-addressed key."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from headwater.artifacts.base import ArtifactStore
from headwater.caching.base import CacheHit, TaskCache
from headwater.caching.keys import cache_key
from headwater.metadata.base import ArtifactRecord, EventRecord, ExecutionRecord, MetadataStore
from headwater.outcome import legacy_failure
from headwater.task import Launch, Outputs

if TYPE_CHECKING:
    from headwater.metadata.recorder import RunRecorder


class StoreTaskCache(TaskCache):
    """Look up executions with the same cache key in the metadata store.

    What the cache trusts (ADR 4): an artifact's recorded digest holds while its signature
    (`ArtifactStore.signature`: size, mtime_ns, ctime_ns, inode and device of every file and
    directory for a local path; each object's size and ETag or generation in an object store)
    is what it was when the digest was taken. If any of them moved, the content is hashed
    again and compared: a file rewritten in place with its old mtime put back still moves
    its ctime. Artifacts the store does not know (imported files, pipeline inputs) are
    always hashed. A hit reuses the original artifacts in place; if one of them is gone or
    its content changed since it was recorded, it is a miss.

    A failure is never reused: a FAILED execution is not a cache entry, nor is one that
    succeeded but said its outcome is a failure (`headwater.outcome`, recorded without a
    key), nor one an earlier version recorded whose outputs are a tuning trial's error record.

    With a `scope` (a server run's namespace), keys are of that scope: hits never cross it.
    """

    def __init__(self, store: RunRecorder, artifacts: ArtifactStore, *, scope: str = "") -> None:
        self.store = store
        self.artifacts = artifacts
        self.scope = scope
        # (uri, signature) -> digest: each state of an artifact is hashed once per process.
        self._hashed: dict[tuple[str, str], str | None] = {}
        # Artifacts seen in hits: a chain of cached tasks needs no store read per input.
        self._known: dict[str, ArtifactRecord] = {}

    def _hash(self, uri: str, signature: str) -> str | None:
        memo = (uri, signature)
        if memo not in self._hashed:
            found = self.artifacts.digest(uri)
            self._hashed[memo] = None if found is None else found.hex
        return self._hashed[memo]

    def _digest(self, uri: str) -> str | None:
        """The content digest of an input: the recorded one while its signature holds."""
        signature = self.artifacts.signature(uri)
        if signature is None:
            return None
        known = self._known.get(uri) or self.store.get_artifact(uri)
        if known is not None and known.digest and known.signature == signature:
            return known.digest
        return self._hash(uri, signature)

    def fingerprint(self, *, launch: Launch) -> str:
        """SHA-256 over the executor, inputs (artifacts by content), outputs and cache_key
        (and the scope, if any)."""
        key = cache_key(launch, self._digest)
        if not self.scope:
            return key
        return hashlib.sha256(f"{self.scope}\0{key}".encode()).hexdigest()

    def lookup(self, *, launch: Launch, key: str) -> CacheHit | None:
        """The newest successful execution with `key`, if its artifacts are as recorded."""
        if not key:
            return None
        hit = self.store.cached_outputs(key)
        if hit is None or hit[0].id is None:
            return None
        found, events = hit
        if failed(found):
            return None
        outputs, with_content = outputs_from(events, found.outputs)
        if not all(self.intact(art) for art in with_content):
            return None
        self._known.update((art.uri, art) for art in with_content)
        ids = {art.uri: art.id for _, art in events if art.id is not None}
        return CacheHit(outputs, source=found.id, artifact_ids=ids)

    def intact(self, art: ArtifactRecord) -> bool:
        """True if the artifact is still where it was, with the content it was recorded with.

        A signature as recorded is trusted; any other is checked by hashing the content.
        """
        signature = self.artifacts.signature(art.uri)
        if signature is None:
            return False
        if art.signature is not None and signature == art.signature:
            return True
        return self._hash(art.uri, signature) == art.digest


def failed(execution: ExecutionRecord) -> bool:
    """True if `execution`'s outcome is a failure: it must not be reused, even if it
    SUCCEEDED (an error record says why; older versions left only the failure's outputs)."""
    return execution.error is not None or legacy_failure(execution.outputs) is not None


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
