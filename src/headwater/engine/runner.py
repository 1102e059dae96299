"""Running a pipeline: validate arguments, set up stores, drive the engine loop, report.

`run` / `run_ir` are the Python API behind `headwater run`; `resume` completes a failed or
interrupted run, reusing every task that succeeded.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater import config
from headwater.caching.base import TaskCache
from headwater.engine.hooks import RunHooks
from headwater.engine.loop import EngineLoop
from headwater.engine.result import Run, TaskInfo
from headwater.engine.state import RunContext, RunStateMachine
from headwater.errors import (
    NotFoundError,
    ParameterError,
    StorageError,
    UserError,
)
from headwater.executors.base import Executor
from headwater.metadata.base import MetadataStore
from headwater.spec.ir import PipelineIR
from headwater.spec.loader import load_pipeline
from headwater.spec.types import coerce, protojson

if TYPE_CHECKING:
    from headwater.artifacts.base import ArtifactStore
    from headwater.metadata.recorder import RunStores

__all__ = ["Run", "TaskInfo", "bind_arguments", "resume", "run", "run_ir"]


def bind_arguments(ir: PipelineIR, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Check pipeline arguments against the root's inputs; apply defaults; coerce types.

    Raises:
        ParameterError: An unknown name, a missing required parameter, or a mistyped value.
    """
    declared = ir.root.interface.input_parameters
    unknown = sorted(set(arguments) - set(declared) - set(ir.root.interface.input_artifacts))
    if unknown:
        valid = ", ".join(sorted(declared)) or "none"
        raise ParameterError(
            f"unknown parameter {unknown[0]!r} for pipeline {ir.name!r} (parameters: {valid})"
        )
    bound: dict[str, Any] = {}
    for name, pdef in declared.items():
        if name in arguments:
            bound[name] = coerce(arguments[name], pdef.type, name=name)
        elif pdef.has_default:
            bound[name] = coerce(protojson(pdef.default), pdef.type, name=name)
        elif not pdef.optional:
            raise ParameterError(
                f"missing required parameter {name!r} for pipeline {ir.name!r}: "
                f"pass it with --param {name}=VALUE"
            )
    return bound


def _artifact_arguments(ir: PipelineIR, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Pipeline-level input artifacts, given as URIs (or lists of URIs)."""
    result = {}
    for name, adef in ir.root.interface.input_artifacts.items():
        if name not in arguments:
            if not adef.optional:
                raise ParameterError(
                    f"missing required input artifact {name!r}: pass its URI with --param "
                    f"{name}=URI"
                )
            continue
        value = arguments[name]
        uris = value if isinstance(value, list) else [value]
        result[name] = [
            {
                "name": name,
                "type": {"schemaTitle": adef.schema_title, "schemaVersion": adef.schema_version},
                "uri": _local_uri(name, str(u.get("uri") if isinstance(u, dict) else u)),
                "metadata": dict(u.get("metadata") or {}) if isinstance(u, dict) else {},
            }
            for u in uris
        ]
    return result


def _local_uri(name: str, uri: str) -> str:
    """A local input artifact as an absolute path, refused before the run if it is not there.

    Tasks run in their own directories, so a relative path is taken from where the run starts.
    Remote URIs are checked later, through the artifact store (`_check_remote_inputs`).
    """
    from headwater.artifacts import is_remote_uri

    if is_remote_uri(uri):
        return uri
    path = uri.removeprefix("file://")
    if not os.path.lexists(path):
        raise ParameterError(
            f"input artifact {name!r}: {uri!r} does not exist; pass the path of an existing file "
            f"or directory (or an s3:// or gs:// URI) with --param {name}=PATH"
        )
    return os.path.abspath(path) if uri == path else "file://" + os.path.abspath(path)


def _check_remote_inputs(artifacts: ArtifactStore, inputs: Mapping[str, Any]) -> None:
    """Remote input artifacts must exist too: one existence check each, before the run."""
    from headwater.artifacts import is_remote_uri

    for name, entries in inputs.items():
        for entry in entries:
            uri = entry["uri"]
            if is_remote_uri(uri) and not artifacts.exists(uri):
                raise ParameterError(
                    f"input artifact {name!r}: nothing is at {uri!r}; pass the URI of an "
                    "existing object or prefix"
                )


def run(
    pipeline: Any,
    arguments: Mapping[str, Any] | None = None,
    *,
    pipeline_name: str | None = None,
    executor: str | Executor = "local",
    max_parallel: int | None = None,
    cache: TaskCache | None = None,
    enable_cache: bool = True,
    pipeline_root: str | None = None,
    metadata: MetadataStore | str | None = None,
    hooks: Sequence[RunHooks] = (),
    install_packages: bool = False,
    strict_resources: bool = False,
    scheduler: Any = None,
    shared_fs: bool = False,
) -> Run:
    """Run a KFP pipeline to completion and return the finished `Run`.

    Args:
        pipeline: A `@dsl.pipeline` object, or a path to a .py file or compiled IR.
        arguments: Pipeline parameters by name (and input artifacts as URIs).
        pipeline_name: Which pipeline of a .py file that defines several.
        executor: An executor's name ("local", "dask", or one registered under the
            `headwater.executors` entry point group), or an `Executor` instance (kept running
            after the run).
        max_parallel: Most tasks at once (default: twice the CPU count).
        cache: How to find earlier results (default: by content in the metadata store).
        enable_cache: False runs every task even if the cache has it (`--no-cache`).
        pipeline_root: Artifact root, a directory or an fsspec URL such as `s3://bucket/x`
            (default `$HEADWATER_PIPELINE_ROOT`, else `$HEADWATER_HOME/artifacts`).
        metadata: A `MetadataStore` or SQLAlchemy URL (default `$HEADWATER_METADATA_URL`,
            else SQLite at `$HEADWATER_HOME/metadata.db`).
        hooks: Observers of the run's lifecycle.
        install_packages: Install missing `packages_to_install` into cached environments.
        strict_resources: Fail a task that asks for more CPU, memory or accelerators than
            this machine has, instead of running it with what there is (after a warning).
        scheduler: For `executor="dask"`: the scheduler's address or a `distributed.Client`
            (default `$HEADWATER_DASK_SCHEDULER`, else a LocalCluster for the run).
        shared_fs: For executors on other hosts: every worker sees the local pipeline root
            at the same path (an NFS mount, say), so a local root is allowed.

    Returns:
        The finished run; `run.state` is "SUCCEEDED" or "FAILED".

    Raises:
        UserError: The pipeline, its arguments or a store setting is invalid (nothing ran).
    """
    with contextlib.ExitStack() as stack:
        if executor == "local":
            # Started first: its fork server warms up while the pipeline loads.
            executor = stack.enter_context(_create("local"))
        ir = load_pipeline(pipeline, pipeline_name=pipeline_name)
        return run_ir(
            ir,
            arguments or {},
            executor=executor,
            max_parallel=max_parallel,
            cache=cache,
            enable_cache=enable_cache,
            pipeline_root=pipeline_root,
            metadata=metadata,
            hooks=hooks,
            install_packages=install_packages,
            strict_resources=strict_resources,
            scheduler=scheduler,
            shared_fs=shared_fs,
        )


def _create(name: str, **options: Any) -> Executor:
    """The executor called `name`, made for one run (which shuts it down after)."""
    from headwater.executors.registry import create_executor

    return create_executor(name, **options)


def open_metadata(metadata: MetadataStore | str | None) -> RunStores:
    """The run's stores: see `headwater.metadata.recorder.open_run_stores`."""
    from headwater.metadata.recorder import open_run_stores

    return open_run_stores(metadata)


def run_ir(
    ir: PipelineIR,
    arguments: Mapping[str, Any],
    *,
    executor: str | Executor = "local",
    max_parallel: int | None = None,
    cache: TaskCache | None = None,
    enable_cache: bool = True,
    pipeline_root: str | None = None,
    metadata: MetadataStore | str | None = None,
    hooks: Sequence[RunHooks] = (),
    install_packages: bool = False,
    strict_resources: bool = False,
    run_id: str | None = None,
    scheduler: Any = None,
    shared_fs: bool = False,
) -> Run:
    """`run` for an already loaded pipeline.

    With `run_id`, resume that run, which the caller has claimed (`resume` does). An executor
    given by name is made for this run and shut down after it; one given as an instance is not.
    """
    from headwater.artifacts import store_for
    from headwater.caching.resume import ResumeCache
    from headwater.caching.store import StoreTaskCache
    from headwater.engine.recorder import MetadataRecorder
    from headwater.executors.packages import prepare_packages

    with contextlib.ExitStack() as stack:
        backend = (
            executor
            if isinstance(executor, Executor)
            else stack.enter_context(
                _create(
                    executor,
                    scheduler=scheduler,
                    shared_fs=shared_fs,
                    install_packages=install_packages,
                )
            )
        )

        bound = bind_arguments(ir, arguments)
        input_artifacts = _artifact_arguments(ir, arguments)
        # Where tasks run elsewhere, their packages are resolved there (see the executor).
        python_path = (
            () if backend.resolves_packages else prepare_packages(ir, install=install_packages)
        )
        if max_parallel is not None and max_parallel < 1:
            raise UserError(f"--max-parallel must be at least 1, got {max_parallel}")
        root = pipeline_root or config.pipeline_root()
        artifacts = store_for(root)
        artifacts.check()
        backend.check_root(artifacts.root)
        _check_remote_inputs(artifacts, input_artifacts)
        resuming = run_id is not None
        run_id = run_id or str(uuid.uuid4())
        created = datetime.now(timezone.utc)
        run_dir = config.runs_dir() / run_id
        # Before the store is opened, so that nothing is recorded for a run that cannot start.
        _make_run_dir(run_dir)
        stores = open_metadata(metadata)
        context = RunContext(
            run_id=run_id,
            job_name=f"{ir.name}-{created:%Y%m%d%H%M%S}",
            pipeline_root=artifacts.root,
            run_dir=run_dir,
            create_time_utc=created.isoformat().replace("+00:00", "Z"),
            artifact_uri=artifacts.uri_for,
            python_path=python_path,
            env=_task_run_env(run_id, metadata),
        )
        machine = RunStateMachine(ir, bound, context, artifact_inputs=input_artifacts)
        result = Run(
            run_id,
            ir.name,
            run_dir,
            artifacts.root,
            created_at=context.create_time_utc,
            machine=machine,
        )
        pool = backend.admission(max_parallel=max_parallel, strict=strict_resources)
        task_cache: TaskCache = cache or StoreTaskCache(stores.recorder, artifacts)
        if resuming:
            task_cache = ResumeCache(stores.full(), artifacts, run_id, task_cache)
        loop = EngineLoop(
            machine,
            backend,
            pool,
            task_cache,
            enable_cache,
            [
                MetadataRecorder(
                    stores.recorder, artifacts, ir, bound, resumed=resuming, hooks=hooks
                ),
                *hooks,
            ],
            result,
            resume=resuming,
        )
        loop.run()
        return result


def _task_run_env(run_id: str, metadata: MetadataStore | str | None) -> dict[str, str]:
    """What every task is told of its run (`config.TASK_RUN_ENV`): its id and, unless the
    caller passed a store object (whose URL may hide a password), the store's URL."""
    env = {config.RUN_ID_ENV: run_id}
    if not isinstance(metadata, MetadataStore):
        env[config.METADATA_URL_ENV] = metadata or config.metadata_url()
    return env


def _make_run_dir(run_dir: Path) -> None:
    """Create the run's folder and its `{{$.workspace_path}}`.

    Raises:
        StorageError: It cannot be created (a read-only or full `$HEADWATER_HOME`).
    """
    try:
        (run_dir / "workspace").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(
            f"cannot create the run folder {str(run_dir)!r}: {exc.strerror or exc}: make "
            f"{str(run_dir.parent)!r} writable, or set HEADWATER_HOME to a writable directory"
        ) from exc


def resume(
    run_id: str,
    *,
    executor: str | Executor = "local",
    max_parallel: int | None = None,
    enable_cache: bool = True,
    metadata: MetadataStore | str | None = None,
    hooks: Sequence[RunHooks] = (),
    install_packages: bool = False,
    strict_resources: bool = False,
    scheduler: Any = None,
    shared_fs: bool = False,
) -> Run:
    """Complete a failed or interrupted run, reusing every task that succeeded in it.

    The run is claimed in the store first, atomically (`MetadataStore.claim_run`): of several
    engines resuming one run at once exactly one runs it; the others raise RunClaimedError.

    Raises:
        NotFoundError: No run with that id.
        RunClaimedError: Another engine is running it (the message names it as pid@host).
        UserError: The run succeeded already.
    """
    from headwater.spec.ir import parse_pipeline

    store = open_metadata(metadata).full()
    record = store.get_run(run_id)
    if record is None:
        raise NotFoundError(f"no run {run_id!r}: see `headwater runs list`")
    doc = store.get_pipeline_ir(record.run_id)
    if doc is None:
        raise NotFoundError(f"run {record.run_id} has no recorded pipeline to resume")
    host, pid = socket.gethostname(), os.getpid()
    store.claim_run(record.run_id, engine_host=host, engine_pid=pid)
    try:
        return run_ir(
            parse_pipeline(doc),
            record.parameters,
            executor=executor,
            max_parallel=max_parallel,
            enable_cache=enable_cache,
            pipeline_root=record.pipeline_root,
            metadata=store,
            hooks=hooks,
            install_packages=install_packages,
            strict_resources=strict_resources,
            run_id=record.run_id,
            scheduler=scheduler,
            shared_fs=shared_fs,
        )
    except BaseException:
        # Stopped before the engine recorded an end (bad setup, Ctrl-C): give the run back,
        # resumable. A no-op once the run is finished or held by another engine.
        with contextlib.suppress(Exception):
            store.mark_interrupted(
                record.run_id, finished_at=time.time(), engine_host=host, engine_pid=pid
            )
        raise
