"""The cuDF path gives the pandas path's results (runs where a GPU and dask_cudf are present)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("dask_cudf")

from headwater.components.data.preprocessing import SPLITS, preprocess  # noqa: E402
from headwater.components.data.summary import groupby_summary  # noqa: E402


def test_groupby_summary_is_the_same_on_cudf(tmp_path: Path, higgs_dir: Path) -> None:
    on_pandas = groupby_summary(str(higgs_dir), str(tmp_path / "p.csv"), backend="pandas")
    on_cudf = groupby_summary(str(higgs_dir), str(tmp_path / "c.csv"), backend="cudf")
    assert list(on_cudf["rows"]) == list(on_pandas["rows"])
    numeric = on_pandas.columns[2:]
    np.testing.assert_allclose(
        on_cudf[numeric].to_numpy(float), on_pandas[numeric].to_numpy(float), rtol=1e-6
    )


def test_preprocess_splits_the_same_rows_on_cudf(tmp_path: Path, higgs_dir: Path) -> None:
    for backend in ("pandas", "cudf"):
        out = tmp_path / backend
        preprocess(
            str(higgs_dir), *(str(out / s) for s in SPLITS), str(out / "s.md"), backend=backend
        )
    for split in SPLITS:
        a = pd.read_parquet(tmp_path / "pandas" / split)
        b = pd.read_parquet(tmp_path / "cudf" / split)
        pd.testing.assert_frame_equal(a, b, check_dtype=False, rtol=1e-6)
