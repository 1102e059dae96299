"""A run's worker process starts clean: `python -m headwater.server.worker` must not find
its own module imported already (runpy's RuntimeWarning, at the top of every worker log)."""

from __future__ import annotations

import subprocess
import sys


def test_the_worker_module_runs_without_runpys_warning() -> None:
    done = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-m", "headwater.server.worker", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "RuntimeWarning" not in done.stderr
