"""`ResumeCache`: when resuming a run, reuse what its own earlier attempt finished."""

from __future__ import annotations

import os
import stat

from headwater.artifacts.base import ArtifactStore, walk_tree
from headwater.caching.base import CacheHit, TaskCache
from headwater.caching.store import StoreTaskCache, failed, outputs_of
from headwater.metadata.base import ExecutionRecord, MetadataStore
from headwater.paths import local_path
from headwater.task import Launch


class ResumeCache(TaskCache):
    """Hit on tasks of `run_id` that already SUCCEEDED (or were CACHED); defer to `inner`.

    A task whose outcome was a failure though it succeeded (`headwater.outcome`) runs again.
    """

    def __init__(
        self, store: MetadataStore, artifacts: ArtifactStore, run_id: str, inner: TaskCache
    ) -> None:
        self.inner = inner
        self.checker = StoreTaskCache(store, artifacts)
        self.store = store
        self.done = {
            e.task: e
            for e in store.list_executions(run_id)
            if e.state in ("SUCCEEDED", "CACHED") and e.id is not None and not failed(e)
        }

    def fingerprint(self, *, launch: Launch) -> str:
        """The inner cache's key."""
        return self.inner.fingerprint(launch=launch)

    def lookup(self, *, launch: Launch, key: str) -> CacheHit | None:
        """The run's own earlier result for this task, else the inner cache's answer."""
        earlier = self.done.get(launch.name)
        if earlier is not None and earlier.id is not None and _same_inputs(launch, earlier):
            outputs, with_content = outputs_of(self.store, earlier.id, earlier.outputs)
            if all(self.checker.intact(art) for art in with_content):
                return CacheHit(outputs, source=earlier.cached_from or earlier.id, resumed=True)
        return self.inner.lookup(launch=launch, key=key)


def _same_inputs(launch: Launch, earlier: ExecutionRecord) -> bool:
    """True if the task would see what its earlier execution saw.

    Parameters must be equal; a local input artifact must not have changed since the
    earlier execution finished (an upstream task that ran again in this resume rewrote it).
    Changed means a newer ctime or mtime on it or anything in it: ctime moves on every write,
    rename and `utime`, so a rewrite with its old mtime put back still counts.
    """
    inputs = launch.executor_input["inputs"]
    if (inputs.get("parameterValues") or {}) != earlier.inputs:
        return False
    finished = earlier.finished_at or 0.0
    for spec in (inputs.get("artifacts") or {}).values():
        for art in spec.get("artifacts", []):
            path = local_path(str(art.get("uri", "")))
            if path is not None and _changed_after(path, finished):
                return False
    return True


def _changed_after(path: str, when: float) -> bool:
    """True if `path` (or anything `content_digest` reads under it) changed after `when`,
    or is gone."""
    try:
        top = os.stat(path)
    except OSError:
        return True
    stats = [top]
    if stat.S_ISDIR(top.st_mode):
        stats += [st for _, _, _, st in walk_tree(path)]
    return any(max(st.st_mtime, st.st_ctime) > when for st in stats)
