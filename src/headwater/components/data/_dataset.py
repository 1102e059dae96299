"""A partitioned Parquet dataset on any fsspec filesystem: checked, read and written part by part.

Every data function reads its input through `inspect_dataset`, which opens only the files'
footers (schema, rows, null counts, min/max) and turns the bad inputs into one clear error
each: a missing path, no rows, files whose schemas disagree (naming the file), an absent
label column.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from headwater.errors import InvalidArgumentError, StorageError, UserError

PART_NAME = "part-{:05d}.parquet"
#: Rows per Parquet row group we write (about 15 MB of Higgs): readers stream a file one row
#: group at a time, so this, not the file's size, bounds their memory.
ROW_GROUP_ROWS = 131_072
_MB = 1_000_000


def filesystem(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, path on it) for a local path or a URL (s3://, gs://, ...)."""
    import fsspec.core

    try:
        fs, path = fsspec.core.url_to_fs(url)
    except (ValueError, ImportError) as exc:
        raise StorageError(f"cannot open {url!r}: {exc}") from exc
    return fs, path


def check_partition_size(partition_size_mb: float) -> int:
    """`partition_size_mb` in bytes, or an error naming it."""
    if not partition_size_mb or partition_size_mb <= 0:
        raise InvalidArgumentError(
            f"partition_size_mb must be a positive number of megabytes, got {partition_size_mb!r} "
            "(about 100 suits most machines)"
        )
    return int(partition_size_mb * _MB)


def natural_key(path: str) -> list[Any]:
    """Sort key that puts part.10 after part.9."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path)]


def list_files(fs: Any, path: str, url: str, suffixes: tuple[str, ...]) -> list[str]:
    """The data files at `path` (itself, or those under it ending in `suffixes`), in order.

    Raises:
        StorageError: Nothing exists at `url`.
    """
    if not fs.exists(path):
        raise StorageError(f"input path {url!r} does not exist")
    if not fs.isdir(path):
        return [path]
    found = [
        f
        for f in fs.find(path)
        if f.lower().endswith(suffixes)
        and not any(part.startswith(("_", ".")) for part in f[len(path) :].split("/") if part)
    ]
    return sorted(found, key=natural_key)


@dataclass(frozen=True)
class ParquetDataset:
    """What the footers of a Parquet dataset say, before any data is read."""

    url: str
    fs: Any
    files: tuple[str, ...]
    schema: Any  # pyarrow.Schema
    rows: tuple[int, ...]  # per file
    nulls: dict[str, int] = field(default_factory=dict)  # per column, whole dataset
    minimum: dict[str, float] = field(default_factory=dict)
    maximum: dict[str, float] = field(default_factory=dict)
    uncompressed_bytes: int = 0

    @property
    def total_rows(self) -> int:
        return sum(self.rows)

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)

    def offsets(self) -> list[int]:
        """The global row number of each file's first row."""
        out, total = [], 0
        for n in self.rows:
            out.append(total)
            total += n
        return out


@contextlib.contextmanager
def parquet_file(fs: Any, path: str) -> Iterator[Any]:
    """A `pyarrow.parquet.ParquetFile` that reads only the row groups asked for.

    A local file is opened by Arrow itself: through a Python file object, Arrow buffered the
    whole file (250 MB of memory for a 100 MB part, measured), which undoes streaming.
    """
    import pyarrow.parquet as pq

    if _is_local(fs):
        with pq.ParquetFile(path) as source:
            yield source
        return
    with fs.open(path, "rb") as fh, pq.ParquetFile(fh) as source:
        yield source


def _is_local(fs: Any) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "file" in protocol or "local" in protocol


def _footer(fs: Any, path: str) -> Any:
    with parquet_file(fs, path) as source:
        return source.metadata


def inspect_dataset(url: str, *, label: str | None = None) -> ParquetDataset:
    """Read the footers of the Parquet dataset at `url` (a file or a directory of parts).

    Raises:
        StorageError: Nothing exists at `url`.
        UserError: No rows; a file that is not Parquet; files whose schemas disagree (the
            message names the file); `label` is not a column.
    """
    fs, path = filesystem(url)
    files = list_files(fs, path, url, (".parquet", ".pq", ".parq"))
    if not files:
        raise UserError(f"input dataset {url!r} is empty: it holds no .parquet files")
    with ThreadPoolExecutor(max_workers=min(16, len(files))) as pool:
        footers = list(pool.map(lambda f: _read_footer(fs, f), files))
    schema = footers[0].schema.to_arrow_schema()
    for name, meta in zip(files[1:], footers[1:], strict=True):
        other = meta.schema.to_arrow_schema()
        if not other.equals(schema):
            raise UserError(
                f"partition {fs.unstrip_protocol(name)!r} has a schema that disagrees with "
                f"{fs.unstrip_protocol(files[0])!r}: {_schema_diff(schema, other)}"
            )
    rows = tuple(meta.num_rows for meta in footers)
    if sum(rows) == 0:
        raise UserError(f"input dataset {url!r} is empty: its {len(files)} file(s) hold no rows")
    if label is not None and label not in schema.names:
        raise UserError(
            f"label column {label!r} is absent from {url!r} (columns: {', '.join(schema.names)})"
        )
    nulls, lo, hi = _column_stats(footers, schema.names)
    size = sum(
        meta.row_group(i).total_byte_size for meta in footers for i in range(meta.num_row_groups)
    )
    return ParquetDataset(url, fs, tuple(files), schema, rows, nulls, lo, hi, size)


def _read_footer(fs: Any, path: str) -> Any:
    try:
        return _footer(fs, path)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a non-Parquet file
        raise UserError(
            f"partition {fs.unstrip_protocol(path)!r} is not a readable Parquet file: {exc}"
        ) from exc


def _schema_diff(expected: Any, got: Any) -> str:
    want = dict(zip(expected.names, expected.types, strict=True))
    have = dict(zip(got.names, got.types, strict=True))
    parts = []
    if missing := [n for n in want if n not in have]:
        parts.append(f"missing columns {missing}")
    if extra := [n for n in have if n not in want]:
        parts.append(f"extra columns {extra}")
    if changed := [
        f"{n}: {have[n]} (expected {want[n]})" for n in want if n in have and have[n] != want[n]
    ]:
        parts.append("types differ: " + ", ".join(changed))
    if not parts:
        parts.append(f"columns in another order: {got.names}")
    return "; ".join(parts)


def _column_stats(
    footers: list[Any], names: list[str]
) -> tuple[dict[str, int], dict[str, float], dict[str, float]]:
    """Null counts and min/max per column from the row groups' statistics (absent: unknown)."""
    nulls: dict[str, int] = dict.fromkeys(names, 0)
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    for meta in footers:
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for c in range(group.num_columns):
                column = group.column(c)
                name = column.path_in_schema
                stats = column.statistics
                if name not in nulls or stats is None:
                    continue
                if stats.has_null_count:
                    nulls[name] += stats.null_count
                if stats.has_min_max and isinstance(stats.min, int | float):
                    lo[name] = min(lo.get(name, stats.min), stats.min)
                    hi[name] = max(hi.get(name, stats.max), stats.max)
    return nulls, lo, hi


def read_part(path: str, fs: Any, backend: str, columns: list[str] | None = None) -> Any:
    """One file as a pandas or cuDF DataFrame (the path first, as `dd.from_map` calls it)."""
    if backend == "cudf":
        import cudf

        return cudf.read_parquet(fs.unstrip_protocol(path), columns=columns)

    with parquet_file(fs, path) as source:
        table = source.read(columns=columns)
    # self_destruct frees each Arrow column as it is converted: one copy in memory, not two.
    return table.to_pandas(self_destruct=True, split_blocks=True)


def write_part(frame: Any, fs: Any, path: str) -> int:
    """Write a pandas or cuDF DataFrame to `path` as Parquet; returns the bytes written."""
    if type(frame).__module__.startswith("cudf"):
        with fs.open(path, "wb") as fh:
            frame.to_parquet(fh, index=False)
        return int(fs.size(path))
    import pyarrow as pa

    table = pa.Table.from_pandas(frame, preserve_index=False)
    return write_table(table, fs, path)


def write_table(table: Any, fs: Any, path: str) -> int:
    """Write an Arrow table as Parquet; returns the bytes written."""
    import pyarrow.parquet as pq

    # Dictionary-encoding random floats makes them larger and slower to write; keep it for
    # the other columns (labels, bins, strings), where it pays.
    dictionary = [f.name for f in table.schema if not _is_float(f.type)]
    with fs.open(path, "wb") as fh:
        pq.write_table(
            table,
            fh,
            compression="snappy",
            use_dictionary=dictionary,
            row_group_size=ROW_GROUP_ROWS,
        )
    return int(fs.size(path))


def _is_float(kind: Any) -> bool:
    import pyarrow.types as pat

    return bool(pat.is_floating(kind))


def prepare_output(url: str) -> tuple[Any, str]:
    """The output directory at `url`, created, with stale part files from an earlier try gone."""
    fs, path = filesystem(url)
    fs.makedirs(path, exist_ok=True)
    for stale in fs.glob(f"{path.rstrip('/')}/part-*.parquet"):
        fs.rm(stale)
    return fs, path.rstrip("/")


def iter_frames(
    path: str, fs: Any, backend: str, columns: list[str] | None = None, batch_rows: int = 131_072
) -> Iterator[Any]:
    """One file as pandas DataFrames of `batch_rows` rows (memory near one batch, whatever the
    file's size), or on cuDF as one DataFrame (cuDF spills it to host memory if it must)."""
    if backend == "cudf":
        yield read_part(path, fs, backend, columns)
        return

    try:
        with parquet_file(fs, path) as source:
            for table in row_groups(source, columns):
                yield table.to_pandas(self_destruct=True)
    finally:
        release_memory()


def row_groups(source: Any, columns: list[str] | None = None) -> Iterator[Any]:
    """The file's row groups as Arrow tables, one at a time, each freed before the next is read.

    Row group by row group, not `iter_batches`: Arrow's batch reader held about the whole file
    in memory (250 MB for a 100 MB part, measured), which undoes streaming.
    """
    for group in range(source.num_row_groups):
        yield source.read_row_group(group, columns=columns, use_threads=False)
        release_memory()


def release_memory() -> None:
    """Hand Arrow's freed buffers back to the system: a Dask worker counts memory the allocator
    keeps against its limit, and pauses on it although nothing can spill it."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def meta(dataset: ParquetDataset, backend: str, columns: list[str] | None = None) -> Any:
    """An empty frame of the dataset's columns and types, so Dask need not read a file for it."""
    import pyarrow as pa

    schema = dataset.schema
    if columns is not None:
        schema = pa.schema([schema.field(c) for c in columns])
    empty = schema.empty_table().to_pandas()
    if backend == "cudf":
        import cudf

        return cudf.DataFrame.from_pandas(empty)
    return empty


def frame(dataset: ParquetDataset, backend: str, columns: list[str] | None = None) -> Any:
    """The dataset as a Dask DataFrame, one partition per file, read when computed."""
    import dask.dataframe as dd

    return dd.from_map(  # type: ignore[no-untyped-call]
        read_part,
        list(dataset.files),
        fs=dataset.fs,
        backend=backend,
        columns=columns,
        meta=meta(dataset, backend, columns),
        enforce_metadata=False,
    )
