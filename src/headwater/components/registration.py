"""Registering and deploying a model from inside a pipeline task: the plain functions the
`register_model` and `deploy_model` components call.

Kept apart from the KFP components (`registry.py`, `deployment.py`) because a task imports
this module, and in a task's process `kfp.dsl` has no `component` decorator to build the
component with.
"""

from __future__ import annotations

import time
from typing import Any

#: How long a task waits for its run's own record, which the engine writes asynchronously.
RUN_RECORD_WAIT_S = 30.0


def register_in_run(
    uri: str,
    name: str,
    *,
    model_metadata: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    stage: str = "none",
    framework: str = "",
) -> tuple[str, int, bool]:
    """Register `uri` as the next version of `name` in the store of the run this task is in.

    Args:
        uri: The model artifact's URI.
        name: The model's name.
        model_metadata: The Model artifact's metadata; its "framework" is used when
            `framework` is empty.
        metrics: Values to keep with the version.
        stage: "none", "staging" or "production".
        framework: What reads the model; default the artifact's own `framework` metadata.

    Returns:
        The name, the version, and True if the version is new (False: the URI was already
        registered under the name).

    Raises:
        UserError: Not a task of a Headwater run (no `HEADWATER_RUN_ID`), the run's store is
            in memory, or a bad name or stage (see `headwater.api.models.register_model`).
    """
    from headwater import config

    if config.task_requests():  # sandboxed: the engine registers it when this task ends
        _ask("register_model", outputs={"version": "version"}, uri=uri, name=name,
             framework=framework or str((model_metadata or {}).get("framework", "")),
             metrics=metrics or {}, stage=stage)  # fmt: skip
        return name, 0, True
    from headwater.api.models import register_model
    from headwater.metadata import open_store

    run_id, url = _task_run("register_model", "headwater.register_model()")
    store = open_store(url)
    try:
        deadline = time.monotonic() + RUN_RECORD_WAIT_S
        while store.get_run(run_id) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        before = {m.version for m in store.list_models(name=name)}
        info = register_model(
            name,
            uri,
            framework=framework or str((model_metadata or {}).get("framework", "")),
            metrics=metrics,
            stage=stage,
            run_id=run_id,
            metadata=store,
        )
    finally:
        store.close()
    return info.name, info.version, info.version not in before


def deploy_in_run(
    model_name: str,
    *,
    version: int = 0,
    stage: str = "",
    endpoint: str = "",
    **settings: Any,
) -> tuple[str, str, str, str]:
    """Deploy version `version` (or the newest in `stage`, or the production version, else
    the newest) of the registered model `model_name` as endpoint `endpoint` (default: the
    model's name), recorded with the run this task is in (see
    `headwater.endpoints.deploy_model`, which takes the server `settings`).

    Returns:
        The URL, the endpoint's name, the version served, and what was done.

    Raises:
        UserError: Not a task of a Headwater run, an in-memory store, a model that is not
            registered, both a version and a stage, or a server that did not start.
    """
    from headwater import config
    from headwater.endpoints import deploy_model
    from headwater.errors import InvalidArgumentError

    if version and stage:
        raise InvalidArgumentError(
            f"give model_version or stage, not both (got {version} and {stage!r})"
        )
    if version < 0:
        raise InvalidArgumentError(f"model_version must be 1 or more (0: any), got {version}")
    spec = model_name
    if version:
        spec = f"{model_name}:{version}"
    elif stage:
        spec = f"{model_name}@{stage}"
    if config.task_requests():  # sandboxed: the engine deploys it when this task ends
        outputs = {"url": "url", "endpoint": "endpoint", "version": "version"}
        _ask("deploy_model", outputs=outputs, spec=spec, endpoint=endpoint or model_name,
             settings=settings)  # fmt: skip
        return "", endpoint or model_name, str(version or ""), "asked"
    run_id, url = _task_run("deploy_model", "headwater.deploy_model()")
    done = deploy_model(
        spec,
        name=endpoint or model_name,
        run_id=run_id,
        metadata=url,
        **settings,
    )
    served = done.endpoint.models[0]["version"] if done.endpoint.models else ""
    return done.endpoint.url, done.endpoint.name, str(served), done.action


def _ask(kind: str, *, outputs: dict[str, str], **request: Any) -> None:
    """Ask the engine (a sandboxed task's only way) to do `kind` for this task's run; what
    it answers sets the task's output parameters named in `outputs` (answer -> output)."""
    import json

    from headwater import config

    path = config.task_requests()
    assert path is not None
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"kind": kind, "outputs": outputs, **request}) + "\n")
    print(
        f"headwater: {kind} is asked of the engine, which does it for this run when the task "
        "has ended, and sets its outputs",
        flush=True,
    )


def _task_run(component: str, outside: str) -> tuple[str, str]:
    """The id of the run this task is in and the URL of its metadata store.

    Raises:
        UserError: Not a task of a Headwater run (no `HEADWATER_RUN_ID`), or the run's
            store is in memory (a task cannot reach it).
    """
    from headwater import config
    from headwater.errors import UserError
    from headwater.metadata.connect import sqlite_file

    run_id = config.run_id()
    url = config.metadata_url()
    if run_id is None:
        raise UserError(
            f"{component} works on a Headwater run, but {config.RUN_ID_ENV} is not set: run "
            f"the pipeline with `headwater run`, or call {outside} outside a pipeline"
        )
    if url.startswith("sqlite") and sqlite_file(url) is None:
        raise UserError(
            f"the run's metadata store {url!r} is in memory, which a task cannot reach: "
            "run the pipeline with a file or server metadata store"
        )
    return run_id, url
