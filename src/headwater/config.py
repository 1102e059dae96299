"""Settings: every `HEADWATER_*` environment variable, each read when its accessor is called.

One accessor per variable; none is read at import time, so a value set after
`import headwater` (a notebook, a test, a task's own environment) is the one used. A value
that cannot be used raises `ConfigError`, one line of the same form for every variable::

    HEADWATER_DASK_WORKERS='many' is not a valid int (a whole number, 1 or more): fix or unset it

An empty or blank value means unset. The `*_ENV` constants are the variables' names, for code
that sets them in a child process's environment. This module is stdlib-only: task processes,
fork servers and Dask workers import it. README.md ("Settings") lists every variable.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from headwater.errors import ConfigError
from headwater.logs import MIN_LIMIT

__all__ = [
    "component_image",
    "container_args",
    "container_runtime",
    "containers",
    "containers_dir",
    "dask_device_memory_limit",
    "dask_memory_limit",
    "dask_paused_timeout_s",
    "dask_scheduler",
    "dask_spill_dir",
    "dask_threads",
    "dask_worker",
    "dask_worker_timeout_s",
    "dask_workers",
    "ddp_start_timeout_s",
    "envs_dir",
    "home",
    "home_command",
    "metadata_url",
    "namespace_home",
    "pipeline_root",
    "rmm_pool_size",
    "run_id",
    "runs_dir",
    "s3_connect_timeout_s",
    "s3_read_timeout_s",
    "s3_retries",
    "serve_changes",
    "serve_config",
    "task_requests",
    "token",
]

HOME_ENV = "HEADWATER_HOME"
PIPELINE_ROOT_ENV = "HEADWATER_PIPELINE_ROOT"
#: Set by the engine in every task's environment: the id of the task's run, and the URL of
#: the metadata store recording it (where the run's own store has one). Neither is part of a
#: task's cache key: they say where the task runs, not what it computes.
RUN_ID_ENV = "HEADWATER_RUN_ID"
METADATA_URL_ENV = "HEADWATER_METADATA_URL"
TASK_RUN_ENV = (RUN_ID_ENV, METADATA_URL_ENV)
#: Set by Headwater in every task's environment (by the task's process, so never part of its
#: cache key): the file a task writes to say its outcome is a failure (`headwater.outcome`).
TASK_OUTCOME_ENV = "HEADWATER_TASK_OUTCOME"
#: Set by Headwater in the environment of a sandboxed task: the file where it asks the engine
#: for what it may not do itself (register a model, deploy one: `components.registration`),
#: carried out for its own run when it has ended.
TASK_REQUESTS_ENV = "HEADWATER_TASK_REQUESTS"
#: The image compiled components name.
COMPONENT_IMAGE_ENV = "HEADWATER_COMPONENT_IMAGE"
# Containers: which tasks run in their images, by which runtime, with which extra arguments.
CONTAINERS_ENV = "HEADWATER_CONTAINERS"
CONTAINER_RUNTIME_ENV = "HEADWATER_CONTAINER_RUNTIME"
CONTAINER_ARGS_ENV = "HEADWATER_CONTAINER_ARGS"
#: `HEADWATER_CONTAINERS` values: container components in their images when a runtime is
#: found (auto), every task in its image (always), none (never).
CONTAINER_MODES = ("auto", "always", "never")
#: Set for every task under `--executor dask`: the run's scheduler, and (for a task on a
#: worker) that worker's address.
DASK_SCHEDULER_ENV = "HEADWATER_DASK_SCHEDULER"
DASK_WORKER_ENV = "HEADWATER_DASK_WORKER"
DASK_WORKER_TIMEOUT_ENV = "HEADWATER_DASK_WORKER_TIMEOUT"
DASK_WORKERS_ENV = "HEADWATER_DASK_WORKERS"
DASK_THREADS_ENV = "HEADWATER_DASK_THREADS"
DASK_MEMORY_LIMIT_ENV = "HEADWATER_DASK_MEMORY_LIMIT"
DASK_SPILL_DIR_ENV = "HEADWATER_DASK_SPILL_DIR"
DASK_DEVICE_MEMORY_LIMIT_ENV = "HEADWATER_DASK_DEVICE_MEMORY_LIMIT"
#: The data steps on Polars (one machine): the memory past which they spill, and where to.
DATA_MEMORY_LIMIT_ENV = "HEADWATER_DATA_MEMORY_LIMIT"
DATA_SPILL_DIR_ENV = "HEADWATER_DATA_SPILL_DIR"
RMM_POOL_SIZE_ENV = "HEADWATER_RMM_POOL_SIZE"
DASK_PAUSED_TIMEOUT_ENV = "HEADWATER_DASK_PAUSED_TIMEOUT"
DDP_START_TIMEOUT_ENV = "HEADWATER_DDP_START_TIMEOUT"
S3_CONNECT_TIMEOUT_ENV = "HEADWATER_S3_CONNECT_TIMEOUT"
S3_READ_TIMEOUT_ENV = "HEADWATER_S3_READ_TIMEOUT"
S3_RETRIES_ENV = "HEADWATER_S3_RETRIES"
#: The most bytes a server reads of one artifact to send it (a download, KFP's `:read`).
ARTIFACT_READ_LIMIT_ENV = "HEADWATER_ARTIFACT_READ_LIMIT"
#: The most bytes a task's log keeps (its first and last parts; 0 for no cap).
TASK_LOG_LIMIT_ENV = "HEADWATER_TASK_LOG_LIMIT"
MAX_TASKS_ENV = "HEADWATER_MAX_TASKS"
TOKEN_ENV = "HEADWATER_TOKEN"
#: Set by `headwater serve` for its worker processes: the server's config file, and the log
#: through which workers share admin changes.
SERVE_CONFIG_ENV = "HEADWATER_SERVE_CONFIG"
SERVE_CHANGES_ENV = "HEADWATER_SERVE_CHANGES"
#: Set in the environment of a process a task starts to outlive it (a model server); the fork
#: server reads it from `/proc/PID/environ`, never from its own environment.
SERVICE_ENV = "HEADWATER_SERVICE"

DEFAULT_COMPONENT_IMAGE = "python:3.11-slim"


# --- where Headwater keeps its state ----------------------------------------------------------


def home() -> Path:
    """`HEADWATER_HOME`, default `~/.headwater`: runs, logs, artifacts and caches live here."""
    value = os.environ.get(HOME_ENV)
    return Path(value).expanduser() if value else Path.home() / ".headwater"


def home_command(*words: str) -> str:
    """A `headwater` command line to print as a next step, that works when pasted.

    `words` follow `headwater`, each quoted for a POSIX shell. When `HEADWATER_HOME` is set
    to another place than the default, the line sets it first
    (`HEADWATER_HOME=.headwater-demo headwater serve higgs-xgboost:1`): the process that
    prints it may have had it set for it alone, as `make demo` does, not in the user's shell.
    """
    import shlex

    line = shlex.join(["headwater", *words])
    value = os.environ.get(HOME_ENV, "").strip()
    if value and Path(value).expanduser() != Path.home() / ".headwater":
        line = f"{HOME_ENV}={shlex.quote(value)} {line}"
    return line


def pipeline_root() -> str:
    """Where artifacts go: `HEADWATER_PIPELINE_ROOT`, default `$HEADWATER_HOME/artifacts`."""
    return os.environ.get(PIPELINE_ROOT_ENV) or str(home() / "artifacts")


def runs_dir() -> Path:
    """Per-run folders: task logs, executor inputs and outputs, the run record."""
    return home() / "runs"


def envs_dir() -> Path:
    """Cached package environments for `--install-packages`."""
    return home() / "envs"


def namespace_home(namespace: str) -> Path:
    """What a namespace of a multi-user server has of its own: its secrets, config maps and
    volumes (`$HEADWATER_HOME/namespaces/NAMESPACE`, laid out as the home's own)."""
    if not namespace or "/" in namespace or namespace in (".", ".."):
        raise ConfigError(f"{namespace!r} is not a namespace name")
    return home() / "namespaces" / namespace


def metadata_url() -> str:
    """`HEADWATER_METADATA_URL`, default SQLite at `$HEADWATER_HOME/metadata.db`."""
    return os.environ.get(METADATA_URL_ENV) or f"sqlite:///{home() / 'metadata.db'}"


def run_id() -> str | None:
    """The run this process is a task of (`HEADWATER_RUN_ID`, set by the engine); else None."""
    return os.environ.get(RUN_ID_ENV) or None


def task_requests() -> str | None:
    """`HEADWATER_TASK_REQUESTS`: where a sandboxed task writes what it asks of the engine
    (one JSON object a line); None outside a sandboxed task."""
    return os.environ.get(TASK_REQUESTS_ENV) or None


# --- components --------------------------------------------------------------------------------


def component_image() -> str:
    """`HEADWATER_COMPONENT_IMAGE`: the image Headwater's components compile to name (default
    `python:3.11-slim`, which installs Headwater from the package index when a pod starts)."""
    return _text(COMPONENT_IMAGE_ENV) or DEFAULT_COMPONENT_IMAGE


# --- containers ---------------------------------------------------------------------------------


def containers() -> str:
    """`HEADWATER_CONTAINERS`: which tasks run in their container images, one of
    `CONTAINER_MODES` (default auto)."""
    text = _text(CONTAINERS_ENV)
    if text is None:
        return "auto"
    if text.lower() not in CONTAINER_MODES:
        raise _bad(CONTAINERS_ENV, text, "one of " + ", ".join(CONTAINER_MODES))
    return text.lower()


def container_runtime() -> str | None:
    """`HEADWATER_CONTAINER_RUNTIME`: the container runtime to use (`podman`, `docker`, or a
    path to either); None to look for podman, then docker, on PATH."""
    return _text(CONTAINER_RUNTIME_ENV)


def container_args() -> tuple[str, ...]:
    """`HEADWATER_CONTAINER_ARGS`: more arguments for every `run` of the runtime, split as
    the shell splits them (`--network=host --shm-size=1g`)."""
    import shlex

    text = _text(CONTAINER_ARGS_ENV)
    if text is None:
        return ()
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise _bad(CONTAINER_ARGS_ENV, text, f"arguments the shell can split ({exc})") from None


def containers_dir() -> Path:
    """What tasks in images share: the package environments installed in each image."""
    return home() / "containers"


# --- Dask ---------------------------------------------------------------------------------------


def dask_scheduler() -> str | None:
    """`HEADWATER_DASK_SCHEDULER`: the Dask scheduler's address (`tcp://host:8786`), set by the
    engine for every task under `--executor dask`; None: no cluster given."""
    return _text(DASK_SCHEDULER_ENV)


def dask_worker() -> str | None:
    """`HEADWATER_DASK_WORKER`: the address of the Dask worker this task runs on, else None."""
    return _text(DASK_WORKER_ENV)


def dask_worker_timeout_s() -> float:
    """`HEADWATER_DASK_WORKER_TIMEOUT`: seconds the dask executor waits for a first worker on a
    scheduler that has none (default 60)."""
    return _seconds(DASK_WORKER_TIMEOUT_ENV, 60.0, finite=False)


def dask_paused_timeout_s() -> float:
    """`HEADWATER_DASK_PAUSED_TIMEOUT`: seconds `headwater.compute.compute` waits while the work
    is stuck on paused workers before it fails (default 60)."""
    return _seconds(DASK_PAUSED_TIMEOUT_ENV, 60.0, finite=False)


def dask_workers() -> int | None:
    """`HEADWATER_DASK_WORKERS`: worker processes of a local cluster Headwater starts; None:
    the caller's default."""
    return _count(DASK_WORKERS_ENV, minimum=1)


def dask_threads() -> int | None:
    """`HEADWATER_DASK_THREADS`: threads per worker of a local cluster; None: the default."""
    return _count(DASK_THREADS_ENV, minimum=1)


def dask_memory_limit() -> str | None:
    """`HEADWATER_DASK_MEMORY_LIMIT`: host memory per worker before spilling ("2GB", 0.4,
    "auto"), as Dask parses it; None: Dask's default."""
    return _text(DASK_MEMORY_LIMIT_ENV)


def dask_spill_dir() -> str | None:
    """`HEADWATER_DASK_SPILL_DIR`: where workers spill; None: the system's temp directory."""
    return _text(DASK_SPILL_DIR_ENV)


def data_memory_limit() -> int | None:
    """`HEADWATER_DATA_MEMORY_LIMIT`: the memory, in bytes, past which the data steps on
    Polars spill to disk ("1GB", "500MB", "2GiB" or a number of bytes); None: Polars' default
    (a share of the machine's memory)."""
    text = _text(DATA_MEMORY_LIMIT_ENV)
    if text is None:
        return None
    found = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]i?b|b)?", text, re.IGNORECASE)
    value = 0.0
    if found:
        unit = (found.group(2) or "b").lower()
        scale = 1024 if "i" in unit else 1000
        value = float(found.group(1)) * scale ** "bkmgt".index(unit[0])
    if value < 64_000_000:
        raise _bad(DATA_MEMORY_LIMIT_ENV, text, 'a size of 64MB or more ("1GB", "500MB")')
    return int(value)


def data_spill_dir() -> str | None:
    """`HEADWATER_DATA_SPILL_DIR`: where the data steps on Polars spill; None: Polars' own
    (under the system's temp directory)."""
    return _text(DATA_SPILL_DIR_ENV)


def dask_device_memory_limit() -> str | None:
    """`HEADWATER_DASK_DEVICE_MEMORY_LIMIT`: GPU memory per worker before spilling to host, as
    dask-cuda parses it; None: its default."""
    return _text(DASK_DEVICE_MEMORY_LIMIT_ENV)


def rmm_pool_size() -> str | None:
    """`HEADWATER_RMM_POOL_SIZE`: an RMM pool per GPU worker ("8GB"); None: no pool."""
    return _text(RMM_POOL_SIZE_ENV)


# --- PyTorch ------------------------------------------------------------------------------------


def ddp_start_timeout_s() -> float:
    """`HEADWATER_DDP_START_TIMEOUT`: seconds the replicas of a `pytorch_job` on Dask may take
    to start, all of them (default 120)."""
    return _seconds(DDP_START_TIMEOUT_ENV, 120.0, finite=False)


# --- S3 -----------------------------------------------------------------------------------------


def s3_connect_timeout_s() -> float:
    """`HEADWATER_S3_CONNECT_TIMEOUT`: seconds to open a connection to S3 (default 10)."""
    return _seconds(S3_CONNECT_TIMEOUT_ENV, 10.0, finite=True)


def s3_read_timeout_s() -> float:
    """`HEADWATER_S3_READ_TIMEOUT`: seconds to wait for S3's next bytes (default 30)."""
    return _seconds(S3_READ_TIMEOUT_ENV, 30.0, finite=True)


def s3_retries() -> int:
    """`HEADWATER_S3_RETRIES`: attempts of an S3 call after the first (default 2)."""
    value = _count(S3_RETRIES_ENV, minimum=0, what="a whole number of retries (0 or more)")
    return 2 if value is None else value


def artifact_read_limit() -> int:
    """`HEADWATER_ARTIFACT_READ_LIMIT`: the most bytes a server sends of one artifact (a UI
    download, KFP's `:read`; default 256 MiB)."""
    value = _count(ARTIFACT_READ_LIMIT_ENV, minimum=1, what="a number of bytes (1 or more)")
    return 256 * 1024 * 1024 if value is None else value


def task_log_limit() -> int | None:
    """`HEADWATER_TASK_LOG_LIMIT`: the most bytes a task's log keeps, its first half and its
    latest quarter past it with the cut marked (default 64 MiB); None when set to 0 (no cap)."""
    valid = f"a number of bytes: 0 (no cap), or {MIN_LIMIT} or more"
    value = _count(TASK_LOG_LIMIT_ENV, minimum=0, what=valid)
    if value is not None and 0 < value < MIN_LIMIT:
        raise _bad(TASK_LOG_LIMIT_ENV, str(value), valid)
    return 64 * 1024 * 1024 if value is None else value or None


#: The most tasks one run may make, unless `HEADWATER_MAX_TASKS` says otherwise.
DEFAULT_MAX_TASKS = 1_000_000


def max_tasks() -> int:
    """`HEADWATER_MAX_TASKS`: the most tasks one run's loops may make (default 1,000,000, at
    about 15 KiB of the engine's memory each): a loop over more items fails in one line
    instead of filling the machine's memory."""
    value = _count(MAX_TASKS_ENV, minimum=1)
    return DEFAULT_MAX_TASKS if value is None else value


# --- serving ------------------------------------------------------------------------------------


def token() -> str | None:
    """`HEADWATER_TOKEN`, as set (not stripped; "" when set empty), or None when unset: the
    bearer token the model server and the UI require."""
    return os.environ.get(TOKEN_ENV)


def serve_config() -> str | None:
    """`HEADWATER_SERVE_CONFIG`: the config file of a `headwater serve` worker, else None."""
    return os.environ.get(SERVE_CONFIG_ENV) or None


def serve_changes() -> str | None:
    """`HEADWATER_SERVE_CHANGES`: the admin-change log `headwater serve` workers share, else
    None."""
    return os.environ.get(SERVE_CHANGES_ENV) or None


# --- parsing ------------------------------------------------------------------------------------


def _text(name: str) -> str | None:
    """The variable's value stripped; None when unset, empty or blank."""
    return os.environ.get(name, "").strip() or None


def _seconds(name: str, default: float, *, finite: bool) -> float:
    """A number of seconds above 0 (also infinity unless `finite`), or `default` when unset."""
    text = _text(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0 or (finite and math.isinf(value)):
        raise _bad(name, text, "a number of seconds above 0")
    return value


def _count(name: str, *, minimum: int, what: str = "") -> int | None:
    """A whole number of at least `minimum`, or None when unset."""
    text = _text(name)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise _bad(name, text, what or f"a valid int (a whole number, {minimum} or more)")
    return value


def _bad(name: str, text: str, valid: str) -> ConfigError:
    return ConfigError(f"{name}={text!r} is not {valid}: fix or unset it")
