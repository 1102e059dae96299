"""Which tasks run in their container images, by which runtime, and with which image.

The rule (`HEADWATER_CONTAINERS`, `--containers`, `RunOptions.containers`):

* `auto` (the default): a container component (a `container` executor that is not KFP's
  lightweight-Python launcher) runs in its image when a runtime is found; lightweight Python
  components run on the host, in cached package environments. With no runtime, a run with a
  container component is refused before it starts, naming the component and the image.
* `always`: every task in its image, Python components in their `base_image` too (KFP's
  executor is brought in read-only, see `headwater.executors.in_image`).
* `never`: every task on the host, its command run as if the image were this machine.

The runtime is Podman or Docker: `HEADWATER_CONTAINER_RUNTIME` (a name or a path), else the
first of podman, docker on PATH. The engine resolves each image present on its machine once
per run to its id (the sha256 of its config); the id is part of the task's cache key and of
its record, and the task runs exactly that image. The engine never pulls: a task whose image
is absent, or whose pull policy (kfp-kubernetes' `set_image_pull_policy`; IfNotPresent by
default) is Always, pulls it in its own process, and is not cached; one whose policy is Never
fails at once. Where tasks run elsewhere (Dask), the workers resolve and pull on their own
machines.

Containers carry labels naming their run, task and owner (the fork server that started them,
as host/pid/start): `sweep` removes those whose owner is gone, `remove` those of one owner.
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from headwater import config
from headwater.errors import ContainerError
from headwater.processes import process_alive, process_start
from headwater.task import InImage

#: Label keys on every container a task runs in.
LABEL_RUN = "io.headwater.run"
LABEL_TASK = "io.headwater.task"
LABEL_OWNER = "io.headwater.owner"

#: kfp-kubernetes' pull policies, and what each runtime's `run --pull` calls them.
PULL_POLICIES = {"IfNotPresent": "missing", "Always": "always", "Never": "never"}
#: Images of KFP's CreatePVC / DeletePVC components: operations, never a container.
_OPERATIONS = ("argostub/createpvc", "argostub/deletepvc")
#: Podman's transports: images from archives and directories, pulled rather than looked up.
_TRANSPORTS = ("oci-archive:", "docker-archive:", "oci:", "dir:", "docker://", "docker-daemon:")
#: How long one runtime command (an inspect, a removal) may take before it is given up.
_COMMAND_TIMEOUT = 60.0
_INSTALL_HINT = (
    "install Podman (apt install podman, dnf install podman, brew install podman) or Docker, "
    "or set HEADWATER_CONTAINER_RUNTIME to one"
)


_EXECUTOR_MAIN = "kfp.dsl.executor_main"


def python_program(container: dict[str, Any]) -> tuple[str, list[str]] | None:
    """For a lightweight Python component, return (function source, raw args); else None.

    The compiled command is `sh -c <pip prelude> sh -ec <write $0 to a file; run executor_main>
    <source>`; we take the source and skip the shell and its pip install.
    """
    command = [str(c) for c in container.get("command") or []]
    for i, part in enumerate(command[:-1]):
        if _EXECUTOR_MAIN in part and "ephemeral_component.py" in part:
            return command[i + 1], [str(a) for a in container.get("args") or []]
    return None


def is_python(container: dict[str, Any]) -> bool:
    """True for a lightweight Python component (KFP's launcher writes and runs its source)."""
    return python_program(container) is not None


def find_runtime(setting: str | None = None) -> str | None:
    """The runtime's program: `setting` (default `HEADWATER_CONTAINER_RUNTIME`) found on PATH
    or as a path, else podman, else docker on PATH; None when there is none.

    Raises:
        ContainerError: The runtime named by the setting is not there.
    """
    named = setting if setting is not None else config.container_runtime()
    if named:
        found = shutil.which(named)
        if found is None:
            raise ContainerError(
                f"the container runtime {named!r} (HEADWATER_CONTAINER_RUNTIME) is not found: "
                "give the path of podman or docker, or unset it to look for either on PATH"
            )
        return found
    for name in ("podman", "docker"):
        found = shutil.which(name)
        if found is not None:
            return found
    return None


@functools.lru_cache(maxsize=8)
def kind(runtime: str) -> str:
    """`docker` for Docker's CLI, else `podman` (their `run` flags differ for GPUs, users and
    removal): what `runtime --version` says it is (a podman-docker shim named `docker` is
    Podman), else what it is named."""
    try:
        said = subprocess.run(
            [runtime, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout.lower()
    except (OSError, subprocess.TimeoutExpired):
        said = ""
    if "podman" in said:
        return "podman"
    if "docker" in said:
        return "docker"
    return "docker" if "docker" in os.path.basename(runtime) else "podman"


def remove_command(runtime: str, runtime_kind: str = "") -> list[str]:
    """The command that kills and removes containers at once (Podman's `rm -f` would wait 10 s
    for a process that ignores SIGTERM, as a shell as PID 1 does). `runtime_kind`: `kind`'s
    answer when known (a task process has it in its payload, and need not ask again)."""
    if (runtime_kind or kind(runtime)) == "podman":
        return [runtime, "rm", "-f", "-t", "0"]
    return [runtime, "rm", "-f"]


@dataclass
class ContainerPolicy:
    """One run's decisions: its mode and runtime, and each image it resolved (once a run)."""

    mode: str = "auto"
    #: The runtime found on this machine; None when there is none (or the mode is never).
    runtime: str | None = None
    #: Whether the engine's machine is where tasks run (the local executor): then it resolves
    #: and pulls images itself, and refuses a run that needs a runtime it does not have.
    here: bool = True
    args: tuple[str, ...] = ()
    _images: dict[str, str] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def build(cls, mode: str | None, *, here: bool) -> ContainerPolicy:
        """The policy of a run: `mode` (default `HEADWATER_CONTAINERS`) and this machine's
        runtime.

        `mode` is one of `config.CONTAINER_MODES` (`RunOptions.check` refused any other).

        Raises:
            ConfigError: A `HEADWATER_CONTAINER*` setting that cannot be used.
            ContainerError: `HEADWATER_CONTAINER_RUNTIME` names a runtime that is not there.
        """
        chosen = (mode or config.containers()).lower()
        runtime = None if chosen == "never" else find_runtime()
        return cls(chosen, runtime, here, config.container_args() if chosen != "never" else ())

    def wants_image(self, container: dict[str, Any]) -> bool:
        """Whether an executor with this `container` spec runs in its image."""
        if self.mode == "never" or str(container.get("image", "")) in _OPERATIONS:
            return False
        if not container.get("image"):
            return False
        return self.mode == "always" or not is_python(container)

    def check(self, executors: Mapping[str, Mapping[str, Any]]) -> None:
        """Refuse a run that needs a runtime this machine lacks, before anything runs.

        Raises:
            ContainerError: Naming the first such component and its image, and the fix.
        """
        if self.runtime is not None or not self.here:
            return
        for label, executor in sorted(executors.items()):
            container = executor.get("container")
            if container and self.wants_image(dict(container)):
                raise ContainerError(
                    f"component {label.removeprefix('exec-')!r} runs in its image "
                    f"{container.get('image')!r} and no container runtime is found: "
                    f"{_INSTALL_HINT}; or run it on this machine with --containers never"
                )

    def in_image(self, container: dict[str, Any], pull: str) -> InImage | None:
        """How a task of this `container` spec runs in its image; None to run on the host.

        Raises:
            ContainerError: The image is not there and cannot be pulled (by `pull`).
        """
        if not self.wants_image(container):
            return None
        image, python = str(container["image"]), is_python(container)
        if not self.here or self.runtime is None:
            # Resolved and pulled where the task runs (a Dask worker), by its own runtime.
            return InImage("", image, image, "", pull, python, self.args)
        found = self.resolve(image, pull)
        return InImage(self.runtime, image, found or image, found or "", pull, python, self.args)

    def resolve(self, image: str, pull: str) -> str | None:
        """The id of `image` on this machine (once per run); None when the task must pull it
        first (absent, or policy Always): the task does, so the engine never waits on a pull.

        Raises:
            ContainerError: It is absent and its policy is Never.
        """
        assert self.runtime is not None
        if pull == "Always":
            return None
        with self._lock:
            known = self._images.get(image)
        if known:
            return known
        found = image_id(self.runtime, image)
        if found is None:
            if pull == "Never":
                raise ContainerError(_never(self.runtime, image))
            return None
        with self._lock:
            self._images[image] = found
        return found


def pull_policy(settings: dict[str, Any] | None) -> str:
    """The image pull policy kfp-kubernetes set (`imagePullPolicy`), IfNotPresent by default.

    Raises:
        ContainerError: A policy that is none of IfNotPresent, Always, Never.
    """
    value = str((settings or {}).get("imagePullPolicy") or "IfNotPresent")
    if value not in PULL_POLICIES:
        raise ContainerError(
            f"image pull policy {value!r} is not one of {', '.join(PULL_POLICIES)}: fix "
            "kubernetes.set_image_pull_policy"
        )
    return value


def ensure_image(runtime: str, image: str, pull: str) -> tuple[str, str]:
    """`(id, image)` of `image` on this machine, pulled first when `pull` says so.

    Raises:
        ContainerError: One line naming the image, the runtime and why (not present with
            Never; the pull failed).
    """
    name = kind(runtime)
    if pull != "Always":
        found = image_id(runtime, image)
        if found:
            return found, image
        if pull == "Never":
            raise ContainerError(_never(runtime, image))
    proc = _call([runtime, "pull", image], timeout=None)
    if proc.returncode != 0:
        raise ContainerError(
            f"image {image!r} cannot be pulled by {name}: {_last_line(proc)}: check the name "
            f"and the registry, or build it here ({name} build -t {image} ...)"
        )
    found = image_id(runtime, image) or _pulled_id(proc.stdout)
    if not found:
        raise ContainerError(f"image {image!r} was pulled by {name} but is not found after")
    return found, image


def _never(runtime: str, image: str) -> str:
    name = kind(runtime)
    return (
        f"image {image!r} is not present for {name} and its pull policy is Never: build or "
        f"load it ({name} build / {name} load), or set the policy to IfNotPresent"
    )


def image_id(runtime: str, image: str) -> str | None:
    """The id (`sha256:...`) of `image` on this machine, None when it is not there.

    Raises:
        ContainerError: The runtime itself fails (its storage, its daemon).
    """
    if image.startswith(_TRANSPORTS):
        return None  # not a name in local storage: known once pulled (`_pulled_id`)
    proc = _call([runtime, "image", "inspect", "--format", "{{.Id}}", image])
    if proc.returncode == 0:
        found = proc.stdout.strip().splitlines()
        if found:
            value = found[0].strip()
            return value if value.startswith("sha256:") else f"sha256:{value}"
    text = (proc.stderr or "").lower()
    if "no such image" in text or "image not known" in text:
        return None
    raise ContainerError(f"{kind(runtime)} cannot inspect image {image!r}: {_last_line(proc)}")


def _pulled_id(stdout: str) -> str | None:
    """The image id Podman's `pull` prints last (an image from a transport has no name)."""
    lines = stdout.split()
    last = lines[-1] if lines else ""
    return (
        f"sha256:{last}" if len(last) == 64 and all(c in "0123456789abcdef" for c in last) else None
    )


def owner(pid: int | None = None) -> str:
    """This process's owner label (`host/pid/start`): what `sweep` checks is alive."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}/{pid}/{process_start(pid)}"


def owned(owner_label: str) -> bool:
    """False if `owner_label` names a process of this machine that is gone."""
    host, _, rest = owner_label.partition("/")
    pid, _, started = rest.partition("/")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's: its own sweep judges it
    return process_alive(int(pid), started)


def remove(runtime: str, *, owner_label: str, task: str | None = None) -> int:
    """Remove (killing first) every container of `owner_label` (and of `task`, if given);
    return how many there were."""
    filters = ["--filter", f"label={LABEL_OWNER}={owner_label}"]
    if task is not None:
        filters += ["--filter", f"label={LABEL_TASK}={task}"]
    ids = _ids(runtime, filters)
    if ids:
        _call([*remove_command(runtime), *ids])
    return len(ids)


def sweep(runtime: str) -> int:
    """Remove every container a task left whose owner on this machine is gone (a fork server
    that was SIGKILLed); return how many."""
    ids = _ids(runtime, ["--filter", f"label={LABEL_OWNER}"])
    if not ids:
        return 0
    template = f'{{{{.Id}}}} {{{{index .Config.Labels "{LABEL_OWNER}"}}}}'
    proc = _call([runtime, "inspect", "--format", template, *ids])
    gone = []
    for line in proc.stdout.splitlines():
        container, _, label = line.strip().partition(" ")
        if container and label and not owned(label):
            gone.append(container)
    if gone:
        _call([*remove_command(runtime), *gone])
    return len(gone)


def _ids(runtime: str, filters: list[str]) -> list[str]:
    proc = _call([runtime, "ps", "-a", "-q", "--no-trunc", *filters])
    return proc.stdout.split() if proc.returncode == 0 else []


def _call(
    argv: list[str], timeout: float | None = _COMMAND_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ContainerError(
            f"{kind(argv[0])} could not be run ({' '.join(argv[:3])}): {exc}"
        ) from exc


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [line.strip() for line in (proc.stderr or proc.stdout or "").splitlines()]
    lines = [line for line in lines if line]
    text = lines[-1] if lines else f"exit code {proc.returncode}"
    return text.removeprefix("Error: ").removeprefix("error: ")
