"""Folder previews stay bounded however large the folder, and never follow a symlink out."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.ui import folders


def _csv_parts(root: Path, parts: int, rows: int = 2) -> None:
    root.mkdir()
    for part in range(parts):
        lines = ["a,b\n", *(f"{part},{i}\n" for i in range(rows))]
        (root / f"part-{part}.csv").write_text("".join(lines))


def test_the_listing_stops_at_max_files_and_the_row_count_is_then_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(folders, "MAX_FILES", 3)
    _csv_parts(tmp_path / "data", 12)
    found = folders.folder_preview(tmp_path / "data")
    assert [f["name"] for f in found["files"]] == ["part-0.csv", "part-1.csv", "part-2.csv"]
    assert found["more_files"] is True and found["total_rows"] is None
    assert found["rows"][:2] == [["0", "0"], ["0", "1"]]


def test_parts_are_in_natural_order_and_markers_are_skipped(tmp_path: Path) -> None:
    _csv_parts(tmp_path / "data", 11, rows=1)
    (tmp_path / "data" / "_SUCCESS").write_text("x,y\n1,2\n")
    found = folders.folder_preview(tmp_path / "data")
    assert [r[0] for r in found["rows"]] == [str(i) for i in range(11)]
    assert found["parts"] == 11 and found["total_rows"] == 11


def test_csv_rows_are_not_counted_past_the_byte_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(folders, "MAX_CSV_COUNT", 10)
    _csv_parts(tmp_path / "data", 2)
    assert folders.folder_preview(tmp_path / "data")["total_rows"] is None


def test_parquet_footers_are_not_all_opened_past_max_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    monkeypatch.setattr(folders, "MAX_PARTS", 2)
    (tmp_path / "data").mkdir()
    for part in range(3):
        pq.write_table(pa.table({"x": [part]}), tmp_path / "data" / f"part.{part}.parquet")
    found = folders.folder_preview(tmp_path / "data")
    assert found["parts"] == 3 and found["total_rows"] is None
    assert found["rows"] == [[0], [1]]


def test_symlinks_are_neither_listed_nor_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("password,user\nhunter2,root\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "more.csv").write_text("password\nhunter3\n")
    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"\x00" * 8)
    (model / "leak.csv").symlink_to(secret)
    (model / "tree").symlink_to(tmp_path / "outside", target_is_directory=True)
    found = folders.folder_preview(model)
    assert found == {
        "kind": "folder",
        "files": [{"name": "weights.bin", "size": 8}],
        "more_files": False,
    }
