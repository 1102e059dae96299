"""Splits are checked from their footers, then cut into partitions of equal rows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from headwater.components.xgboost import _splits
from headwater.errors import UserError


def _write(directory: Path, sizes: list[int], row_group: int = 1000) -> pd.DataFrame:
    directory.mkdir(parents=True)
    frames = []
    start = 0
    for i, n in enumerate(sizes):
        frame = pd.DataFrame(
            {
                "label": (np.arange(start, start + n) % 2).astype("int8"),
                "x": np.arange(start, start + n, dtype="float32"),
            }
        )
        pq.write_table(
            pa.Table.from_pandas(frame),
            directory / f"part-{i:05d}.parquet",
            row_group_size=row_group,
        )
        frames.append(frame)
        start += n
    return pd.concat(frames, ignore_index=True)


@pytest.mark.parametrize(
    ("sizes", "parts"),
    [([8841, 1159], 2), ([3000], 4), ([10, 0, 20, 5], 2), ([7, 7, 7], 2)],
    ids=["uneven-files", "one-file", "empty-file", "more-files-than-workers"],
)
def test_pieces_are_even_and_cover_every_row_in_order(
    tmp_path: Path, sizes: list[int], parts: int
) -> None:
    whole = _write(tmp_path / "d", sizes)
    split = _splits.open_split("train", str(tmp_path / "d"), "label")
    cut = _splits.pieces(split, parts)
    frames = [_splits.read_piece(p, split.dataset.fs, "pandas", ["label", "x"]) for p in cut]
    lengths = [len(f) for f in frames]
    assert len(cut) == max(parts, len(sizes)) and max(lengths) - min(lengths) <= 1
    pd.testing.assert_frame_equal(pd.concat(frames, ignore_index=True), whole)


def test_a_non_numeric_feature_is_named(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    pd.DataFrame({"label": [0, 1], "x": [1.0, 2.0], "colour": ["red", "blue"]}).to_parquet(
        tmp_path / "d" / "part-0.parquet"
    )
    with pytest.raises(
        UserError,
        match=r"feature column 'colour' of the train split .* is large_string, not numeric",
    ):
        _splits.open_split("train", str(tmp_path / "d"), "label")


def test_a_missing_label_is_named_with_the_split(tmp_path: Path) -> None:
    _write(tmp_path / "d", [10])
    with pytest.raises(UserError, match=r"^validation split: label column 'target' is absent"):
        _splits.open_split("validation", str(tmp_path / "d"), "target")


def test_an_empty_split_is_named(tmp_path: Path) -> None:
    _write(tmp_path / "d", [0])
    with pytest.raises(UserError, match=r"^test split: input dataset .* is empty"):
        _splits.open_split("test", str(tmp_path / "d"), "label")


def test_a_feature_the_model_needs_is_named(tmp_path: Path) -> None:
    _write(tmp_path / "d", [10])
    with pytest.raises(UserError, match=r"lacks the feature column\(s\) \['m_bb'\] the model"):
        _splits.open_split("test", str(tmp_path / "d"), "label", ["x", "m_bb"])
