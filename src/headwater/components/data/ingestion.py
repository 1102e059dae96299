"""CSV or Parquet from any fsspec URL into a Parquet dataset of parts of a target size.

Parquet input is re-cut by rows: each output part is a task that streams the row groups it
needs in batches, so a 1 GB input file costs no more memory than a 100 MB one. Uncompressed
CSV is read in byte ranges in parallel on a cluster (`dask.dataframe.read_csv`, on cuDF when
the workers have GPUs); compressed CSV cannot be split, so each file is one task that streams
it in chunks, as every CSV file is on one machine (threads in this process, no cluster).
"""

from __future__ import annotations

from typing import Any

from headwater.components.data import _backend, _dataset
from headwater.errors import InvalidArgumentError, UserError

FORMATS = ("auto", "csv", "parquet")
_PARQUET = (".parquet", ".pq", ".parq")
_CSV = (".csv", ".csv.gz", ".csv.bz2", ".csv.xz", ".csv.zst", ".tsv", ".txt")
_BATCH_ROWS = 65_536


def ingest(
    source: str,
    url: str,
    *,
    partition_size_mb: float = 100,
    format: str = "auto",
    column_names: list[str] | None = None,
    client: Any = None,
    backend: str | None = None,
) -> dict[str, Any]:
    """Copy `source` (a file, a directory, s3://..., gs://...) into parts under `url`.

    Args:
        source: CSV or Parquet: one file, or a directory of them.
        url: Output directory.
        partition_size_mb: Target size of each part in memory (about its size on disk).
        format: "csv", "parquet", or "auto" (by the files' extensions).
        column_names: For CSV without a header row (the UCI HIGGS file): the names, in order.
        client: A `distributed.Client` to compute on; None: threads in this process on one
            machine, else `get_client()` (see `_backend.plan`).
        backend: "polars" (here), "pandas" or "cudf" (Dask), or None to choose by where it
            runs.

    Returns:
        `{"rows", "partitions", "bytes", "schema": {column: type}, "engine"}` for the
        artifact metadata.

    Raises:
        StorageError: `source` does not exist.
        InvalidArgumentError: A partition size that is not positive, an unknown format.
        UserError: No rows; files whose schemas (or CSV headers) disagree, naming the file.
    """
    target = _dataset.check_partition_size(partition_size_mb)
    if format not in FORMATS:
        raise InvalidArgumentError(f"unknown format {format!r} (known: {', '.join(FORMATS)})")
    fs, path = _dataset.filesystem(source)
    files = _dataset.list_files(fs, path, source, _PARQUET + _CSV)
    if format == "auto":
        format = "parquet" if files and all(f.lower().endswith(_PARQUET) for f in files) else "csv"
    if not files:
        raise UserError(f"input {source!r} is empty: it holds no CSV or Parquet files")
    where = _backend.plan(client, backend, source, url)
    out_fs, out = _dataset.prepare_output(url)
    if format == "parquet":
        _ingest_parquet(source, out_fs, out, target, where)
    else:
        _ingest_csv(fs, files, out_fs, out, target, column_names, where)
    written = _dataset.inspect_dataset(url)
    return {
        "rows": written.total_rows,
        "partitions": len(written.files),
        "bytes": sum(out_fs.size(f) for f in written.files),
        "schema": {f.name: str(f.type) for f in written.schema},
        "engine": where.backend,
    }


# -- Parquet: re-cut by rows -------------------------------------------------------------------


def _ingest_parquet(source: str, fs: Any, out: str, target: int, where: _backend.Plan) -> None:
    dataset = _dataset.inspect_dataset(source)
    row_bytes = max(1.0, dataset.uncompressed_bytes / dataset.total_rows)
    per_part = max(1, int(target / row_bytes))
    spans = list(zip(dataset.files, dataset.offsets(), dataset.rows, strict=True))
    calls = []
    for i, lo in enumerate(range(0, dataset.total_rows, per_part)):
        hi = min(lo + per_part, dataset.total_rows)
        pieces = [
            (f, max(lo, o) - o, min(hi, o + n) - o) for f, o, n in spans if o < hi and o + n > lo
        ]
        calls.append((dataset.fs, pieces, fs, f"{out}/{_dataset.PART_NAME.format(i)}"))
    _backend.run_each(where, _copy_rows, calls)


def _copy_rows(in_fs: Any, pieces: list[tuple[str, int, int]], fs: Any, path: str) -> int:
    """Stream rows `lo:hi` of each (file, lo, hi) piece into one Parquet file at `path`."""
    import pyarrow.parquet as pq

    writer = None
    with fs.open(path, "wb") as out:
        try:
            for name, lo, hi in pieces:
                with _dataset.parquet_file(in_fs, name) as source:
                    groups, first, skip = [], 0, None
                    for g in range(source.num_row_groups):
                        n = source.metadata.row_group(g).num_rows
                        if first < hi and first + n > lo:
                            groups.append(g)
                            skip = lo - first if skip is None else skip
                        first += n
                    at, skip = 0, skip or 0
                    for batch in source.iter_batches(batch_size=_BATCH_ROWS, row_groups=groups):
                        first = max(0, skip - at)
                        end = min(batch.num_rows, skip + hi - lo - at)
                        keep = batch.slice(first, max(0, end - first))
                        at += batch.num_rows
                        if keep.num_rows:
                            if writer is None:
                                writer = pq.ParquetWriter(
                                    out, keep.schema, compression="snappy", use_dictionary=False
                                )
                            writer.write_batch(keep, row_group_size=_dataset.ROW_GROUP_ROWS)
                        if at >= skip + hi - lo:
                            break
        finally:
            if writer is not None:
                writer.close()
    return int(fs.size(path))


# -- CSV ---------------------------------------------------------------------------------------


def _ingest_csv(
    fs: Any,
    files: list[str],
    out_fs: Any,
    out: str,
    target: int,
    names: list[str] | None,
    where: _backend.Plan,
) -> None:
    from fsspec.utils import infer_compression

    _check_headers(fs, files, names)
    if all(fs.size(f) == 0 for f in files):
        raise UserError(f"input {fs.unstrip_protocol(files[0])!r} is empty: the CSV has no rows")
    urls = [fs.unstrip_protocol(f) for f in files]
    options: dict[str, Any] = {"header": None, "names": names} if names else {}
    text_row, memory_row = _row_sizes(fs, files[0], options)
    if where.local or any(infer_compression(f) for f in files):
        rows = max(1, target // memory_row)
        calls = [(fs, f, i, out_fs, out, rows, options) for i, f in enumerate(files)]
        try:
            _backend.run_each(where, _stream_csv, calls)
        except ValueError as exc:  # pandas' parser errors
            raise UserError(f"cannot read the CSV at {urls[0]!r}: {exc}") from exc
        return
    dask = _backend.dask()
    client, backend = where.client, where.backend
    blocksize = max(1 << 16, int(target * text_row / memory_row))
    with _backend.dataframe_backend(backend):
        frame = dask.dataframe.read_csv(urls, blocksize=blocksize, **options)
        parts = frame.to_delayed()
        tasks = [
            dask.delayed(_dataset.write_part, pure=True)(
                part, out_fs, f"{out}/{_dataset.PART_NAME.format(i)}"
            )
            for i, part in enumerate(parts)
        ]
        try:
            _backend.compute(tasks, client=client)
        except ValueError as exc:  # Dask's "Mismatched dtypes found in read_csv" and kin
            raise UserError(f"cannot read the CSV at {urls[0]!r}: {exc}") from exc


def _check_headers(fs: Any, files: list[str], names: list[str] | None) -> None:
    """Raise, naming the file, when a CSV file's header differs from the first file's."""
    if names:
        return
    import io

    def first_line(path: str) -> str:
        with (
            fs.open(path, "rb", compression="infer") as fh,
            io.TextIOWrapper(fh, encoding="utf-8") as text,
        ):
            return text.readline().strip()

    header = first_line(files[0])
    for other in files[1:]:
        line = first_line(other)
        if line != header and fs.size(other):
            raise UserError(
                f"partition {fs.unstrip_protocol(other)!r} has a schema that disagrees with "
                f"{fs.unstrip_protocol(files[0])!r}: header {line[:200]!r}, "
                f"expected {header[:200]!r}"
            )


def _row_sizes(fs: Any, path: str, options: dict[str, Any]) -> tuple[float, int]:
    """(text bytes per row, memory bytes per row) from the file's first megabyte."""
    import io

    import pandas as pd

    with fs.open(path, "rb", compression="infer") as fh:
        text = fh.read(1 << 20)
    lines = text.splitlines()[:-1] if len(text) == 1 << 20 else text.splitlines()
    if len(lines) < 2:
        return 100.0, 100
    sample = pd.read_csv(io.BytesIO(b"\n".join(lines)), **options)
    if sample.empty:
        return 100.0, 100
    memory = int(sample.memory_usage(index=False, deep=True).sum() / len(sample)) or 1
    return len(b"\n".join(lines)) / len(sample), memory


def _stream_csv(
    fs: Any, path: str, index: int, out_fs: Any, out: str, rows: int, options: dict[str, Any]
) -> int:
    """One compressed CSV file, `rows` at a time, into parts `part-<index>-<n>.parquet`."""
    import pandas as pd

    written = 0
    with fs.open(path, "rb", compression="infer") as fh:
        for n, chunk in enumerate(pd.read_csv(fh, chunksize=rows, **options)):
            written += _dataset.write_part(chunk, out_fs, f"{out}/part-{index:05d}-{n:05d}.parquet")
    return written
