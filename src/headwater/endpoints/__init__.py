"""Endpoints: model servers deployed from pipelines (or from Python), recorded in the store.

An endpoint is a `headwater serve` process serving one model under a name, started by the
`deploy_model` component or `deploy_model()` here. It outlives the run that started it; the
metadata store records where it listens, what it serves and which run deployed it. Deploying
to a name already running updates that server (see `supervisor`).

Above the model server (`headwater.serving`, which never imports this package)::

    this package  the API (`headwater.deploy_model`, ...): deploy, list and stop endpoints
    settings      DeploySettings: how a server runs, the one list of deploy_model's settings
    supervisor    the process supervisor: posix_spawn of `headwater serve`, update, stop, state

Example::

    import headwater

    done = headwater.deploy_model("churn@production", name="churn")
    print(done.endpoint.url, done.action)         # http://127.0.0.1:40123 started
    for endpoint in headwater.list_endpoints():
        print(endpoint.name, endpoint.state, endpoint.models[0]["version"])
    headwater.stop_endpoint("churn")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from headwater.api import iso_time
from headwater.api._store import MetadataArg, reading, writing
from headwater.endpoints.settings import DeploySettings
from headwater.errors import NotFoundError
from headwater.metadata.base import EndpointRecord

if TYPE_CHECKING:
    from headwater.sandbox.policy import SandboxPolicy

__all__ = [
    "DeploySettings",
    "Deployment",
    "EndpointInfo",
    "deploy_model",
    "list_endpoints",
    "stop_endpoint",
]


@dataclass(frozen=True)
class EndpointInfo:
    """One recorded endpoint and whether it is up.

    `state` is "running", "stopped" (stopped with `stop_endpoint`), "exited" (its process
    ended some other way) or "unreachable" (it runs on another machine and does not answer).
    `models` lists what it serves: `{"name", "version", "spec", "registered", "uri",
    "framework"}` each. Times are Unix seconds.
    """

    name: str
    url: str
    state: str
    models: list[dict[str, Any]]
    host: str
    pid: int
    config: dict[str, Any]
    log_path: str
    run_id: str | None
    task: str | None
    created_at: float
    updated_at: float

    @classmethod
    def of(cls, record: EndpointRecord) -> EndpointInfo:
        """The API's view of a store record, with its state checked now."""
        from headwater.endpoints.supervisor import state_of

        return cls(
            name=record.name,
            url=record.url,
            state=state_of(record),
            models=[dict(m) for m in record.models],
            host=record.host,
            pid=record.pid,
            config=dict(record.config),
            log_path=record.log_path,
            run_id=record.run_id,
            task=record.task,
            created_at=record.created_at,
            updated_at=record.updated_at,
        )

    def to_json(self) -> dict[str, Any]:
        """The endpoint's JSON shape (`endpoints list --json`)."""
        return {
            "name": self.name,
            "url": self.url,
            "state": self.state,
            "models": self.models,
            "host": self.host,
            "pid": self.pid,
            "config": self.config,
            "log_path": self.log_path,
            "run_id": self.run_id,
            "task": self.task,
            "created_at": iso_time(self.created_at),
            "updated_at": iso_time(self.updated_at),
        }


@dataclass(frozen=True)
class Deployment:
    """What `deploy_model` did: "started", "updated", "restarted" or "unchanged"."""

    endpoint: EndpointInfo
    action: str


def deploy_model(
    model: str,
    *,
    name: str | None = None,
    run_id: str | None = None,
    task: str | None = None,
    metadata: str | None = None,
    sandbox: SandboxPolicy | None = None,
    **settings: Any,
) -> Deployment:
    """Serve `model` as endpoint `name` in a server of its own, and record it.

    Args:
        model: A MODEL spec: a registered model (`NAME`, `NAME:VERSION`, `NAME@STAGE`), an
            artifact URI or a model path.
        name: The endpoint's name (default: the registered model's name, or the file's).
        run_id: The run deploying it, recorded with it.
        task: The task deploying it, recorded with it.
        metadata: The metadata store's SQLAlchemy URL (default `HEADWATER_METADATA_URL`, or
            SQLite in `$HEADWATER_HOME`); the server resolves registry names there.
        sandbox: Run the server in a sandbox that shows it the model's files and nothing
            else of the machine (a sandboxed run's deploy, `headwater.sandbox`).
        **settings: How the server runs, as keywords: the fields of `DeploySettings` (host,
            port, workers, batching; each with its meaning and default there), e.g.
            `workers=2`.

    Raises:
        TypeError: A keyword that is not a setting.
        UserError: A bad argument, a model that does not resolve, or a server that did not
            start (one line, with where its log is).
    """
    from headwater import config
    from headwater.endpoints.supervisor import deploy
    from headwater.metadata import open_store
    from headwater.serving._deps import require_serve
    from headwater.serving.resolve import parse_spec

    wanted = DeploySettings.of(settings, caller="deploy_model")
    require_serve()
    if wanted.grpc_port is not None:
        from headwater.serving._deps import require_grpc

        require_grpc()
    alias, target = parse_spec(model)
    url = metadata or config.metadata_url()
    store = open_store(url)
    try:
        if name is None and alias is None:
            from headwater.serving.resolve import resolve

            name = resolve(target, metadata=store).name
        record, action = deploy(
            target,
            name=name or alias or "",
            store=store,
            metadata_url=url,
            settings=wanted,
            run_id=run_id,
            task=task,
            sandbox=sandbox,
        )
    finally:
        store.close()
    return Deployment(EndpointInfo.of(record), action)


def list_endpoints(*, metadata: MetadataArg = None) -> list[EndpointInfo]:
    """Every recorded endpoint, by name, each with its state checked now. Reads only."""
    with reading(metadata) as store:
        found = [] if store is None else store.list_endpoints()
    return [EndpointInfo.of(e) for e in found]


def stop_endpoint(name: str, *, metadata: MetadataArg = None) -> tuple[EndpointInfo, bool]:
    """Stop endpoint `name`'s server (its requests in flight are answered first) and record
    it stopped.

    Returns:
        The endpoint, and True if a running server was stopped (False: it had ended).

    Raises:
        NotFoundError: No endpoint has that name (the message lists those there are).
        UserError: It runs on another machine.
    """
    from headwater.endpoints.supervisor import stop

    with writing(metadata) as store:
        if store is None:
            raise NotFoundError(f"no endpoint named {name!r}: nothing was deployed yet")
        record, stopped = stop(name, store)
    return EndpointInfo.of(record), stopped
