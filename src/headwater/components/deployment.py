"""`deploy_model`: a pipeline step that serves a registered model in a server of its own.

The task starts (or updates) a `headwater serve` process for a model of the run's registry,
waits until it answers ready, records it in the run's metadata store as an endpoint, and
outputs its URL. The server outlives the run (the one process a task may leave running, see
`headwater.endpoints.supervisor`); `headwater endpoints list` shows it and `headwater endpoints
stop NAME` ends it. Deploying to a running endpoint's name updates that server: with one
worker the new version is swapped in without dropping a request::

    from headwater.components.deployment import deploy_model
    from headwater.components.registry import register_model

    @dsl.pipeline
    def train_and_serve():
        trained = train()
        registered = register_model(model=trained.outputs["model"], name="churn")
        deploy_model(
            model_name=registered.outputs["name"],
            model_version=registered.outputs["version"],
            endpoint="churn",
        )

The server runs on the machine the task runs on, listening on 127.0.0.1 unless `host` says
otherwise (a non-loopback host needs `HEADWATER_TOKEN` in the task's environment, which
every client must then send). Run it uncached (`.set_caching_options(False)`) when the
endpoint may have been stopped since: a cache hit starts nothing.
"""

# No `from __future__ import annotations`: KFP reads the parameter annotations as objects.
from typing import NamedTuple

from headwater.components._component import component


@component(packages_to_install=["headwater[serve]"])
def deploy_model(
    model_name: str,
    model_version: int = 0,
    stage: str = "",
    endpoint: str = "",
    host: str = "127.0.0.1",
    port: int = 0,
    workers: int = 1,
    max_batch_size: int = 1,
    max_latency_ms: float = 5.0,
    grpc_port: int = 0,
) -> NamedTuple("Outputs", url=str, endpoint=str, version=str):  # type: ignore[valid-type]
    """Serve version `model_version` (or the newest in `stage`, or the production version,
    else the newest) of the registered model `model_name` as `endpoint` (default: the
    model's name); output the server's URL, the endpoint's name and the version served.

    `port` 0 keeps a running endpoint's port or picks a free one. `max_batch_size` above 1
    turns on adaptive batching. `grpc_port` above 0 also serves the inference protocol over
    gRPC there.
    """
    from headwater.components.registration import deploy_in_run

    url, name, version, action = deploy_in_run(
        model_name,
        version=model_version,
        stage=stage,
        endpoint=endpoint,
        host=host,
        port=port,
        workers=workers,
        max_batch_size=max_batch_size,
        max_latency_ms=max_latency_ms,
        grpc_port=grpc_port or None,
    )
    print(f"endpoint {name!r} {action}: {url} serves {model_name!r} version {version}")
    return (url, name, version)
