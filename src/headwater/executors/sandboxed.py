"""The executor's side of a sandboxed task: what its sandbox shows (`sandbox.join` makes it).

A task's own paths come from its launch: its input artifacts (read-only), its folder, its
output artifacts' folders and its run's workspace (writable), the package environments on
its import path (read-only). Under a confined policy (a multi-user server) a local input must
lie under the run's pipeline root, its run folder or a path every task may read: a URI a
user typed must not show another namespace's file.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import subprocess
from typing import Any

from headwater import config
from headwater.errors import SandboxError
from headwater.paths import local_path
from headwater.sandbox.policy import bwrap_path
from headwater.task import Launch

__all__ = ["REQUESTS_FILE", "check_inputs", "read_back", "sandbox_spec"]

#: Where a sandboxed task writes what it asks of the engine (`config.TASK_REQUESTS_ENV`).
REQUESTS_FILE = "requests.jsonl"
#: The most of it the engine reads: bytes, and requests.
MAX_REQUEST_BYTES = 1 << 20
MAX_REQUESTS = 100


@functools.lru_cache(maxsize=1)
def _tools() -> tuple[str, str, str]:
    """bubblewrap's path and version, and the holder's path, found once per process."""
    program = bwrap_path()
    holder = shutil.which("cat")
    if program is None or holder is None:
        raise SandboxError(
            "tasks cannot be sandboxed here: bubblewrap (bwrap) is not installed; install it "
            "(apt install bubblewrap, dnf install bubblewrap)"
        )
    said = subprocess.run([program, "--version"], capture_output=True, text=True, check=False)
    return program, said.stdout.strip().removeprefix("bubblewrap ").strip(), holder


def sandbox_spec(
    launch: Launch, payload: dict[str, Any], component_input: dict[str, Any]
) -> dict[str, Any]:
    """The task's sandbox, for its payload (see `sandbox.join.enter`).

    Raises:
        SandboxError: bubblewrap is missing, or (confined) an input lies outside what the
            task may read.
    """
    policy = launch.sandbox
    assert policy is not None
    program, version, holder = _tools()
    read = check_inputs(launch, component_input)
    write = [str(launch.workdir), launch.placeholders.workspace_path, *payload["dirs"]]
    cpu, memory = launch.limits
    return {
        "bwrap": program,
        "version": version,
        "holder": holder,
        "uid": policy.uid,
        "readable": list(policy.readable),
        "hidden": list(policy.hidden),
        "home": str(config.home()),
        "read": [path for _, path in read],
        "write": write,
        # Shared by the run's tasks and read by nothing outside their sandboxes: its links
        # lead nowhere, so it is not walked for them (it may hold many files).
        "workspace": launch.placeholders.workspace_path,
        "python_path": list(payload.get("python_path") or ()),
        "limits": {"cpu": cpu, "memory": memory},
        "secret_env": [list(pair) for pair in policy.secret_env],
    }


def check_inputs(launch: Launch, component_input: dict[str, Any]) -> list[tuple[str, str]]:
    """The task's local input artifacts, as (input name, path).

    Raises:
        SandboxError: Under a confined policy, one lies outside what the task may read (a
            task in its image is held to it too: its inputs are mounted).
    """
    inputs = component_input["inputs"].get("artifacts") or {}
    read = []
    for name, slot in inputs.items():
        for art in slot["artifacts"]:
            path = local_path(str(art.get("uri") or ""))
            if path and os.path.isabs(path):
                read.append((name, path))
    policy = launch.sandbox
    if policy is not None and policy.confined:
        _check_confined(launch, read, policy.readable)
    return read


def _check_confined(launch: Launch, read: list[tuple[str, str]], readable: tuple[str, ...]) -> None:
    root = local_path(launch.placeholders.pipeline_root)
    allowed = [os.path.abspath(root)] if root else []
    allowed += [str(launch.workdir.parent.parent), *(os.path.abspath(p) for p in readable)]
    for name, path in read:
        real = os.path.realpath(path)
        if not any(real == a or real.startswith(a.rstrip("/") + "/") for a in allowed):
            raise SandboxError(
                f"input artifact {name!r} is {path}, outside this run's pipeline root "
                f"({root or launch.placeholders.pipeline_root}) and the paths every task may "
                "read: import it under the run's pipeline root, or ask an admin to let every "
                "task read it (headwater server --sandbox-read PATH)"
            )


def read_back(launch: Launch, *, ok: bool) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """What the attempt's sandbox enforced (its supervisor's record) and, if it succeeded,
    what it asked of the engine."""
    from headwater.sandbox.join import RECORD_FILE

    record = None
    with contextlib.suppress(OSError, ValueError), open(launch.workdir / RECORD_FILE) as fh:
        found = json.loads(fh.read(MAX_REQUEST_BYTES))
        record = found if isinstance(found, dict) else None
    requests: list[dict[str, Any]] = []
    if ok:
        with contextlib.suppress(OSError), open(launch.workdir / REQUESTS_FILE) as fh:
            # At most what a pipeline's own requests come to: a task cannot make the engine
            # read a file of any size.
            for line in fh.read(MAX_REQUEST_BYTES).splitlines()[:MAX_REQUESTS]:
                with contextlib.suppress(ValueError):
                    request = json.loads(line)
                    if isinstance(request, dict):
                        requests.append(request)
    return record, requests
