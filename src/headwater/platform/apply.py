"""The in-task side of kfp-kubernetes settings: applied in the task process, before the component.

`apply_platform` takes the plan the engine made (`TaskPlatform.to_payload()`) and gives the
process what a pod would have had: environment variables from field paths, secrets and config
maps; its volumes at their mount paths; its time limit. For CreatePVC and DeletePVC it does the
whole task. Secret values are read here, in the task process, and go only into its environment
and into the masker that keeps them out of its output (`secret_masker`): never into a log, a
payload, the metadata store or a cache key.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from headwater.errors import PlatformError
from headwater.platform import volumes

if TYPE_CHECKING:
    from headwater.platform.masking import Masker

POD_FILE = "pod.json"


def apply_platform(payload: dict[str, Any], *, mount: bool = True) -> bool:
    """Apply the task's kfp-kubernetes plan (`payload["platform"]`) to this process.

    Call it once the task's environment is set and its output is redirected to its log, and
    before the component runs: mounts are made in a namespace of this process's own (unless
    `mount` is False: a task in its image gets them as the container's volumes, see
    `volume_mounts`).

    Returns:
        True when the plan was the whole task (CreatePVC, DeletePVC): run nothing else.

    Raises:
        PlatformError: A required secret or config map vanished since the task was planned,
            a volume cannot be made, or the system refuses a mount (naming its path).
    """
    plan = payload["platform"]
    for line in plan.get("warnings") or ():
        print(f"headwater: warning: {line}", file=sys.stderr)
    operation = plan.get("operation")
    if operation:
        _operate(operation, payload)
        return True
    workdir = payload["workdir"]
    env = dict(plan.get("env") or {})
    for item in plan.get("env_files") or ():
        try:
            with open(item["path"], "rb") as fh:
                value = fh.read()
        except OSError as exc:
            if item["optional"]:
                continue
            raise PlatformError(f"cannot read {item['what']} for ${item['env']}: {exc}") from exc
        env[item["env"]] = value.decode("utf-8", "surrogateescape")
    os.environ.update(env)
    if plan.get("pod"):
        with open(os.path.join(workdir, POD_FILE), "w", encoding="utf-8") as fh:
            json.dump(plan["pod"], fh, indent=2)
    if mount:
        volumes.mount_all(plan.get("mounts") or (), stage=os.path.join(workdir, ".mounts"))
    timeout = int(plan.get("timeout") or 0)
    if timeout > 0:
        # SIGALRM's default action ends the process, and an alarm survives exec; a task that
        # outlives its deadline fails as a pod past activeDeadlineSeconds does.
        print(
            f"headwater: this task is stopped (SIGALRM) if it runs longer than {timeout} s "
            "(kubernetes.set_timeout)",
            file=sys.stderr,
        )
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(timeout)
    return False


def volume_mounts(plan: dict[str, Any]) -> list[list[Any]]:
    """The plan's mounts as a container's volumes: `[source, target, read_only]`, with an
    empty source for a fresh tmpfs; each source made (and emptied, if fresh) first."""
    found = []
    for item in plan.get("mounts") or ():
        source = item["source"]
        if source:
            if item.get("fresh"):
                import shutil

                shutil.rmtree(source, ignore_errors=True)
            os.makedirs(source, exist_ok=True)
        target = os.path.normpath("/" + str(item["target"]).lstrip("/"))
        found.append([source, target, bool(item.get("read_only"))])
    return found


def secret_masker(paths: Iterable[str], *, warn: bool = False) -> Masker | None:
    """A masker for the values of the secrets the task is given; None if there is none to mask.

    Args:
        paths: Where the values are (`TaskPlatform.masked`): they are read here, in the
            process that masks, and kept nowhere else.
        warn: Name each value too short to mask in a warning on stderr (the task's log).
    """
    paths = list(paths)
    if not paths:
        return None
    from headwater.platform.masking import MIN_LENGTH, Masker, maskable

    values = []
    for path in paths:
        for key_path in key_files(path):
            try:
                with open(key_path, "rb") as fh:
                    value = fh.read()
            except OSError:  # an optional key that is missing: nothing to mask
                continue
            values.append(value)
            if warn and value.strip() and not maskable(value):
                name, key = os.path.basename(os.path.dirname(key_path)), os.path.basename(key_path)
                print(
                    f"headwater: warning: key {key!r} of secret {name!r} is shorter than "
                    f"{MIN_LENGTH} characters, so it is not masked in this task's output",
                    file=sys.stderr,
                )
    masker = Masker(values)
    return masker if masker else None


def key_files(path: str) -> list[str]:
    """`path` if it is a key's file; for a secret's directory, every file in it (a value
    being replaced, `.tmp-*`, included: masking one value too many costs nothing)."""
    if not os.path.isdir(path):
        return [path]
    try:
        names = sorted(os.listdir(path))
    except OSError:  # as a missing optional key: the task cannot read these values either
        return []
    entries = (os.path.join(path, entry) for entry in names)
    return [entry for entry in entries if os.path.isfile(entry)]


def _operate(operation: dict[str, Any], payload: dict[str, Any]) -> None:
    root, name = operation["root"], operation["name"]
    if operation["kind"] == "delete":
        volumes.delete_volume(root, name)
        print(f"deleted volume {name!r} ({os.path.join(root, name)})")
        return
    made = volumes.create_volume(root, name, operation.get("clone") or "")
    where = os.path.join(root, name)
    print(f"{'created' if made else 'reusing existing'} volume {name!r} ({where})")
    outputs = (payload.get("executor_input") or {}).get("outputs") or {}
    out_file = ((outputs.get("parameters") or {}).get("name") or {}).get("outputFile")
    if out_file:
        os.makedirs(os.path.dirname(out_file), exist_ok=True)
        with open(out_file, "w", encoding="utf-8") as fh:
            fh.write(name)
