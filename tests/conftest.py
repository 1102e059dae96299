"""Fixtures and markers shared by every test: `gpu` tests run only where a GPU is visible."""

from __future__ import annotations

import pytest

from headwater.machine import detect_gpus


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked `gpu` on a machine without an NVIDIA GPU (they run where one is)."""
    if detect_gpus():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (none is visible here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
