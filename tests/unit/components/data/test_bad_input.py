"""The bad inputs of the data functions: one clear error each, naming the thing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from headwater.components.data.ingestion import ingest
from headwater.components.data.preprocessing import preprocess
from headwater.components.data.summary import groupby_summary
from headwater.errors import InvalidArgumentError, StorageError, UserError


def _preprocess(src: Path, out: Path) -> Any:
    return preprocess(str(src), str(out / "a"), str(out / "b"), str(out / "c"), str(out / "s.md"))


def _summary(src: Path, out: Path) -> Any:
    return groupby_summary(str(src), str(out / "t.csv"), bin_column="x")


def _ingest(src: Path, out: Path) -> Any:
    return ingest(str(src), str(out / "data"))


RUNNERS: dict[str, Callable[[Path, Path], Any]] = {
    "preprocess": _preprocess,
    "groupby_summary": _summary,
    "ingest": _ingest,
}


@pytest.fixture(params=list(RUNNERS), ids=list(RUNNERS))
def runner(request: pytest.FixtureRequest) -> Callable[[Path, Path], Any]:
    return RUNNERS[request.param]


def _parts(directory: Path, *frames: pd.DataFrame) -> Path:
    directory.mkdir(parents=True)
    for i, frame in enumerate(frames):
        frame.to_parquet(directory / f"part-{i:05d}.parquet", index=False)
    return directory


def test_a_missing_input_path_is_named(runner: Any, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(StorageError, match=f"input path '{missing}' does not exist"):
        runner(missing, tmp_path)


def test_an_empty_directory_is_an_empty_dataset(runner: Any, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="is empty"):
        runner(tmp_path / "empty", tmp_path)


def test_parts_without_rows_are_an_empty_dataset(runner: Any, tmp_path: Path) -> None:
    empty = pd.DataFrame({"label": pd.Series([], dtype="int8"), "x": pd.Series([], dtype="f4")})
    src = _parts(tmp_path / "src", empty, empty)
    with pytest.raises(UserError, match=r"is empty: its 2 file\(s\) hold no rows"):
        runner(src, tmp_path)


def test_partitions_whose_schemas_disagree_name_the_file(runner: Any, tmp_path: Path) -> None:
    good = pd.DataFrame({"label": [0, 1], "x": [1.0, 2.0]})
    bad = pd.DataFrame({"label": [0, 1], "x": ["a", "b"]})
    src = _parts(tmp_path / "src", good, good, bad)
    with pytest.raises(UserError, match=r"partition '.*part-00002\.parquet' has a schema that "):
        runner(src, tmp_path)


def test_a_missing_column_is_named_in_the_schema_error(tmp_path: Path) -> None:
    src = _parts(
        tmp_path / "src",
        pd.DataFrame({"label": [0], "x": [1.0]}),
        pd.DataFrame({"label": [0]}),
    )
    with pytest.raises(UserError, match=r"part-00001\.parquet.*missing columns \['x'\]"):
        _preprocess(src, tmp_path)


@pytest.mark.parametrize("which", ["preprocess", "groupby_summary"])
def test_an_absent_label_column_is_named(tmp_path: Path, which: str) -> None:
    src = _parts(tmp_path / "src", pd.DataFrame({"y": [0, 1], "x": [1.0, 2.0]}))
    with pytest.raises(UserError, match=r"label column 'label' is absent from .*columns: y, x"):
        RUNNERS[which](src, tmp_path)


def test_an_absent_bin_column_is_named(tmp_path: Path) -> None:
    src = _parts(tmp_path / "src", pd.DataFrame({"label": [0, 1], "z": [1.0, 2.0]}))
    with pytest.raises(UserError, match=r"bin column 'x' is absent"):
        _summary(src, tmp_path)


def test_a_partition_size_of_zero_is_refused(tmp_path: Path) -> None:
    src = _parts(tmp_path / "src", pd.DataFrame({"label": [0, 1]}))
    with pytest.raises(InvalidArgumentError, match="partition_size_mb must be a positive"):
        ingest(str(src), str(tmp_path / "out"), partition_size_mb=0)


def test_a_file_that_is_not_parquet_is_named(tmp_path: Path) -> None:
    src = _parts(tmp_path / "src", pd.DataFrame({"label": [0, 1], "x": [1.0, 2.0]}))
    (src / "part-00001.parquet").write_text("not parquet")
    with pytest.raises(UserError, match=r"part-00001\.parquet' is not a readable Parquet file"):
        _preprocess(src, tmp_path)


def test_csv_files_whose_headers_disagree_name_the_file(tmp_path: Path) -> None:
    src = tmp_path / "csv"
    src.mkdir()
    (src / "a.csv").write_text("label,x\n0,1.5\n")
    (src / "b.csv").write_text("label,y\n1,2.5\n")
    with pytest.raises(UserError, match=r"partition '.*b\.csv' has a schema that disagrees"):
        ingest(str(src), str(tmp_path / "out"))


def test_an_empty_csv_is_an_empty_dataset(tmp_path: Path) -> None:
    (tmp_path / "e.csv").write_text("")
    with pytest.raises(UserError, match="is empty"):
        ingest(str(tmp_path / "e.csv"), str(tmp_path / "out"))


def test_fractions_must_sum_to_one(tmp_path: Path, higgs_dir: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"summing to 1, got \(0.5, 0.1, 0.1\)"):
        preprocess(str(higgs_dir), *(str(tmp_path / n) for n in "abcd"), fractions=(0.5, 0.1, 0.1))
