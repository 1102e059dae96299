"""Fixtures shared by the integration tests (helpers to import are in cli_harness.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_harness import Cli

# Session fixtures are registered here, once: a session-scoped fixture imported into each
# test module is a separate fixture per module, and each instance lived to the end of the
# session (six idle Dask clusters and six moto servers per xdist worker).
from container_images import busybox_image, docker_busybox, python_image  # noqa: F401
from dask_cluster import dask_cluster, dask_cluster_factory  # noqa: F401
from postgres_db import database_url  # noqa: F401
from s3_server import moto_server, s3_bucket, s3_env  # noqa: F401

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
