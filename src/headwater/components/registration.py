"""Registering a model from inside a pipeline task: the plain function `register_model` calls.

Kept apart from the KFP component (`registry.py`) because a task imports this module, and in
a task's process `kfp.dsl` has no `component` decorator to build the component with.
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
    from headwater.api.models import register_model
    from headwater.errors import UserError
    from headwater.metadata import open_store
    from headwater.metadata.connect import sqlite_file

    run_id = config.run_id()
    url = config.metadata_url()
    if run_id is None:
        raise UserError(
            f"register_model registers a model of a Headwater run, but {config.RUN_ID_ENV} "
            "is not set: run the pipeline with `headwater run`, or call "
            "headwater.register_model() outside a pipeline"
        )
    if url.startswith("sqlite") and sqlite_file(url) is None:
        raise UserError(
            f"the run's metadata store {url!r} is in memory, which a task cannot reach: "
            "run the pipeline with a file or server metadata store"
        )
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
