"""Running a loaded pipeline: bind its arguments, set up the stores, drive the engine loop.

`execute` is the engine behind `headwater.run` and `headwater.resume` (`api/running.py`),
which load or claim the pipeline and build the `RunOptions` it takes.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater import config
from headwater.caching.base import TaskCache
from headwater.engine.loop import EngineLoop
from headwater.engine.options import RunOptions
from headwater.engine.result import Run, TaskInfo
from headwater.engine.state import RunContext, RunStateMachine
from headwater.errors import (
    ParameterError,
    StorageError,
)
from headwater.executors.base import Executor
from headwater.metadata.base import MetadataStore
from headwater.spec.ir import PipelineIR
from headwater.spec.types import coerce, protojson

if TYPE_CHECKING:
    from headwater.artifacts.base import ArtifactStore
    from headwater.metadata.recorder import RunStores

__all__ = ["Run", "TaskInfo", "bind_arguments", "execute", "executor_for", "open_metadata"]


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


def executor_for(options: RunOptions) -> Executor:
    """The executor that `options` names, made for one run (which shuts it down after)."""
    from headwater.executors.registry import create_executor as create

    if not isinstance(options.executor, str):
        raise TypeError("executor_for needs an executor given by name")
    extra: dict[str, Any] = {}
    if options.sandbox is not None and options.executor == "local":
        extra["sandboxed"] = True  # its fork server starts without the machine's secrets
    return create(
        options.executor,
        install_packages=options.install_packages,
        **options.executor_options,
        **extra,
    )


def open_metadata(metadata: MetadataStore | RunStores | str | None) -> RunStores:
    """The run's stores: see `headwater.metadata.recorder.open_run_stores`."""
    from headwater.metadata.recorder import open_run_stores

    return open_run_stores(metadata)


def execute(
    ir: PipelineIR,
    arguments: Mapping[str, Any],
    options: RunOptions,
    *,
    run_id: str | None = None,
    new_run_id: str | None = None,
) -> Run:
    """Run a loaded pipeline to completion: the engine behind `headwater.run` and `resume`.

    With `run_id`, resume that run, which the caller has claimed. With `new_run_id`, a new
    run gets that id instead of a random one (`headwater server` assigns ids when runs are
    submitted). An executor given by name
    is made for this run and shut down after it; one given as an instance is not.

    Raises:
        UserError: The arguments, the options or a store setting is invalid (nothing ran).
    """
    from headwater.artifacts import store_for
    from headwater.caching.resume import ResumeCache
    from headwater.caching.store import StoreTaskCache
    from headwater.engine.recorder import MetadataRecorder
    from headwater.executors.containers import ContainerPolicy
    from headwater.executors.packages import prepare_packages

    options.check()
    if options.sandbox is not None:
        from headwater.sandbox import check_available

        check_available()  # one line naming what is missing, before anything runs
    log_limit = config.task_log_limit()
    metadata, hooks = options.metadata, options.hooks
    with contextlib.ExitStack() as stack:
        backend = (
            options.executor
            if isinstance(options.executor, Executor)
            else stack.enter_context(executor_for(options))
        )

        bound = bind_arguments(ir, arguments)
        input_artifacts = _artifact_arguments(ir, arguments)
        # Where tasks run elsewhere, their packages are resolved there (see the executor).
        # Which tasks run in their images: refused now if a runtime they need is missing.
        containers = ContainerPolicy.build(options.containers, here=not backend.resolves_packages)
        containers.check(ir.executors)
        python_path = (
            ()
            if backend.resolves_packages
            else prepare_packages(
                ir,
                install=options.install_packages,
                skip=containers.wants_image,
                scope=options.namespace,
                sandbox=options.sandbox,
            )
        )
        root = options.pipeline_root or config.pipeline_root()
        artifacts = store_for(root)
        artifacts.check()
        backend.check_root(artifacts.root)
        _check_remote_inputs(artifacts, input_artifacts)
        resuming = run_id is not None
        run_id = run_id or new_run_id or str(uuid.uuid4())
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
            env=_task_run_env(run_id, metadata, sandboxed=options.sandbox is not None),
            log_limit=log_limit,
            max_tasks=config.max_tasks(),
            containers=containers,
            sandbox=options.sandbox,
            platform_home=config.namespace_home(options.namespace) if options.namespace else None,
        )
        machine = RunStateMachine(ir, bound, context, artifact_inputs=input_artifacts)
        result = Run(
            run_id,
            ir.name,
            run_dir,
            artifacts.root,
            created_at=context.create_time_utc,
            machine=machine,
            describe=backend.describe,
            containers=containers.mode,
        )
        pool = backend.admission(max_parallel=options.max_parallel, strict=options.strict_resources)
        task_cache: TaskCache = options.cache or StoreTaskCache(
            stores.recorder, artifacts, scope=options.cache_scope
        )
        if resuming:
            task_cache = ResumeCache(stores.full(), artifacts, run_id, task_cache)
        loop = EngineLoop(
            machine,
            backend,
            pool,
            task_cache,
            options.enable_cache,
            [
                MetadataRecorder(
                    stores.recorder, artifacts, ir, bound, resumed=resuming, hooks=hooks
                ),
                *hooks,
            ],
            result,
            resume=resuming,
            requests=options.requests,
            store=stores.full() if options.requests is not None else None,
        )
        loop.run()
        return result


def _task_run_env(
    run_id: str, metadata: MetadataStore | RunStores | str | None, *, sandboxed: bool
) -> dict[str, str]:
    """What every task is told of its run (`config.TASK_RUN_ENV`): its id and, unless the
    caller passed a store object (whose URL may hide a password) or the tasks are sandboxed
    (they never see the store: `components.registration` asks the engine instead), the
    store's URL."""
    env = {config.RUN_ID_ENV: run_id}
    if sandboxed:
        return env
    if metadata is None or isinstance(metadata, str):
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
