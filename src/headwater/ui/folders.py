"""Previews of artifacts written as folders: a Dataset of part files, a Model's files, logs.

`preprocess` and Dask write a Dataset as a folder of `part.N.parquet` files; a Model is often a
folder (weights, `requirements.txt`, a card). Everything here is bounded, however large the
folder: at most `MAX_FILES` entries are listed, at most `MAX_PARTS` Parquet footers are read for
the row count, at most `MAX_ROWS` rows are decoded (from the first row group of each part in
turn), and CSV rows are counted only when the parts hold at most `MAX_CSV_COUNT` bytes.
Symlinks are neither followed nor read, so a link inside an artifact cannot lead out of the
store (`headwater.ui.previews.confined_path` has checked the folder itself).
"""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path
from typing import Any

__all__ = ["EVENTS_PREFIX", "MAX_FILES", "MAX_PARTS", "folder_preview", "has_event_files"]

MAX_ROWS = 20
MAX_FILES = 200
MAX_PARTS = 1000
MAX_CSV_COUNT = 8 * 1024 * 1024
#: TensorBoard event files, as `headwater tensorboard` finds them (`cli/tensorboard.py`; the
#: faces do not import each other, so the prefix is repeated here).
EVENTS_PREFIX = "events.out.tfevents"
_CSV_SUFFIXES = (".csv", ".tsv")


def list_files(root: Path, limit: int | None = None) -> tuple[list[dict[str, Any]], bool]:
    """Up to `limit` (default `MAX_FILES`) regular files below `root` as `{"name", "size"}`
    (name relative to `root`), in natural order folder by folder; and whether more were left
    out."""
    limit = MAX_FILES if limit is None else limit
    found: list[dict[str, Any]] = []
    for here, dirs, files in os.walk(root):  # does not descend into symlinked folders
        dirs.sort(key=_natural)
        for name in sorted(files, key=_natural):
            path = Path(here) / name
            if path.is_symlink() or not path.is_file():
                continue
            if len(found) == limit:
                return found, True
            found.append({"name": str(path.relative_to(root)), "size": path.stat().st_size})
    return found, False


def has_event_files(files: list[dict[str, Any]]) -> bool:
    """True if any of `files` (from `list_files`) is a TensorBoard event file."""
    return any(Path(f["name"]).name.startswith(EVENTS_PREFIX) for f in files)


def folder_preview(root: Path) -> dict[str, Any]:
    """The preview of the folder `root`: a "table" over its Parquet or CSV parts (with
    `files`), or else a "folder" listing its files.

    Parts are the files directly in `root` (or listed below it) that do not start with `.` or
    `_` (`_SUCCESS`, `.crc` files), taken in natural order (`part.2` before `part.10`).
    """
    files, more = list_files(root)
    listing = {"files": files, "more_files": more}
    parts = [
        root / f["name"]
        for f in files
        if not Path(f["name"]).name.startswith((".", "_")) and f["size"] > 0
    ]
    parquet = [p for p in parts if p.suffix.lower() == ".parquet" or _magic(p) == b"PAR1"]
    if parquet:
        return {"kind": "table", **_parquet_parts(parquet, more), **listing}
    delimited = [p for p in parts if p.suffix.lower() in _CSV_SUFFIXES]
    if delimited:
        return {"kind": "table", **_csv_parts(delimited, more), **listing}
    return {"kind": "folder", **listing}


def _parquet_parts(parts: list[Path], more: bool) -> dict[str, Any]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return {
            "format": "parquet (install pyarrow to preview it)",
            "parts": len(parts),
            "columns": [],
            "rows": [],
            "total_rows": None,
        }
    first = pq.ParquetFile(parts[0])
    columns = [{"name": f.name, "type": str(f.type)} for f in first.schema_arrow]
    rows: list[list[Any]] = []
    total: int | None = 0
    for index, part in enumerate(parts):
        if index >= MAX_PARTS:
            total = None  # the footers of every part would be too many to open
            break
        part_file = pq.ParquetFile(part)
        total = None if total is None else total + part_file.metadata.num_rows
        if len(rows) < MAX_ROWS and part_file.num_row_groups:
            # Only the first row group of a part, and only the rows still wanted.
            want = MAX_ROWS - len(rows)
            batch = next(part_file.iter_batches(batch_size=want, row_groups=[0]), None)
            if batch is not None:
                rows += [[_cell(r.get(c["name"])) for c in columns] for r in batch.to_pylist()]
    return {
        "format": "parquet",
        "parts": len(parts),
        "columns": columns,
        "rows": rows[:MAX_ROWS],
        "total_rows": None if more else total,
    }


def _csv_parts(parts: list[Path], more: bool) -> dict[str, Any]:
    """Rows of the parts under the first part's header; each part's own copy is skipped."""
    delimiter = "\t" if parts[0].suffix.lower() == ".tsv" else ","
    header: list[str] = []
    rows: list[list[str]] = []
    for part in parts:
        lines = _first_lines(part, MAX_ROWS + 1)
        parsed = list(csv.reader(io.StringIO("".join(lines)), delimiter=delimiter))
        if not header and parsed:
            header = parsed[0]
        body = parsed[1:] if parsed and parsed[0] == header else parsed
        rows += body[: MAX_ROWS - len(rows)]
        if len(rows) >= MAX_ROWS:
            break
    total: int | None = None
    if not more and sum(p.stat().st_size for p in parts) <= MAX_CSV_COUNT:
        total = sum(_count_rows(p, header, delimiter) for p in parts)
    return {
        "format": "csv",
        "parts": len(parts),
        "columns": [{"name": h, "type": ""} for h in header],
        "rows": rows,
        "total_rows": total,
    }


def _count_rows(path: Path, header: list[str], delimiter: str) -> int:
    with path.open("r", encoding="utf-8", errors="replace", newline="") as f:
        reader = csv.reader(f, delimiter=delimiter)
        first = next(reader, None)
        rest = sum(1 for row in reader if row)
    return rest + (1 if first is not None and first != header and first else 0)


def _first_lines(path: Path, count: int) -> list[str]:
    with path.open("r", encoding="utf-8", errors="replace", newline="") as f:
        return [line for _, line in zip(range(count), f, strict=False)]


def _magic(path: Path) -> bytes:
    with path.open("rb") as f:
        return f.read(4)


def _natural(name: str) -> list[Any]:
    return [int(s) if s.isdigit() else s for s in re.split(r"(\d+)", name)]


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
