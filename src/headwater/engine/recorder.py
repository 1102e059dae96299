"""`MetadataRecorder`: writes a run into the metadata store as it happens, off the hot path.

Every write goes through one background thread, in order, so the scheduler never waits for
the database or for hashing an artifact: a task's output artifacts are digested (streamed)
once, right after it finishes, on that thread. `after_run` drains the queue before returning.
"""

from __future__ import annotations

import os
import queue
import socket
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any, Literal

from headwater.artifacts.base import content_digest
from headwater.engine.hooks import RunHooks
from headwater.metadata.base import (
    ArtifactRecord,
    EventRecord,
    ExecutionRecord,
    RunRecord,
    StepSeriesRecord,
)
from headwater.metadata.encoding import ir_digest
from headwater.outcome import FAILED_OUTCOME
from headwater.processes import process_start
from headwater.step_metrics import MAX_BYTES, Series, read_steps
from headwater.task import TaskError, TaskState

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from headwater.artifacts.base import ArtifactStore
    from headwater.engine.result import Run
    from headwater.engine.state import TaskRun
    from headwater.metadata.recorder import RunRecorder
    from headwater.spec.ir import PipelineIR
    from headwater.task import Launch

_METRICS = "system.Metrics"


class MetadataRecorder(RunHooks):
    """Record the run, each executor task, its artifacts, events, metrics and step metrics."""

    def __init__(
        self,
        store: RunRecorder,
        artifacts: ArtifactStore,
        ir: PipelineIR,
        parameters: dict[str, Any],
        *,
        resumed: bool = False,
        hooks: Sequence[RunHooks] = (),
    ) -> None:
        self.store = store
        self.hooks = hooks  # told (on_run_warning) of writes that failed
        self.artifacts = artifacts
        self.ir = ir
        self.parameters = parameters
        self.resumed = resumed
        self._queue: queue.SimpleQueue[tuple[str, Callable[..., None], tuple[Any, ...]] | None]
        self._queue = queue.SimpleQueue()
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._drain, name="headwater-metadata", daemon=True)
        self._thread.start()
        self._recorded: set[str] = set()
        self._ids: dict[str, int] = {}  # artifact URI -> id; the writer thread's alone

    def _submit(self, fn: Callable[..., None], *args: Any, task: str = "") -> None:
        self._queue.put((task, fn, args))

    def _drain(self) -> None:
        """The writer thread: apply queued writes in order, each batch in one transaction."""
        done = False
        while not done:
            ops = [self._queue.get()]
            while True:
                try:
                    ops.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if ops[-1] is None:
                done = True
            work = [op for op in ops if op is not None]
            # A task that already finished needs no RUNNING record.
            finished = {t for t, fn, _ in work if t and fn != self._record_start}
            work = [op for op in work if not (op[1] == self._record_start and op[0] in finished)]
            try:
                with self.store.batch():
                    self._apply(work)
            except Exception:
                # One bad write must not take the others (the run's final state) with it.
                for op in work:
                    try:
                        with self.store.batch():
                            self._apply([op])
                    except Exception as exc:  # reported by flush(); the run itself goes on
                        self._errors.append(exc)

    def _apply(self, work: list[tuple[str, Callable[..., None], tuple[Any, ...]]]) -> None:
        """Run queued writes in order; consecutive cache hits go in as one bulk insert."""
        hits: list[dict[str, Any]] = []
        run_id = ""
        for _, fn, args in work:
            first_try = args[1]["attempts"] <= 1 if fn == self._record_task else False
            if first_try and args[1]["state"] == "CACHED" and not self.resumed:
                run_id = args[0]
                hits.append(args[1])
                continue
            if hits:
                self._record_hits(run_id, hits)
                hits = []
            fn(*args)
        if hits:
            self._record_hits(run_id, hits)

    # -- hooks ----------------------------------------------------------------------------

    def before_run(self, *, run: Run) -> None:
        record = RunRecord(
            run_id=run.run_id,
            pipeline=self.ir.name,
            pipeline_version=ir_digest(self.ir.raw),
            state="RUNNING",
            parameters=self.parameters,
            pipeline_root=run.pipeline_root,
            created_at=time.time(),
            engine_host=socket.gethostname(),
            engine_pid=os.getpid(),
            engine_started=process_start(os.getpid()),
        )
        if not self.resumed:  # a resumed run was claimed (set RUNNING) before it started
            self._submit(self._create, record)

    def before_task(self, *, run: Run, launch: Launch) -> None:
        # Recorded RUNNING now, so a run whose engine dies shows what it was doing.
        if run.machine is None:
            return
        task = run.machine.tasks[launch.task_id]
        snap = _snapshot(task)
        execution = ExecutionRecord(
            run_id=run.run_id,
            task=snap["name"],
            state="RUNNING",
            component=snap["component"],
            parent_dag=snap["parent_dag"],
            iteration=snap["iteration"],
            inputs=snap["inputs"],
            started_at=snap["started_at"],
            log_path=snap["log_path"],
            attempts=snap["attempts"],
        )
        self._submit(self._record_start, execution, task=task.name)

    def after_task(self, *, run: Run, task: TaskRun, state: TaskState) -> None:
        if not task.state.final or task.resumed:
            return  # a retry is coming, or the execution is already recorded
        self._recorded.add(task.name)
        self._submit(self._record_task, run.run_id, _snapshot(task), task=task.name)

    def after_run(self, *, run: Run) -> None:
        # Tasks never made (inside a DAG task that failed first) carry its error.
        errors = {t.name: vars(t.error) for t in run.tasks if t.error is not None}
        for name, state, task in run.machine.executor_tasks() if run.machine else ():
            if name in self._recorded or (task is not None and task.resumed):
                continue
            if task is not None and task.state.final:
                self._submit(self._record_task, run.run_id, _snapshot(task))
            else:
                shown = state.value if state.final else "CANCELED"
                execution = ExecutionRecord(
                    run_id=run.run_id, task=name, state=shown, error=errors.get(name)
                )
                self._submit(self._record_execution, execution)
        error = None if run.error is None else vars(run.error)
        self._submit(self._finish, run.run_id, run.state, run.outputs, error)
        failure = self.flush()
        if failure is not None:
            for hook in self.hooks:
                hook.on_run_warning(run=run, message=failure)

    def flush(self) -> str | None:
        """Wait for every queued write.

        Returns:
            A line on the writes that failed (they do not stop the run), or None.
        """
        self._queue.put(None)
        self._thread.join()
        if not self._errors:
            return None
        more = f" (and {len(self._errors) - 1} more)" if len(self._errors) > 1 else ""
        # A driver error's text goes on with its SQL and parameters: its first line says it.
        lines = str(self._errors[0]).strip().splitlines()
        reason = lines[0] if lines else type(self._errors[0]).__name__
        return f"recording metadata in {self.store!r} failed: {reason}{more}"

    # -- writes (on the writer thread) ----------------------------------------------------

    def _create(self, record: RunRecord) -> None:
        self.store.create_run(record, ir=dict(self.ir.raw))

    def _finish(self, run_id: str, state: str, outputs: dict[str, Any], error: Any) -> None:
        # Only while this engine holds the run: one whose run another server took over
        # (its lease lapsed) must not end it.
        self.store.finish_run(
            run_id,
            state=state,
            outputs=outputs,
            error=error,
            finished_at=time.time(),
            engine_host=socket.gethostname(),
            engine_pid=os.getpid(),
        )

    def _record_execution(self, execution: ExecutionRecord) -> None:
        self.store.record_execution(execution)

    def _record_start(self, execution: ExecutionRecord) -> None:
        self.store.record_execution(execution)

    def _record_hits(self, run_id: str, snaps: list[dict[str, Any]]) -> None:
        """Record cache hits: new executions pointing at the artifacts they reused."""
        ids = self.store.insert_executions([_execution(run_id, snap) for snap in snaps])
        events = []
        for execution_id, snap in zip(ids, snaps, strict=True):
            self._ids.update(snap["artifact_ids"])
            sides: tuple[tuple[str, Literal["INPUT", "OUTPUT"]], ...] = (
                ("input_artifacts", "INPUT"),
                ("output_artifacts", "OUTPUT"),
            )
            for side, kind in sides:
                for slot, arts in snap[side].items():
                    for index, art in enumerate(arts):
                        artifact_id = self._known_or_new(art)
                        events.append(EventRecord(execution_id, artifact_id, kind, slot, index))
                        if kind == "OUTPUT":
                            self._record_metrics(run_id, execution_id, artifact_id, art)
        self.store.record_events(events)

    def _record_task(self, run_id: str, snap: dict[str, Any]) -> None:
        self._ids.update(snap["artifact_ids"])
        execution = _execution(run_id, snap)
        execution_id = self.store.record_execution(execution)
        events = []
        for slot, arts in snap["input_artifacts"].items():
            for index, art in enumerate(arts):
                artifact_id = self._known_or_new(art)
                events.append(EventRecord(execution_id, artifact_id, "INPUT", slot, index))
        if snap["state"] in ("SUCCEEDED", "CACHED"):
            for slot, arts in snap["output_artifacts"].items():
                for index, art in enumerate(arts):
                    if snap["state"] == "CACHED":
                        artifact_id = self._known_or_new(art)
                    else:
                        artifact_id = self._new(art, producer=execution_id)
                    events.append(EventRecord(execution_id, artifact_id, "OUTPUT", slot, index))
                    self._record_metrics(run_id, execution_id, artifact_id, art)
        self.store.record_events(events)

    def _record_metrics(
        self, run_id: str, execution_id: int, artifact_id: int, art: dict[str, Any]
    ) -> None:
        if (art.get("type") or {}).get("schemaTitle") != _METRICS:
            return
        metrics = {
            k: float(v)
            for k, v in (art.get("metadata") or {}).items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
        if metrics:
            self.store.record_metrics(run_id, execution_id, artifact_id, metrics)
        series = self._step_series(art["uri"])
        if series:
            self.store.record_step_metrics(
                [
                    StepSeriesRecord(run_id, execution_id, artifact_id, s.name, s.points, s.logged)
                    for s in series
                ]
            )

    def _step_series(self, uri: str) -> list[Series]:
        """The step metrics logged in a Metrics artifact's file (`headwater.step_metrics`):
        read where it lies on this machine, else (a remote store's) copied here first,
        if it is small enough."""
        local = uri.removeprefix("file://")
        if "://" not in local:
            return read_steps(local)
        if not _is_ours(self.artifacts, uri):
            return []
        found = self.artifacts.digest(uri)
        if found is None or found.size > MAX_BYTES:
            return []
        with tempfile.TemporaryDirectory(prefix="headwater-steps-") as scratch:
            copy = os.path.join(scratch, "metrics")
            self.artifacts.download(uri, copy)
            return read_steps(copy)

    def _new(self, art: dict[str, Any], *, producer: int | None) -> int:
        # Ours: through the store (local or remote). Elsewhere: local paths only; a remote
        # import is not downloaded just to digest it.
        uri = art["uri"]
        found = self.artifacts.digest(uri) if _is_ours(self.artifacts, uri) else content_digest(uri)
        artifact_id = self.store.record_artifact(
            ArtifactRecord(
                uri=uri,
                schema_title=(art.get("type") or {}).get("schemaTitle", "system.Artifact"),
                name=art.get("name", ""),
                digest=found.hex if found else None,
                size=found.size if found else None,
                signature=found.signature if found else None,
                metadata=dict(art.get("metadata") or {}),
                producer=producer,
                created_at=time.time(),
            )
        )
        self._ids[art["uri"]] = artifact_id
        return artifact_id

    def _known_or_new(self, art: dict[str, Any]) -> int:
        """The id of an artifact recorded before (memoised per run), or record it now."""
        if art["uri"] in self._ids:
            return self._ids[art["uri"]]
        known = self.store.get_artifact(art["uri"])
        if known is not None and known.id is not None:
            self._ids[art["uri"]] = known.id
            return known.id
        return self._new(art, producer=None)


def _execution(run_id: str, snap: dict[str, Any]) -> ExecutionRecord:
    return ExecutionRecord(
        run_id=run_id,
        task=snap["name"],
        state=snap["state"],
        component=snap["component"],
        parent_dag=snap["parent_dag"],
        iteration=snap["iteration"],
        inputs=snap["inputs"],
        outputs=snap["outputs"],
        cache_key=snap["cache_key"],
        cached_from=snap["cached_from"],
        started_at=snap["started_at"],
        finished_at=snap["finished_at"],
        log_path=snap["log_path"],
        error=snap["error"],
        attempts=snap["attempts"],
        executor=snap["executor"],
        worker=snap["worker"],
        container=snap["container"],
        sandbox=snap["sandbox"],
    )


def _is_ours(artifacts: ArtifactStore, uri: str) -> bool:
    return uri.startswith(artifacts.root.rstrip("/") + "/")


def _snapshot(task: TaskRun) -> dict[str, Any]:
    """What the writer thread needs, copied now (the task object belongs to the engine)."""
    state = task.state.value
    if task.cached and task.state is TaskState.SUCCEEDED:
        state = "CACHED"
    launch = task.launch
    error = task.error
    if task.failed_outcome and task.state is TaskState.SUCCEEDED:
        # Recorded with why, and without a key: no later run is served this failure.
        log = str(launch.log_path) if launch is not None else None
        error = TaskError(task.name, FAILED_OUTCOME, task.failed_outcome, log_path=log)
    return {
        "name": task.name,
        "state": state,
        "component": task.spec.component,
        "parent_dag": task.dag.prefix.rstrip("."),
        "iteration": task.dag.suffix,
        "inputs": dict(task.parameters),
        "outputs": dict(task.outputs.parameters),
        "input_artifacts": {k: list(v) for k, v in task.artifacts.items()},
        "output_artifacts": {k: list(v) for k, v in task.outputs.artifacts.items()},
        "cache_key": "" if task.failed_outcome else task.fingerprint,
        "cached_from": task.cached_from,
        "artifact_ids": dict(task.artifact_ids),
        "started_at": task.started_at,
        "finished_at": task.finished_at,
        "log_path": str(launch.log_path) if launch is not None else "",
        "executor": task.executor or None,
        "worker": task.worker or None,
        "container": task.container,
        "sandbox": task.sandbox,
        "error": None if error is None else vars(error),
        "attempts": task.attempts,
    }
