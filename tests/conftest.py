"""Fixtures and markers shared by every test: `gpu` tests run only where a GPU is visible.

Every test runs its tasks on the host (`HEADWATER_CONTAINERS=never`) unless it asks for
containers: most test pipelines name images no registry here can serve (`python:3.11`) and
run commands this machine has. `tests/integration/test_containers*.py` choose their mode.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from headwater.machine import detect_gpus

os.environ.setdefault("HEADWATER_CONTAINERS", "never")


def _podman_here() -> None:
    """On this project's machines Podman runs as root only with runc (crun refuses the cgroup
    setup) and with container ulimits under the host's: a `containers.conf` for the tests
    (never the product's: on an ordinary machine Podman needs nothing)."""
    if "CONTAINERS_CONF" in os.environ or os.geteuid() != 0 or not shutil.which("runc"):
        return
    path = os.path.join(tempfile.gettempdir(), "headwater-tests-containers.conf")
    text = (
        '[engine]\nruntime = "runc"\n'
        '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]\n'
    )
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
    os.environ["CONTAINERS_CONF"] = path


_podman_here()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked `gpu` on a machine without an NVIDIA GPU (they run where one is)."""
    if detect_gpus():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (none is visible here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
