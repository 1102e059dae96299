"""What a run's sandbox is (`SandboxPolicy`), whether this machine can make one, and which
variables of the machine's environment a sandboxed task may inherit.

Stdlib only: fork servers and task processes import it.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field

from headwater.errors import SandboxError

__all__ = [
    "DEFAULT_UID",
    "SandboxPolicy",
    "bwrap_path",
    "check_available",
    "fork_server_env",
    "inherited_env",
]

#: The uid (and gid) tasks run as when the engine runs as root: `nobody`, which owns nothing.
DEFAULT_UID = 65534

#: Variables of the machine's environment that a sandboxed task (and the fork server it is
#: forked from) inherits: where programs and libraries are, the locale and time zone, the
#: proxy and CA bundle a network needs, thread counts, GPUs. Everything else (tokens, database
#: URLs, cloud keys, `HEADWATER_*`) stays out of the process a task's memory is copied from.
_TASK_ENV = re.compile(
    r"PATH|LANG|LANGUAGE|LC_\w+|TZ|TERM|"
    r"(?i:(http|https|no|all)_proxy)|SSL_CERT_(FILE|DIR)|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|"
    r"(OMP|MKL|OPENBLAS|NUMEXPR)_NUM_THREADS|CUDA_\w+|NVIDIA_\w+|LD_LIBRARY_PATH|"
    r"PYTHONHASHSEED|PYTHONWARNINGS|PYTHONDONTWRITEBYTECODE"
)
#: Also kept for the fork server itself, never passed on to a task: what it needs to find the
#: home and to run container runtimes for tasks in their images (whose environment is the
#: task's own, passed by name).
_SERVER_ENV = re.compile(
    r"HOME|USER|LOGNAME|XDG_RUNTIME_DIR|TMPDIR|VIRTUAL_ENV|PYTHONPATH|"
    r"HEADWATER_(HOME|CONTAINERS|CONTAINER_RUNTIME|CONTAINER_ARGS|TASK_LOG_LIMIT|S3_\w+|"
    r"COMPONENT_IMAGE)|"
    r"CONTAINERS_\w+|CONTAINER_HOST|CONTAINER_CONNECTION|DOCKER_HOST|DOCKER_CONFIG|"
    r"DOCKER_CONTEXT|PODMAN_\w+|REGISTRY_AUTH_FILE|STORAGE_DRIVER"
)


@dataclass(frozen=True)
class SandboxPolicy:
    """How the tasks of a run are sandboxed (`headwater run --sandbox`, and every task of a
    multi-user `headwater server`).

    Attributes:
        uid: The user (and group) id tasks run as when the engine runs as root; an engine
            that is not root runs them as itself, in a user namespace of their own.
        readable: Directories or files every task may read besides its own (shared data sets).
        hidden: Paths no task sees even where they lie inside what it may read (a token file
            beside the Python environment). `$HEADWATER_HOME` is always hidden.
        confined: Input artifacts must lie under the run's pipeline root or `readable` (a
            team server: an input URI must not name another namespace's file); else any
            local input is shown read-only.
        secret_env: Variables every task gets from files only the engine may read, as
            (name, path): a namespace's storage credentials. Read by the task process
            before it enters its sandbox; never carried in a message.
    """

    uid: int = DEFAULT_UID
    readable: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    confined: bool = False
    secret_env: tuple[tuple[str, str], ...] = field(default=(), repr=False)


def bwrap_path() -> str | None:
    """bubblewrap's program on PATH, or None."""
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=4)
def _probe(program: str, root: bool) -> str | None:
    """Why a trivial sandbox of the kind tasks get cannot be made here; None when it can."""
    argv = [program, "--unshare-pid", "--unshare-ipc", "--die-with-parent"]
    if not root:
        argv.append("--unshare-user")
    argv += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap ({program}) could not run: {exc}"
    if done.returncode == 0:
        return None
    said = (done.stderr or "").strip().splitlines()
    why = said[-1] if said else f"exit status {done.returncode}"
    return f"bubblewrap ({program}) cannot make a sandbox here: {why}"


def check_available() -> None:
    """Raise unless this machine can sandbox tasks.

    Raises:
        SandboxError: bubblewrap is not installed, or cannot make namespaces here (unprivileged
            user namespaces are off); the message names the fix.
    """
    program = bwrap_path()
    if program is None:
        raise SandboxError(
            "tasks cannot be sandboxed here: bubblewrap (bwrap) is not installed; install it "
            "(apt install bubblewrap, dnf install bubblewrap)"
        )
    why = _probe(program, os.geteuid() == 0)
    if why is not None:
        raise SandboxError(
            f"tasks cannot be sandboxed here: {why}; allow unprivileged user namespaces "
            "(sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0; on Ubuntu "
            "24.04+ kernel.apparmor_restrict_unprivileged_userns=0), or run the server as root"
        )


def inherited_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` a sandboxed task inherits (see `_TASK_ENV`)."""
    return {k: v for k, v in environ.items() if _TASK_ENV.fullmatch(k)}


def fork_server_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment to start a fork server of sandboxed tasks with: `inherited_env` and
    what the server itself needs (its home, container runtimes). No secret: every task is a
    copy of this process."""
    return {k: v for k, v in environ.items() if _TASK_ENV.fullmatch(k) or _SERVER_ENV.fullmatch(k)}
