"""The data steps on Polars' streaming engine, in this process (ADR 70).

Each function computes what its Dask counterpart computes, with pandas' rules for missing
values spelled out (Polars keeps NaN and null apart; pandas treats both as missing): sums and
counts skip both, a row whose label is either is dropped, and a fill value replaces both.
Queries are lazy and run on the streaming engine, so memory follows Polars' batches, not the
data's size; `preprocess_file` makes its three split files and its statistics in one pass.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from headwater import config
from headwater._deps import require
from headwater.components.data import _dataset

#: SplitMix64's constants (`preprocessing.split_uniform`): UInt64 arithmetic in Polars wraps
#: modulo 2**64 as NumPy's does, so the same numbers come out for the same (seed, row).
_GOLDEN, _MIX1, _MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_SEED_MIX = 0xD1B54A32D192ED03
_ROW, _U = "__headwater_row", "__headwater_u"


#: Polars' own settings for its out-of-core memory manager, read once, when it is imported.
POLARS_MEMORY_BUDGET_ENV = "POLARS_OOC_MEMORY_BUDGET_MB"
POLARS_SPILL_DIR_ENV = "POLARS_OOC_SPILL_DIR"


def pl() -> Any:
    """`polars`, or a MissingDependencyError naming the extra.

    Imported here first, it gets `HEADWATER_DATA_MEMORY_LIMIT` as its memory budget (past it,
    operators that hold data spill to disk) and `HEADWATER_DATA_SPILL_DIR` as where they spill.

    Raises:
        ConfigError: `HEADWATER_DATA_MEMORY_LIMIT` is not a size.
    """
    if "polars" not in sys.modules:
        limit = config.data_memory_limit()
        if limit is not None:
            os.environ[POLARS_MEMORY_BUDGET_ENV] = str(limit // 2**20)
        spill = config.data_spill_dir()
        if spill is not None:
            os.environ[POLARS_SPILL_DIR_ENV] = spill
    return require("polars", "data", "the data steps on one machine", package="polars")


def _u64(value: int) -> Any:
    polars = pl()
    return polars.lit(value % 2**64, dtype=polars.UInt64)


def split_uniform(position: Any, seed: int) -> Any:
    """`preprocessing.split_uniform` as a Polars expression over UInt64 row positions."""
    polars = pl()
    z = position + _u64(seed * _SEED_MIX + _GOLDEN)
    # Polars has no shift on expressions: z >> k is z // 2**k for unsigned integers.
    z = (z ^ (z // _u64(2**30))) * _u64(_MIX1)
    z = (z ^ (z // _u64(2**27))) * _u64(_MIX2)
    z = z ^ (z // _u64(2**31))
    return (z // _u64(2**11)).cast(polars.Float64) * 2.0**-53


def _missing_to_null(name: str, kind: Any) -> Any:
    """Column `name` with NaN as null (floats), so sums, counts and comparisons skip it."""
    column = pl().col(name)
    return column.fill_nan(None) if kind.is_float() else column


def scan(files: list[str] | tuple[str, ...]) -> Any:
    """A lazy scan of local Parquet files, in order."""
    return pl().scan_parquet(list(files))


def column_range(dataset: _dataset.ParquetDataset, column: str) -> tuple[float, float]:
    """The column's minimum and maximum, NaN skipped (one streaming pass)."""
    polars = pl()
    kind = scan(dataset.files).collect_schema()[column]
    value = _missing_to_null(column, kind).cast(polars.Float64)
    found = (
        scan(dataset.files)
        .select(value.min().alias("lo"), value.max().alias("hi"))
        .collect(engine="streaming")
    )
    return float(found["lo"][0]), float(found["hi"][0])


def group_sums(
    dataset: _dataset.ParquetDataset,
    label: str,
    bin_column: str,
    edges: tuple[float, float, int],
    columns: list[str],
    keys: tuple[str, str, str],
) -> Any:
    """Rows and column sums by label and by bin, as pandas: what `summary.partial_sums` and
    Dask's reduction of them give (`keys`: the by, key and rows column names).

    Sums skip NaN, as pandas' do. Skipping costs a tenth of the query, and a sum with no NaN
    to skip is the same either way, so the columns are summed as they are first, and only the
    columns whose sums came out NaN are summed again skipping it.
    """
    import pandas as pd

    polars = pl()
    by, key, rows = keys
    low, width, bins = edges
    schema = scan(dataset.files).collect_schema()
    raw_label = _missing_to_null(label, schema[label])
    binned = _missing_to_null(bin_column, schema[bin_column])
    # pandas' `(x - low) // width` on the column's own type (float32 stays float32).
    bin_of = ((binned - low) // width).fill_null(-1).clip(-1, bins - 1).cast(polars.Float64)

    def summed(names: list[str], skip_nan: bool) -> Any:
        sums = [polars.len().cast(polars.Float64).alias(rows)] + [
            (_missing_to_null(c, schema[c]) if skip_nan else polars.col(c))
            .cast(polars.Float64)
            .sum()
            .alias(c)
            for c in names
        ]
        frame = scan(dataset.files)
        by_label = (
            frame.filter(raw_label.is_not_null())
            .group_by(raw_label.cast(polars.Float64).alias(key))
            .agg(sums)
            .with_columns(polars.lit(0, dtype=polars.Int64).alias(by))
        )
        by_bin = (
            frame.group_by(bin_of.alias(key))
            .agg(sums)
            .with_columns(polars.lit(1, dtype=polars.Int64).alias(by))
        )
        found = polars.collect_all([by_label, by_bin], engine="streaming")
        parts = [f.select(by, key, rows, *names).to_pandas() for f in found]
        return pd.concat(parts, ignore_index=True).sort_values([by, key], ignore_index=True)

    found = summed(columns, skip_nan=False)
    again = [c for c in columns if found[c].isna().any()]
    if again:
        found[again] = summed(again, skip_nan=True)[again].to_numpy()
    return found


def fill_means(dataset: _dataset.ParquetDataset, columns: list[str]) -> dict[str, float]:
    """The mean of each of `columns`, nulls and NaN skipped (one streaming pass)."""
    polars = pl()
    schema = scan(dataset.files).collect_schema()
    found = (
        scan(dataset.files)
        .select(
            [_missing_to_null(c, schema[c]).cast(polars.Float64).mean().alias(c) for c in columns]
        )
        .collect(engine="streaming")
    )
    return {c: float("nan") if found[c][0] is None else float(found[c][0]) for c in columns}


def preprocess_file(
    dataset: _dataset.ParquetDataset,
    index: int,
    start: int,
    outputs: dict[str, str],
    label: str,
    fill: dict[str, float],
    cuts: tuple[float, float],
    seed: int,
    derived: tuple[Any, ...],
) -> dict[str, Any]:
    """`preprocessing._preprocess_file` on Polars: one input file to one part per split, its
    rows, the labelless rows it dropped, and count/sum/sumsq/min/max per numeric column."""
    polars = pl()
    if not dataset.rows[index]:  # as on Dask: an empty input file makes no parts
        return {"rows": dict.fromkeys(outputs, 0), "dropped": 0, "stats": None}
    path = dataset.files[index]
    frame = scan([path])
    schema = frame.collect_schema()
    widened = {n for n, k in schema.items() if k.is_integer() and dataset.nulls.get(n)}
    frame = frame.with_columns(
        # pandas reads an integer column with nulls as float64: so do we, everywhere.
        [polars.col(n).cast(polars.Float64) for n in widened]
    ).with_row_index(_ROW)
    position = polars.col(_ROW).cast(polars.UInt64) + _u64(start)
    kinds = {n: (polars.Float64 if n in widened else k) for n, k in schema.items()}
    keep = _missing_to_null(label, kinds[label]).is_not_null()
    filled = [
        _missing_to_null(c, kinds[c]).fill_null(polars.lit(v)).cast(kinds[c]).alias(c)
        if kinds[c].is_float()
        else polars.col(c).fill_null(polars.lit(v)).alias(c)
        for c, v in fill.items()
        if c in kinds
    ]
    data = (
        frame.with_columns(split_uniform(position, seed).alias(_U))
        .filter(keep)
        .with_columns(filled)
    )
    data = data.with_columns([_derive(d) for d in derived])
    names = [n for n in data.collect_schema().names() if n not in (_ROW, _U)]
    u = polars.col(_U)
    which = polars.when(u < cuts[0]).then(0).when(u < cuts[1]).then(1).otherwise(2)
    name = _dataset.PART_NAME.format(index)
    sinks = [
        data.filter(which == k)
        .select(names)
        .sink_parquet(
            f"{outputs[split]}/{name}",
            compression="snappy",
            row_group_size=_dataset.ROW_GROUP_ROWS,
            lazy=True,
        )
        for k, split in enumerate(outputs)
    ]
    out_schema = data.select(names).collect_schema()
    numeric = [n for n in names if out_schema[n].is_numeric()]
    rows = [
        data.select(
            polars.len().alias("__total"),
            *[(which == k).sum().alias(split) for k, split in enumerate(outputs)],
        ),
        frame.select(polars.len().alias("__input")),
    ]
    stats = data.select(
        [
            expr
            for n in numeric
            for expr in _stats(_missing_to_null(n, out_schema[n]).cast(polars.Float64), n)
        ]
    )
    *_, counted, total, found = polars.collect_all([*sinks, *rows, stats], engine="streaming")
    split_rows = {split: int(counted[split][0]) for split in outputs}
    return {
        "rows": split_rows,
        "dropped": int(total["__input"][0]) - int(counted["__total"][0]),
        "stats": _stats_frame(found, numeric),
    }


def _derive(d: Any) -> Any:
    """A `models.transform.Derived` feature as `derive` computes it: float64 across the
    columns, NaN as absent, then float32."""
    polars = pl()
    wide = [polars.col(c).cast(polars.Float64).fill_nan(None) for c in d.columns]
    if d.op == "sum":
        value = polars.sum_horizontal(wide)
    elif d.op == "count_positive":
        value = polars.sum_horizontal([(w > 0).fill_null(False).cast(polars.Int32) for w in wide])
    else:
        raise ValueError(f"unknown transform op {d.op!r}")
    return value.cast(polars.Float32).alias(d.name)


def _stats(value: Any, name: str) -> list[Any]:
    return [
        value.count().alias(f"count:{name}"),
        value.sum().alias(f"sum:{name}"),
        (value * value).sum().alias(f"sumsq:{name}"),
        value.min().alias(f"min:{name}"),
        value.max().alias(f"max:{name}"),
    ]


def _stats_frame(found: Any, numeric: list[str]) -> Any:
    """count/sum/sumsq/min/max per column, as `preprocessing._partial` lays them out."""
    import pandas as pd

    row = found.row(0, named=True)
    table = {
        stat: pd.Series(
            [
                float("nan") if row[f"{stat}:{n}"] is None else float(row[f"{stat}:{n}"])
                for n in numeric
            ],
            index=numeric,
            dtype="float64",
        )
        for stat in ("count", "sum", "sumsq", "min", "max")
    }
    return pd.DataFrame(table)
