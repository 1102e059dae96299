"""Fixtures shared by the integration tests (helpers to import are in cli_harness.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_harness import Cli

# Settings of the caller's environment that would point a test's runs at another metadata store
# or pipeline root, or change what the scheduler sees (a GPU made visible).
_CLEARED_ENV = ("HEADWATER_METADATA_URL", "HEADWATER_PIPELINE_ROOT", "CUDA_VISIBLE_DEVICES")


@pytest.fixture
def headwater(tmp_path: Path) -> Cli:
    """The CLI with HEADWATER_HOME under tmp_path; call it to run a command to completion."""
    home = tmp_path / "headwater-home"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {**os.environ, "HEADWATER_HOME": str(home)}
    for name in _CLEARED_ENV:
        env.pop(name, None)
    return Cli(home, cwd, env)
