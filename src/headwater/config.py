"""Settings: where Headwater keeps its state, read from the environment when asked."""

from __future__ import annotations

import os
from pathlib import Path


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
    return os.environ.get("HEADWATER_METADATA_URL") or f"sqlite:///{home() / 'metadata.db'}"
