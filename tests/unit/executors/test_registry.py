"""Executors by name: built-in ones, and a third party's found through its entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from headwater.errors import UserError
from headwater.executors.local import LocalExecutor
from headwater.executors.registry import GROUP, create_executor, executor_names

PIPELINE = textwrap.dedent(
    """
    from kfp import dsl

    @dsl.component
    def inc(x: int) -> int:
        return x + 1

    @dsl.pipeline
    def p(x: int = 1) -> int:
        return inc(x=inc(x=x).output).output
    """
)

# A third party's package: an executor that counts what it ran, registered as "counting".
THIRD_PARTY = textwrap.dedent(
    """
    from headwater.executors.local import LocalExecutor

    class CountingExecutor(LocalExecutor):
        name = "counting"

        def __init__(self, **options):
            super().__init__()
            self.options = options
            self.submitted = 0

        def submit(self, launch):
            self.submitted += 1
            super().submit(launch)

        def shutdown(self, *, kill=False):
            import sys
            print(f"counting executor ran {self.submitted} tasks with {sorted(self.options)}",
                  file=sys.stderr)
            super().shutdown(kill=kill)
    """
)


def _install_third_party(site: Path) -> None:
    """A package and its dist-info with a `headwater.executors` entry point, on `site`."""
    (site / "counting_executor.py").write_text(THIRD_PARTY)
    info = site / "counting_executor-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: counting-executor\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{GROUP}]\ncounting = counting_executor:CountingExecutor\n"
    )


def test_local_is_built_in() -> None:
    executor = create_executor("local")
    try:
        assert isinstance(executor, LocalExecutor)
        assert executor.name == "local"
    finally:
        executor.shutdown(kill=True)


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UserError) as caught:
        create_executor("nosuch")
    message = str(caught.value)
    assert "'nosuch'" in message
    assert "dask" in message and "local" in message
    assert GROUP in message
    assert {"dask", "local"} <= set(executor_names())


def test_a_third_party_executor_runs_a_pipeline_by_name(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _install_third_party(site)
    pipeline = tmp_path / "p.py"
    pipeline.write_text(PIPELINE)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "HEADWATER_HOME": str(tmp_path / "home"),
    }
    env.pop("HEADWATER_METADATA_URL", None)
    command = ["run", str(pipeline), "--executor", "counting", "--json"]
    proc = subprocess.run(
        [sys.executable, "-m", "headwater", *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["outputs"] == {"Output": 3}
    assert {t["executor"] for t in result["tasks"]} == {"counting"}
    assert "counting executor ran 2 tasks with ['install_packages', 'scheduler', 'shared_fs']" in (
        proc.stderr
    )
