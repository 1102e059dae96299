"""generate_higgs: the schema, determinism by seed, data a model can learn (not trivially)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from headwater.components.data.higgs import COLUMNS, FEATURES, generate_higgs, rows_frame
from headwater.errors import InvalidArgumentError


def test_schema_is_label_then_the_28_higgs_features(higgs_dir: Path) -> None:
    frame = pd.read_parquet(higgs_dir)
    assert list(frame.columns) == list(COLUMNS)
    assert len(FEATURES) == 28
    assert FEATURES[0] == "lepton_pT" and FEATURES[-1] == "m_wwbb"
    assert "jet4b-tag" in FEATURES
    assert str(frame["label"].dtype) == "int8"
    assert all(str(frame[c].dtype) == "float32" for c in FEATURES)
    assert len(frame) == 30_000
    assert 0.45 < frame["label"].mean() < 0.6


def test_parts_have_the_target_size(higgs_dir: Path) -> None:
    parts = sorted(higgs_dir.glob("part-*.parquet"))
    assert len(parts) == 4  # 1 MB parts hold 8192 rows: 3 full and one of 5424
    assert [pd.read_parquet(p).shape[0] for p in parts] == [8192, 8192, 8192, 5424]


@pytest.mark.parametrize("partition_size_mb", [1, 3], ids=["1MB", "3MB"])
def test_same_seed_same_data_whatever_the_partitioning(
    tmp_path: Path, higgs_dir: Path, partition_size_mb: int
) -> None:
    out = tmp_path / "again"
    generate_higgs(str(out), 30_000, seed=3, partition_size_mb=partition_size_mb)
    pd.testing.assert_frame_equal(pd.read_parquet(out), pd.read_parquet(higgs_dir))


def test_another_seed_other_data() -> None:
    assert not rows_frame(0, 0, 1000).equals(rows_frame(1, 0, 1000))


def test_a_gradient_boosted_model_reaches_a_realistic_auc() -> None:
    sklearn = pytest.importorskip("sklearn")
    del sklearn
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import roc_auc_score

    frame = rows_frame(7, 0, 60_000)
    x, y = frame[list(FEATURES)], frame["label"]
    model = HistGradientBoostingClassifier(max_iter=60, random_state=0)
    model.fit(x[:45_000], y[:45_000])
    auc = roc_auc_score(y[45_000:], model.predict_proba(x[45_000:])[:, 1])
    assert 0.75 <= auc <= 0.85, auc


@pytest.mark.parametrize(
    ("rows", "size", "message"),
    [
        (0, 100, "rows must be a positive integer, got 0"),
        (10, 0, "partition_size_mb must be a positive number of megabytes, got 0"),
        (10, -5, "partition_size_mb must be a positive number of megabytes, got -5"),
    ],
    ids=["no-rows", "partition-size-zero", "partition-size-negative"],
)
def test_bad_arguments_are_one_clear_error(
    tmp_path: Path, rows: int, size: int, message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        generate_higgs(str(tmp_path / "x"), rows, partition_size_mb=size)
