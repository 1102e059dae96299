"""Feature means by label and by a binned feature: the brief's groupby, streamed.

On one machine it is two grouped aggregations on Polars' streaming engine
(`_polars.group_sums`); on a cluster, the Dask reduction below.

The groupbys are tree reductions (`split_out=1`): a handful of groups need no shuffle, and
Dask's default for many partitions (a P2P shuffle) is slower here and does not finish under
tight memory limits. Nothing is persisted, and no whole partition is held in pandas: each file
is streamed in batches into its partial sums, the only thing the reduction moves.
"""

from __future__ import annotations

from typing import Any

from headwater.components.data import _backend, _dataset
from headwater.errors import InvalidArgumentError, UserError

BIN = "bin"
_BY, _KEY, _ROWS = "group_by", "group", "rows"


def partial_sums(
    path: str,
    fs: Any,
    backend: str,
    label_column: str,
    bin_column: str,
    edges: tuple[float, float, int],
    value_columns: list[str],
) -> Any:
    """One file's rows and column sums by label and by bin, as a small pandas DataFrame.

    The file is read in batches (pandas) or whole (cuDF), so memory stays near one batch: the
    per-partition step of the tree reduction, done while streaming.
    """
    import pandas as pd

    # Not `label` and `columns`: dd.from_map takes those keywords for itself.
    columns, label = value_columns, label_column
    low, width, bins = edges
    found = []
    for frame in _dataset.iter_frames(path, fs, backend, columns):
        values = frame[columns].astype("float64")
        bin_of = ((frame[bin_column] - low) // width).fillna(-1).clip(-1, bins - 1)
        for by, key in ((0, frame[label]), (1, bin_of.astype("int64"))):
            grouped = values.assign(**{_ROWS: 1.0}).groupby(key.rename(_KEY))
            sums = grouped.sum()
            sums = sums.to_pandas() if hasattr(sums, "to_pandas") else sums
            found.append(sums.reset_index().assign(**{_BY: by}))
    if not found:
        return _empty(columns)
    both = pd.concat(found, ignore_index=True)
    both[_KEY] = both[_KEY].astype("float64")
    return both.groupby([_BY, _KEY], as_index=False).sum()[[_BY, _KEY, _ROWS, *columns]]


def _empty(columns: list[str]) -> Any:
    import pandas as pd

    return pd.DataFrame(
        {_BY: pd.Series(dtype="int64"), _KEY: pd.Series(dtype="float64")}
        | {c: pd.Series(dtype="float64") for c in (_ROWS, *columns)}
    )


def groupby_summary(
    url: str,
    table_path: str,
    report_path: str | None = None,
    *,
    label: str = "label",
    bin_column: str = "m_bb",
    bins: int = 10,
    client: Any = None,
    backend: str | None = None,
) -> Any:
    """Mean of every numeric column by `label` and by `bins` equal-width bins of `bin_column`.

    Args:
        url: The input Parquet dataset.
        table_path: Where the table goes, as CSV: `group_by` ("label" or the bin column),
            `group`, `low` and `high` (a bin's edges), `rows`, then one mean per column.
        report_path: Where the same table goes as Markdown (None: not written).
        label: The label column; it must exist.
        bin_column: The numeric column to bin (rows where it is null fall in bin -1).
        bins: How many bins between the column's minimum and maximum.
        client: A `distributed.Client` to compute on; None: Polars in this process on one
            machine, else `get_client()` (see `_backend.plan`).
        backend: "polars", "pandas" or "cudf" (Dask), or None to choose by where it runs.

    Returns:
        The table as a pandas DataFrame; `table.attrs["engine"]` says what computed it.

    Raises:
        StorageError, UserError: The bad inputs `inspect_dataset` names, or a `bin_column`
            that is absent.
        InvalidArgumentError: `bins` is not positive.
    """
    if bins <= 0:
        raise InvalidArgumentError(f"bins must be a positive integer, got {bins!r}")
    dataset = _dataset.inspect_dataset(url, label=label)
    if bin_column not in dataset.columns:
        raise UserError(
            f"bin column {bin_column!r} is absent from {url!r} "
            f"(columns: {', '.join(dataset.columns)})"
        )
    import pyarrow.types as pat

    kind = dataset.schema.field(bin_column).type
    if not (pat.is_floating(kind) or pat.is_integer(kind)):
        raise UserError(
            f"bin column {bin_column!r} of {url!r} holds {kind}, not numbers: bin a numeric "
            "column (bin_column=...)"
        )
    kind = dataset.schema.field(label).type
    if not (pat.is_floating(kind) or pat.is_integer(kind) or pat.is_boolean(kind)):
        raise UserError(
            f"label column {label!r} of {url!r} holds {kind}, not numbers: encode the classes "
            "as numbers (0, 1, ...) first"
        )
    # Checked first: a bad column is named before any cluster starts.
    where = _backend.plan(client, backend, url, table_path, *([report_path] if report_path else []))
    columns = [
        f.name
        for f in dataset.schema
        if pat.is_floating(f.type) or pat.is_integer(f.type) or pat.is_boolean(f.type)
    ]
    low, high = _range(dataset, bin_column, where)
    width = (high - low) / bins or 1.0
    if where.local:
        from headwater.components.data import _polars

        edges = (low, width, bins)
        found = _polars.group_sums(dataset, label, bin_column, edges, columns, (_BY, _KEY, _ROWS))
        sums = found.groupby([_BY, _KEY]).sum()
    else:
        dd = _backend.dask().dataframe
        partials = dd.from_map(  # one small frame per file, then a tree reduction of them
            partial_sums,
            list(dataset.files),
            fs=dataset.fs,
            backend=where.backend,
            label_column=label,
            bin_column=bin_column,
            edges=(low, width, bins),
            value_columns=columns,
            meta=_empty(columns),
            enforce_metadata=False,
        )
        (sums,) = _backend.compute(
            partials.groupby([_BY, _KEY]).sum(split_out=1), client=where.client
        )
    table = _table(sums.reset_index(), columns, label, bin_column, low, width)
    table.attrs["engine"] = where.backend
    fs, path = _dataset.filesystem(table_path)
    with fs.open(path, "w") as fh:
        table.to_csv(fh, index=False)
    if report_path:
        fs, path = _dataset.filesystem(report_path)
        with fs.open(path, "w") as fh:
            fh.write(table_markdown(table, url))
    return table


def _range(
    dataset: _dataset.ParquetDataset, column: str, where: _backend.Plan
) -> tuple[float, float]:
    """The column's minimum and maximum: from the footers, else one pass over the column."""
    if column in dataset.minimum and column in dataset.maximum:
        return float(dataset.minimum[column]), float(dataset.maximum[column])
    if where.local:
        from headwater.components.data import _polars

        return _polars.column_range(dataset, column)
    with _backend.dataframe_backend(where.backend):
        values = _dataset.frame(dataset, where.backend, [column])[column]
        low, high = _backend.compute(values.min(), values.max(), client=where.client)
    return float(low), float(high)


def _table(
    sums: Any, columns: list[str], label: str, bin_column: str, low: float, width: float
) -> Any:
    """group_by, group, low, high, rows, then the mean of each column."""
    import numpy as np
    import pandas as pd

    sums = sums.sort_values([_BY, _KEY], ignore_index=True)
    is_bin = (sums[_BY] == 1).to_numpy()
    keys = sums[_KEY].to_numpy()
    edges = is_bin & (keys >= 0)
    head = pd.DataFrame(
        {
            _BY: np.where(is_bin, bin_column, label),
            _KEY: keys.astype("int64"),
            "low": np.where(edges, low + keys * width, np.nan),
            "high": np.where(edges, low + (keys + 1) * width, np.nan),
            _ROWS: sums[_ROWS].astype("int64"),
        }
    )
    means = sums[columns].div(sums[_ROWS], axis=0)
    means.loc[~is_bin, label] = np.nan  # the mean of the key itself says nothing
    return pd.concat([head, means], axis=1)


def table_markdown(table: Any, url: str) -> str:
    """The summary table as Markdown (means to 4 significant digits)."""
    header = list(table.columns)
    lines = [
        f"# Feature means by group: {url}",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for row in table.itertuples(index=False):
        cells = [f"{v:.4g}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
