"""`_dataset.meta`: the empty frame Dask is given instead of reading a file for it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from headwater.components.data._dataset import inspect_dataset, meta


def test_meta_of_chosen_columns_keeps_their_order_and_types(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    frame = pd.DataFrame({"label": [0, 1], "a": [1.5, 2.5], "b": [3, 4]})
    frame.to_parquet(data / "part-0.parquet")
    dataset = inspect_dataset(str(data))

    empty = meta(dataset, "pandas", ["b", "label"])
    assert list(empty.columns) == ["b", "label"]
    assert len(empty) == 0
    assert str(empty["b"].dtype) == "int64"
    assert list(meta(dataset, "pandas").columns) == ["label", "a", "b"]
