"""Settings: where Headwater keeps its state, read from the environment when asked."""

from __future__ import annotations

import os
from pathlib import Path

#: Set by the engine in every task's environment: the id of the task's run, and the URL of
#: the metadata store recording it (where the run's own store has one). Neither is part of a
#: task's cache key: they say where the task runs, not what it computes.
RUN_ID_ENV = "HEADWATER_RUN_ID"
METADATA_URL_ENV = "HEADWATER_METADATA_URL"
TASK_RUN_ENV = (RUN_ID_ENV, METADATA_URL_ENV)


def home() -> Path:
    """`HEADWATER_HOME`, default `~/.headwater`: runs, logs, artifacts and caches live here."""
    value = os.environ.get("HEADWATER_HOME")
    return Path(value).expanduser() if value else Path.home() / ".headwater"


def pipeline_root() -> str:
    """Where artifacts go: `HEADWATER_PIPELINE_ROOT`, default `$HEADWATER_HOME/artifacts`."""
    return os.environ.get("HEADWATER_PIPELINE_ROOT") or str(home() / "artifacts")


def runs_dir() -> Path:
    """Per-run folders: task logs, executor inputs and outputs, the run record."""
    return home() / "runs"


def envs_dir() -> Path:
    """Cached package environments for `--install-packages`."""
    return home() / "envs"


def metadata_url() -> str:
    """`HEADWATER_METADATA_URL`, default SQLite at `$HEADWATER_HOME/metadata.db`."""
    return os.environ.get(METADATA_URL_ENV) or f"sqlite:///{home() / 'metadata.db'}"


def run_id() -> str | None:
    """The run this process is a task of (`HEADWATER_RUN_ID`, set by the engine); else None."""
    return os.environ.get(RUN_ID_ENV) or None
