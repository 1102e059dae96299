"""`RunOptions`: how to run a pipeline, as one frozen object that the API and the CLI build."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from headwater.config import CONTAINER_MODES
from headwater.errors import UserError

if TYPE_CHECKING:
    from headwater.caching.base import TaskCache
    from headwater.engine.hooks import RunHooks
    from headwater.engine.requests import TaskRequests
    from headwater.executors.base import Executor
    from headwater.metadata.base import MetadataStore
    from headwater.metadata.recorder import RunStores
    from headwater.sandbox.policy import SandboxPolicy

__all__ = ["RunOptions"]


@dataclass(frozen=True)
class RunOptions:
    """How to run a pipeline (everything but the pipeline and its arguments).

    `headwater.run(p, max_parallel=4)` is `headwater.run(p, options=RunOptions(max_parallel=4))`;
    `RunOptions.build` turns keywords into one, and `dataclasses.replace` derives another.

    Attributes:
        executor: An executor's name ("local", "dask", or one registered under the
            `headwater.executors` entry point group), made for the run and shut down after
            it; or an `Executor` instance, used and left running.
        executor_options: Options of an executor given by name (for "dask": `scheduler`,
            `shared_fs`; see `headwater.executors.options`). A built-in executor refuses an
            option it does not have.
        max_parallel: Most tasks at once (default: twice the CPU count).
        cache: How to find earlier results (default: by content in the metadata store).
        enable_cache: False runs every task even if the cache has it (`--no-cache`).
        pipeline_root: Artifact root, a directory or an fsspec URL such as `s3://bucket/x`
            (default `$HEADWATER_PIPELINE_ROOT`, else `$HEADWATER_HOME/artifacts`).
        metadata: A `MetadataStore` or SQLAlchemy URL (default `$HEADWATER_METADATA_URL`,
            else SQLite at `$HEADWATER_HOME/metadata.db`); `resume` passes the `RunStores`
            it has opened.
        hooks: Observers of the run's lifecycle.
        install_packages: Install missing `packages_to_install` into cached environments.
        strict_resources: Fail a task that asks for more CPU, memory or accelerators than
            the machine has, instead of running it with what there is (after a warning).
        containers: Which tasks run in their container images: "auto" (container
            components, when Podman or Docker is found), "always" (every task), "never"
            (default `$HEADWATER_CONTAINERS`, else auto; see `headwater.executors.containers`).
        cache_scope: Reuse only the results of runs with the same scope (`headwater server`
            gives a run's namespace: as KFP's, the cache does not cross namespaces).
        sandbox: Run each task on the host in a sandbox of its own (`headwater.sandbox`:
            `--sandbox`, and every run of a multi-user `headwater server`); None: no sandbox.
        namespace: The namespace of a multi-user server whose run this is: its tasks get the
            namespace's own secrets, config maps, volumes and package environments
            (`$HEADWATER_HOME/namespaces/NS`); "" for the machine's.
        requests: Who carries out what sandboxed tasks ask of the engine (register a model,
            deploy one; `headwater.components.registration.RunRequests`); None: no one.
    """

    executor: str | Executor = "local"
    executor_options: Mapping[str, Any] = field(default_factory=dict)
    max_parallel: int | None = None
    cache: TaskCache | None = None
    enable_cache: bool = True
    pipeline_root: str | None = None
    metadata: MetadataStore | RunStores | str | None = None
    hooks: Sequence[RunHooks] = ()
    install_packages: bool = False
    strict_resources: bool = False
    containers: str | None = None
    cache_scope: str = ""
    sandbox: SandboxPolicy | None = None
    namespace: str = ""
    requests: TaskRequests | None = None

    @classmethod
    def build(cls, options: RunOptions | None = None, **settings: Any) -> RunOptions:
        """`options` (default: all defaults) with `settings` applied, checked.

        A setting that is not a field of `RunOptions` is an executor option (`scheduler=`
        for "dask"); one given as None is left unset.

        Raises:
            UserError: A setting that neither the run nor its executor has, an executor
                option for an executor given as an instance, or `max_parallel` below 1.
        """
        base = options or cls()
        fields = {f.name for f in dataclasses.fields(cls)} - {"executor_options"}
        own = {k: v for k, v in settings.items() if k in fields}
        extra = {k: v for k, v in settings.items() if k not in fields and v is not None}
        built = dataclasses.replace(
            base, **own, executor_options={**base.executor_options, **extra}
        )
        built.check()
        return built

    def check(self) -> None:
        """Refuse options that cannot work together.

        Raises:
            UserError: As `build` says.
        """
        if self.max_parallel is not None and self.max_parallel < 1:
            raise UserError(f"--max-parallel must be at least 1, got {self.max_parallel}")
        if self.containers is not None and self.containers.lower() not in CONTAINER_MODES:
            raise UserError(
                f"containers={self.containers!r} is not one of {', '.join(CONTAINER_MODES)}: "
                "auto runs container components in their images when a runtime is found"
            )
        if not self.executor_options:
            return
        names = sorted(self.executor_options)
        if not isinstance(self.executor, str):
            raise UserError(
                f"executor options ({', '.join(names)}) are for an executor given by name; "
                f"configure the {type(self.executor).__name__} itself"
            )
        from headwater.executors.registry import known_options

        known = known_options(self.executor)
        unknown = [n for n in names if known is not None and n not in known]
        if unknown:
            run_fields = sorted({f.name for f in dataclasses.fields(self)} - {"executor_options"})
            raise UserError(
                f"unknown option {unknown[0]!r}: the run's options are {', '.join(run_fields)}; "
                f"executor {self.executor!r} has {', '.join(known or []) or 'none'}"
            )
