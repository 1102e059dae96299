"""A train, validation or test split read for XGBoost: checked, then cut into even partitions.

`xgboost.dask` trains each worker on the partitions it holds and never moves data between
workers, so a worker holding twice the rows makes the whole run wait on it. The splits arrive
as one Parquet file per input part, of any size (a 2M-row dataset in 100 MB parts comes as
884k + 116k rows), so they are re-cut here into pieces of equal rows, as many as the workers (or
the files, if more), each read from the row groups that hold it and placed on its own worker;
features and label are two column projections of the same pieces, so they line up partition
for partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from headwater.components.data import _dataset
from headwater.errors import UserError

#: Rows of one file to read into a partition: (file, first row, end row).
Piece = tuple[str, int, int]


@dataclass(frozen=True)
class Split:
    """One split's dataset, its feature columns (every column but the label) and its name."""

    name: str
    dataset: _dataset.ParquetDataset
    label: str
    features: tuple[str, ...]

    @property
    def rows(self) -> int:
        return self.dataset.total_rows


def open_split(name: str, url: str, label: str, features: list[str] | None = None) -> Split:
    """Read the footers of split `name` at `url` and check it can train or score a model.

    Args:
        name: "train", "validation" or "test", for the messages.
        url: The Parquet dataset (a directory of parts, or one file).
        label: The label column.
        features: The feature columns; None: every column but the label.

    Raises:
        UserError: The split is missing or empty, lacks the label or a feature column, or has
            a feature column that is not numeric (the message names the split and column).
    """
    try:
        dataset = _dataset.inspect_dataset(url, label=label)
    except UserError as exc:
        raise type(exc)(f"{name} split: {exc}") from exc
    types = dict(zip(dataset.schema.names, dataset.schema.types, strict=True))
    if features is None:
        features = [c for c in dataset.columns if c != label]
    elif absent := [f for f in features if f not in types]:
        raise UserError(
            f"{name} split {url!r} lacks the feature column(s) {absent} the model was trained "
            f"on (columns: {', '.join(dataset.columns)})"
        )
    if not features:
        raise UserError(f"{name} split {url!r} has no feature columns besides {label!r}")
    for column in [label, *features]:
        if not _numeric(types[column]):
            role = "label" if column == label else "feature"
            raise UserError(
                f"{role} column {column!r} of the {name} split {url!r} is {types[column]}, "
                "not numeric: XGBoost needs numbers (encode it, or drop it before training)"
            )
    return Split(name, dataset, label, tuple(features))


def _numeric(kind: Any) -> bool:
    import pyarrow.types as pat

    return bool(pat.is_integer(kind) or pat.is_floating(kind) or pat.is_boolean(kind))


def pieces(split: Split, parts: int) -> list[list[Piece]]:
    """Cut `split` into `max(parts, files)` partitions whose rows differ by at most one.

    Each partition is a list of row ranges `(file, start, end)`; one may span the end of a
    file and the start of the next.
    """
    dataset = split.dataset
    wanted = max(1, min(max(parts, len(dataset.files)), dataset.total_rows))
    base, extra = divmod(dataset.total_rows, wanted)
    sizes = [base + (1 if i < extra else 0) for i in range(wanted)]
    cut: list[list[Piece]] = []
    files = [(f, n) for f, n in zip(dataset.files, dataset.rows, strict=True) if n]
    index, offset = 0, 0  # the file, and the first row of it not yet in a partition
    for size in sizes:
        run: list[Piece] = []
        while size:
            path, rows = files[index]
            take = min(size, rows - offset)
            run.append((path, offset, offset + take))
            size -= take
            offset += take
            if offset == rows:
                index, offset = index + 1, 0
        cut.append(run)
    return cut


def read_piece(piece: list[Piece], fs: Any, backend: str, columns: list[str]) -> Any:
    """One partition (`pieces`) as a pandas or cuDF DataFrame of `columns`.

    Reads only the row groups that hold the rows asked for.
    """
    frames = []
    for path, start, end in piece:
        with _dataset.parquet_file(fs, path) as source:
            meta = source.metadata
            groups, first_row, seen = [], None, 0
            for g in range(meta.num_row_groups):
                rows = meta.row_group(g).num_rows
                if seen < end and seen + rows > start:
                    groups.append(g)
                    first_row = seen if first_row is None else first_row
                seen += rows
            skip = start - (first_row or 0)
            if backend == "cudf":
                import cudf

                whole = cudf.read_parquet(
                    fs.unstrip_protocol(path), columns=columns, row_groups=groups
                )
                frames.append(whole.iloc[skip : skip + end - start].reset_index(drop=True))
                continue
            table = source.read_row_groups(groups, columns=columns)
        table = table.slice(skip, end - start)
        frames.append(table.to_pandas(self_destruct=True, split_blocks=True))
    if len(frames) == 1:
        return frames[0]
    if backend == "cudf":
        import cudf

        return cudf.concat(frames, ignore_index=True)
    import pandas as pd

    return pd.concat(frames, ignore_index=True)


def frame(split: Split, cut: list[list[Piece]], backend: str, columns: list[str]) -> Any:
    """The `columns` of `split` as a Dask DataFrame with one partition per piece of `cut`."""
    import dask.dataframe as dd

    return dd.from_map(  # type: ignore[no-untyped-call]
        read_piece,
        cut,
        fs=split.dataset.fs,
        backend=backend,
        columns=columns,
        meta=_meta(split, backend, columns),
        enforce_metadata=False,
    )


def placed(
    split: Split, cut: list[list[Piece]], backend: str, columns: list[str], client: Any
) -> Any:
    """`frame`, read now, piece `i` on worker `i mod n` (in address order).

    Dask's scheduler would put small reads wherever a thread is free first, all of them on one
    worker, at times; `xgboost.dask` then trains on that worker alone.
    """
    import dask.dataframe as dd

    workers = sorted(client.scheduler_info(n_workers=-1).get("workers", {}))
    futures = [
        client.submit(
            read_piece,
            piece,
            split.dataset.fs,
            backend,
            columns,
            workers=[workers[i % len(workers)]] if workers else None,
            pure=False,
        )
        for i, piece in enumerate(cut)
    ]
    return dd.from_delayed(futures, meta=_meta(split, backend, columns), verify_meta=False)


def _meta(split: Split, backend: str, columns: list[str]) -> Any:
    """An empty frame of `columns` with the split's types, so Dask need not read a file."""
    from headwater.components.data._dataset import meta

    return meta(split.dataset, backend, columns)
