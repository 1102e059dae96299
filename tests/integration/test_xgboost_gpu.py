"""train_xgboost and evaluate_classifier on a LocalCUDACluster: cuDF reads, device="cuda"."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.integration]
pytest.importorskip("dask_cuda")
pytest.importorskip("cudf")
pytest.importorskip("xgboost")


def test_training_on_gpu_workers_uses_cuda(tmp_path: Path) -> None:
    from headwater.components.data.higgs import generate_higgs
    from headwater.components.data.preprocessing import preprocess
    from headwater.components.xgboost.evaluation import evaluate_classifier
    from headwater.components.xgboost.training import train_xgboost
    from headwater.compute import cluster

    with cluster(gpu=True) as client:
        generate_higgs(str(tmp_path / "raw"), 50_000, seed=1, partition_size_mb=2, client=client)
        splits = [str(tmp_path / s) for s in ("train", "validation", "test")]
        preprocess(str(tmp_path / "raw"), *splits, str(tmp_path / "s.md"), client=client)
        result = train_xgboost(
            splits[0], splits[1], str(tmp_path / "model"), rounds=30, client=client
        )
        assert result.metadata["device"] == "cuda"
        assert result.workers == len(client.scheduler_info(n_workers=-1)["workers"])
        evaluation = evaluate_classifier(str(tmp_path / "model"), splits[2], client=client)
    assert evaluation.auc > 0.75
