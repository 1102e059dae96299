"""The data components in pipelines, and the data functions on real LocalClusters.

Dask runs only in subprocesses here (pytest turns warnings into errors; distributed warns).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from cli_harness import Cli, pipeline, run_failed, run_ok
from dask_cluster import DaskCluster

pytestmark = pytest.mark.integration


def _local(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


# An end-to-end pipeline: ~30-60 s here, and CI machines under load were 3.5x slower.
@pytest.mark.timeout(360)
def test_the_components_run_on_the_runs_dask_cluster(
    headwater: Cli,
    dask_cluster: DaskCluster,
) -> None:
    cli = headwater(
        "run",
        pipeline("data_higgs"),
        "--executor",
        "dask",
        "--scheduler",
        dask_cluster.address,
        "--json",
        timeout=180,
    )
    result = run_ok(cli)
    outputs = result["outputs"]
    data, train, table = outputs["data"], outputs["train"], outputs["table"]
    assert data["metadata"]["rows"] == 20000 and data["metadata"]["partitions"] == 3
    assert data["metadata"]["schema"]["m_wwbb"] == "float32"
    assert len(pd.read_parquet(_local(data["uri"]))) == 20000
    assert train["metadata"]["rows"] == len(pd.read_parquet(_local(train["uri"])))
    summary = pd.read_csv(_local(table["uri"]))
    assert list(summary["group_by"]) == ["label", "label", "m_bb", "m_bb", "m_bb", "m_bb"]
    assert summary[summary["group_by"] == "label"]["rows"].sum() == train["metadata"]["rows"]
    assert {t["executor"] for t in result["tasks"]} == {"dask"}
    # Given the run's cluster, the data steps computed on it (pandas), not on Polars.
    assert {data["metadata"]["engine"], train["metadata"]["engine"]} == {"pandas"}
    assert table["metadata"]["engine"] == "pandas"


def test_bad_input_fails_the_task_with_the_functions_message(headwater: Cli) -> None:
    result = run_failed(headwater.run("data_bad_input"))
    errors = {t["name"]: t["error"] for t in result["tasks"]}
    assert "input path '/nowhere/higgs.csv' does not exist" in errors["ingest"]["message"]
    assert errors["ingest"]["error_type"] == "StorageError"
    message = errors["generate-higgs"]["message"]
    assert "partition_size_mb must be a positive number of megabytes, got 0" in message


def _python(code: str, tmp_path: Path, timeout: float = 280) -> dict[str, object]:
    """Run `code` in a fresh interpreter outside any Dask run; its last stdout line is JSON."""
    env = {k: v for k, v in os.environ.items() if k != "HEADWATER_DASK_SCHEDULER"}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown = json.loads(proc.stdout.strip().splitlines()[-1])
    assert isinstance(shown, dict)
    return shown


@pytest.mark.slow
@pytest.mark.timeout(300)  # about 25 s on a quiet 2-core machine; much more when shared
def test_data_larger_than_the_workers_memory_completes(tmp_path: Path) -> None:
    """510 MB of Higgs in 100 MB parts through one worker limited to 500 MB: each task
    streams its part a row group at a time, so the worker neither dies nor stays paused."""
    shown = _python(
        """
        import json
        from headwater.compute import cluster
        from headwater.components.data.higgs import generate_higgs
        from headwater.components.data.preprocessing import preprocess
        from headwater.components.data.summary import groupby_summary

        with cluster(n_workers=1, memory_limit="500MB", local_directory="spill") as client:
            before = client.run(lambda dask_worker: id(dask_worker))
            made = generate_higgs("raw", 4_500_000, partition_size_mb=100, client=client)
            done = preprocess("raw", "tr", "va", "te", "stats.md", client=client)
            table = groupby_summary("raw", "table.csv", client=client)
            after = client.run(lambda dask_worker: id(dask_worker))
        print(json.dumps({
            "made": made["rows"], "parts": made["partitions"],
            "split": sum(done["rows"].values()),
            "grouped": int(table[table["group_by"] == "label"]["rows"].sum()),
            "restarted": before != after,
        }))
        """,
        tmp_path,
    )
    assert shown == {
        "made": 4_500_000,
        "parts": 6,
        "split": 4_500_000,
        "grouped": 4_500_000,
        "restarted": False,
    }


@pytest.mark.timeout(300)  # about 10 s on a quiet 2-core machine; much more when shared
def test_work_stuck_on_paused_workers_fails_instead_of_hanging(tmp_path: Path) -> None:
    shown = _python(
        """
        import json, time
        import dask
        from headwater.compute import cluster, compute
        from headwater.errors import ResourceError

        def hog(i):
            block = b"x" * 760_000_000  # past pausing (80% of 1 GB), short of dying (95%)
            time.sleep(60)
            return len(block) + i

        with cluster(n_workers=1, memory_limit="1GB") as client:
            start = time.monotonic()
            try:
                compute([dask.delayed(hog)(i) for i in range(3)], client=client,
                        paused_timeout_s=3)
                message = "finished"
            except ResourceError as exc:
                message = str(exc)
        print(json.dumps({"message": message, "took": time.monotonic() - start}))
        """,
        tmp_path,
    )
    message = str(shown["message"])
    assert message.startswith("the Dask computation made no progress for 3 s"), message
    assert "paused workers (tcp://127.0.0.1:" in message and "of 1000 MB" in message
    assert float(str(shown["took"])) < 40
