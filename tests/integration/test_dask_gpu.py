"""The Dask executor on a GPU machine: a LocalCUDACluster, one worker per GPU (marked `gpu`)."""

from __future__ import annotations

import importlib.util

import pytest
from cli_harness import Cli, pipeline, run_ok

pytestmark = [pytest.mark.integration, pytest.mark.gpu]


@pytest.mark.skipif(importlib.util.find_spec("dask_cuda") is None, reason="needs dask-cuda")
def test_a_gpu_task_runs_on_a_cuda_worker_and_sees_one_device(headwater: Cli) -> None:
    cli = headwater("run", pipeline("dask_gpu_task"), "--executor", "dask", "--json", timeout=300)
    result = run_ok(cli)
    visible, _, seen = result["outputs"]["Output"].partition("|")
    # dask-cuda pins one device per worker (CUDA_VISIBLE_DEVICES lists it first), and the task
    # sees the GPUs through it.
    assert visible.split(",")[0].isdigit(), visible
    assert int(seen) >= 1
    (task,) = result["tasks"]
    assert task["executor"] == "dask"
    assert "running on a local Dask cluster" in cli.stderr


def test_dask_executor_without_scheduler_uses_gpus_when_present(headwater: Cli) -> None:
    """Without dask-cuda, the LocalCluster still runs the GPU task (the machine's GPUs)."""
    cli = headwater("run", pipeline("dask_gpu_task"), "--executor", "dask", "--json", timeout=300)
    result = run_ok(cli)
    assert result["outputs"]["Output"].split("|")[1] != "0"
