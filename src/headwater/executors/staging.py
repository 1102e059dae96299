"""Remote artifacts as local paths: what a task downloads before its component and uploads after.

Components always get local paths, as KFP's launcher gives them (`/gcs/...`, `/s3/...`): the
task process downloads each remote input to a path under its own folder and uploads each
output after the component succeeded (`executors.launcher`).
"""

from __future__ import annotations

import copy
from typing import Any

from headwater.paths import is_remote_uri
from headwater.task import Launch

__all__ = ["stage_remote"]


def stage_remote(
    launch: Launch,
) -> tuple[dict[str, Any], list[tuple[str, str]], list[tuple[str, str]]]:
    """Map remote artifact URIs to local paths under the task's directory.

    Components always get local paths: the task process downloads each remote input to its
    local path before the component runs, and uploads each output after it succeeded.

    Returns:
        (the ExecutorInput the component sees, [(uri, local) downloads], [(local, uri) uploads])
    """
    executor_input = launch.executor_input
    remote = [
        art["uri"]
        for side in ("inputs", "outputs")
        for spec in (executor_input[side].get("artifacts") or {}).values()
        for art in spec["artifacts"]
        if is_remote_uri(art["uri"])
    ]
    if not remote:
        return executor_input, [], []
    local_input = copy.deepcopy(executor_input)
    downloads, uploads = [], []
    staging = launch.workdir / "artifacts"
    for side in ("inputs", "outputs"):
        for slot, spec in (local_input[side].get("artifacts") or {}).items():
            for index, art in enumerate(spec["artifacts"]):
                uri = art["uri"]
                if not is_remote_uri(uri):
                    continue
                name = uri.rstrip("/").rsplit("/", 1)[-1]
                if side == "outputs" and index == 0:
                    # Outputs share one directory, a mirror of the remote task root, so that
                    # `dsl.get_uri()` there maps back onto it (see `outputs.settle_outputs`).
                    local = str(staging / "outputs" / name)
                else:
                    local = str(staging / side / slot / str(index) / name)
                art["uri"] = local
                if side == "inputs":
                    downloads.append((uri, local))
                else:
                    uploads.append((local, uri))
    return local_input, downloads, uploads
