"""Clean, derive features and split a Parquet dataset into train/validation/test, streaming.

One task per input file reads it in batches (pandas) or whole (cuDF, which spills on its own),
and writes its rows to the three split directories: memory per task stays near one batch,
whatever the partition size, and nothing is held between tasks. The split of a row depends only
on `seed` and its position in the dataset, so it is the same on any cluster, any partitioning
of the same rows, and on Polars, pandas or cuDF. On one machine the work runs on Polars in
this process (`_polars.preprocess_file`: one streaming pass per file writes its three parts and
its statistics), on a cluster as Dask tasks (`_backend.plan`).

What is done to a row (fill values, derived features) is also written, as a declarative
`headwater.models.transform.Transform`, to `_transform.json` in each split's directory:
`train_xgboost` stores it with the model, and the model server applies it to raw rows, so a
served model answers the rows the pipeline started from. The derived features are computed
with the same function the server uses (`derive`), so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from headwater.components.data import _backend, _dataset
from headwater.errors import InvalidArgumentError
from headwater.models.transform import SPEC_FILE, Derived, Transform, derive, dumps

SPLITS = ("train", "validation", "test")
BATCH_ROWS = 131_072
_STATS = ("count", "sum", "sumsq", "min", "max")


def split_uniform(seed: int, start: int, rows: int) -> Any:
    """A uniform [0, 1) number per row `start .. start + rows`, from (seed, row) alone
    (SplitMix64, so it needs no random state carried between partitions)."""
    import numpy as np

    z = np.arange(start, start + rows, dtype=np.uint64)
    # Array arithmetic wraps modulo 2**64 (NumPy scalars would warn), so fold the seed in here.
    z += np.uint64((seed * 0xD1B54A32D192ED03 + 0x9E3779B97F4A7C15) % 2**64)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


#: The derived features `preprocess` adds where the Higgs columns they need are present:
#: the scalar sum of the four jets' pT, and how many jets are b-tagged.
DERIVED = (
    Derived("jets_pt_sum", "sum", tuple(f"jet{j}pt" for j in range(1, 5))),
    Derived("n_btag", "count_positive", tuple(f"jet{j}b-tag" for j in range(1, 5))),
)


def derived_for(columns: Sequence[str]) -> tuple[Derived, ...]:
    """The `DERIVED` features whose columns are all among `columns`."""
    present = set(columns)
    return tuple(d for d in DERIVED if all(c in present for c in d.columns))


def add_features(frame: Any) -> Any:
    """The derived features (`DERIVED`), where the columns they need are present.

    On pandas through `headwater.models.transform.derive`, the function the model server
    applies to raw rows, so training and serving compute them one way.
    """
    for d in derived_for(list(frame.columns)):
        block = frame[list(d.columns)]
        if hasattr(block, "to_cupy"):  # cuDF: stay on the GPU, same arithmetic
            wide = block.astype("float64")
            if d.op == "sum":
                frame[d.name] = wide.sum(axis=1).astype("float32")
            else:
                frame[d.name] = (wide > 0).sum(axis=1).astype("float32")
        else:
            frame[d.name] = derive(d.op, block.to_numpy(dtype="float64", na_value=float("nan")))
    return frame


def transform_spec(columns: Sequence[str], label: str, fill: dict[str, float]) -> Transform:
    """What `preprocess` does to a row of a dataset with `columns`, as a `Transform`."""
    return Transform(
        inputs=tuple(c for c in columns if c != label),
        fill=dict(fill),
        derived=derived_for(columns),
        label=label,
    )


def _transform(frame: Any, start: int, label: str, fill: dict[str, float], seed: int) -> Any:
    """(cleaned frame with derived features, split number per row as a NumPy array)."""

    keep = frame[label].notna()
    u = split_uniform(seed, start, len(frame))
    if not bool(keep.all()):
        mask = keep.to_numpy() if hasattr(keep, "to_numpy") else keep.values_host
        frame, u = frame[keep].reset_index(drop=True), u[mask]
    if fill:
        frame = frame.fillna({c: v for c, v in fill.items() if c in frame.columns})
    return add_features(frame), u


def _partial(frame: Any) -> Any:
    """count/sum/sumsq/min/max per numeric column, as a small pandas DataFrame."""
    numeric = frame.select_dtypes("number").astype("float64")
    parts = [
        numeric.count(),
        numeric.sum(),
        (numeric * numeric).sum(),
        numeric.min(),
        numeric.max(),
    ]
    table = [p.to_pandas() if hasattr(p, "to_pandas") else p for p in parts]
    import pandas as pd

    return pd.DataFrame(dict(zip(_STATS, table, strict=True)))


def _merge(a: Any, b: Any) -> Any:
    """Two `_partial` tables summed (None: nothing yet); min and max skip a side's NaN (a part
    with no rows), whichever side it is on."""
    import numpy as np

    if a is None or b is None:
        return b if a is None else a
    out = a.copy()
    for s in ("count", "sum", "sumsq"):
        out[s] = a[s] + b[s]
    out["min"] = np.fmin(a["min"], b["min"])
    out["max"] = np.fmax(a["max"], b["max"])
    return out


def _preprocess_file(
    fs: Any,
    path: str,
    index: int,
    start: int,
    outputs: dict[str, str],
    label: str,
    fill: dict[str, float],
    cuts: tuple[float, float],
    seed: int,
    backend: str,
) -> dict[str, Any]:
    """Transform one input file into one part per split; returns its rows and partial stats."""
    name = _dataset.PART_NAME.format(index)
    rows = dict.fromkeys(SPLITS, 0)
    stats = None
    if backend == "cudf":
        frame = _dataset.read_part(path, fs, backend)
        total = len(frame)
        if not total:
            return {"rows": rows, "dropped": 0, "stats": None}
        frame, u = _transform(frame, start, label, fill, seed)
        stats = _partial(frame)
        import cupy

        which = cupy.asarray(_which(u, cuts))
        for k, split in enumerate(SPLITS):
            part = frame[which == k]
            rows[split] = len(part)
            _dataset.write_part(part, fs, f"{outputs[split]}/{name}")
        return {"rows": rows, "dropped": total - sum(rows.values()), "stats": stats}
    import pyarrow as pa
    import pyarrow.parquet as pq

    writers: dict[str, Any] = {}
    handles: list[Any] = []
    total = 0
    try:
        with _dataset.parquet_file(fs, path) as source:
            for group in _dataset.row_groups(source):
                n = group.num_rows
                if not n:  # an empty file's row group: no part, not one of its own types
                    continue
                frame = group.to_pandas(self_destruct=True)
                del group
                frame, u = _transform(frame, start + total, label, fill, seed)
                total += n
                stats = _merge(stats, _partial(frame))
                which = _which(u, cuts)
                for k, split in enumerate(SPLITS):
                    table = pa.Table.from_pandas(frame[which == k], preserve_index=False)
                    if split not in writers:
                        out = fs.open(f"{outputs[split]}/{name}", "wb")
                        handles.append(out)
                        writers[split] = pq.ParquetWriter(
                            out, table.schema, compression="snappy", use_dictionary=False
                        )
                    writers[split].write_table(table, row_group_size=_dataset.ROW_GROUP_ROWS)
                    rows[split] += table.num_rows
    finally:
        for writer in writers.values():
            writer.close()
        for out in handles:
            out.close()
        _dataset.release_memory()
    return {"rows": rows, "dropped": total - sum(rows.values()), "stats": stats}


def _which(u: Any, cuts: tuple[float, float]) -> Any:
    import numpy as np

    return np.searchsorted(np.asarray(cuts), u, side="right")


def preprocess(
    url: str,
    train: str,
    validation: str,
    test: str,
    stats_path: str,
    *,
    label: str = "label",
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
    seed: int = 0,
    client: Any = None,
    backend: str | None = None,
) -> dict[str, Any]:
    """Drop rows without a label, fill other nulls with the column mean, add derived
    features, split deterministically, and write column statistics as Markdown.

    Args:
        url: The input Parquet dataset (a directory of parts, or one file).
        train, validation, test: Output directories, one part per input file each.
        stats_path: Where the Markdown column statistics go.
        label: The label column; it must exist.
        fractions: Shares of train, validation and test (they must sum to 1).
        seed: Chooses the split.
        client: A `distributed.Client` to compute on; None: Polars in this process on one
            machine, else `get_client()` (see `_backend.plan`).
        backend: "polars", "pandas" or "cudf" (Dask), or None to choose by where it runs.

    Returns:
        `{"rows": {split: n}, "dropped", "filled": [columns], "columns": [names],
        "transform", "engine"}`: `transform` is what was done to a row
        (`headwater.models.transform`), also written as `_transform.json` into each split's
        directory; `engine` is "polars" when it ran here, else the Dask backend.

    Raises:
        StorageError, UserError: The bad inputs `inspect_dataset` names.
        InvalidArgumentError: `fractions` are not three non-negative shares summing to 1.
    """
    if len(fractions) != 3 or min(fractions) < 0 or abs(sum(fractions) - 1) > 1e-9:
        raise InvalidArgumentError(
            f"fractions must be three non-negative shares (train, validation, test) summing "
            f"to 1, got {tuple(fractions)!r}"
        )
    dataset = _dataset.inspect_dataset(url, label=label)
    where = _backend.plan(client, backend, url, train, validation, test, stats_path)
    fill = _fill_values(dataset, label, where)
    outputs, filesystems = {}, {}
    for split, target in zip(SPLITS, (train, validation, test), strict=True):
        filesystems[split], outputs[split] = _dataset.prepare_output(target)
    cuts = (fractions[0], fractions[0] + fractions[1])
    starts = list(enumerate(dataset.offsets()))
    if where.local:
        from headwater.components.data import _polars

        derived = derived_for(dataset.columns)
        parts = [
            _polars.preprocess_file(dataset, i, start, outputs, label, fill, cuts, seed, derived)
            for i, start in starts
        ]
    else:
        calls = [
            (
                dataset.fs,
                dataset.files[i],
                i,
                start,
                outputs,
                label,
                fill,
                cuts,
                seed,
                where.backend,
            )
            for i, start in starts
        ]
        parts = _backend.run_each(where, _preprocess_file, calls)
    rows = {s: sum(p["rows"][s] for p in parts) for s in SPLITS}
    stats = None
    for part in parts:
        stats = _merge(stats, part["stats"])
    dropped = sum(p["dropped"] for p in parts)
    fs, path = _dataset.filesystem(stats_path)
    with fs.open(path, "w") as fh:
        fh.write(stats_markdown(stats, dataset, rows, dropped, fill))
    # What a served model must do to a raw row first: beside each split, for what trains on it.
    spec = transform_spec(dataset.columns, label, fill)
    for split in SPLITS:
        with filesystems[split].open(f"{outputs[split]}/{SPEC_FILE}", "w") as fh:
            fh.write(dumps(spec))
    return {
        "rows": rows,
        "dropped": dropped,
        "filled": sorted(fill),
        "columns": list(stats.index) if stats is not None else [],
        "transform": spec.to_json(),
        "engine": where.backend,
    }


def _fill_values(
    dataset: _dataset.ParquetDataset, label: str, where: _backend.Plan
) -> dict[str, float]:
    """Means of the feature columns the footers say have nulls (one streaming pass over them)."""
    import pyarrow.types as pat

    columns = [
        f.name
        for f in dataset.schema
        if f.name != label
        and dataset.nulls.get(f.name)
        and (pat.is_floating(f.type) or pat.is_integer(f.type))
    ]
    if not columns:
        return {}
    if where.local:
        from headwater.components.data import _polars

        means = _polars.fill_means(dataset, columns)
    else:
        calls = [(path, dataset.fs, where.backend, columns) for path in dataset.files]
        parts = _backend.run_each(where, _sums, calls)
        total = sum(p[0] for p in parts)
        counts = sum(p[1] for p in parts)
        found = total / counts.where(counts > 0)
        means = {c: float(found[c]) for c in columns}
    return {c: _as_stored(v, dataset.schema.field(c).type) for c, v in means.items()}


def _as_stored(value: float, kind: Any) -> float:
    """A fill value as its column stores it (a float32 column holds the float32 nearest the
    mean): what a row gets, whichever engine summed the column, and what the transform says."""
    import numpy as np
    import pyarrow.types as pat

    if pat.is_float32(kind):
        return float(np.float32(value))
    return value


def _sums(path: str, fs: Any, backend: str, columns: list[str]) -> tuple[Any, Any]:
    """(sum, non-null count) per column of one file, streamed."""
    total = counts = 0
    for frame in _dataset.iter_frames(path, fs, backend, columns):
        values = frame.astype("float64")
        s, n = values.sum(), values.count()
        total = total + (s.to_pandas() if hasattr(s, "to_pandas") else s)
        counts = counts + (n.to_pandas() if hasattr(n, "to_pandas") else n)
    return total, counts


def stats_markdown(
    stats: Any,
    dataset: _dataset.ParquetDataset,
    rows: dict[str, int],
    dropped: int,
    fill: dict[str, float],
) -> str:
    """The column statistics artifact: splits, then one row per numeric output column."""
    import math

    lines = [
        f"# Column statistics: {dataset.url}",
        "",
        f"{dataset.total_rows} input rows in {len(dataset.files)} file(s); "
        f"{dropped} dropped (no label); nulls filled with the column mean in: "
        f"{', '.join(sorted(fill)) or 'none'}.",
        "",
        "| split | rows |",
        "|---|---:|",
        *(f"| {s} | {n} |" for s, n in rows.items()),
        "",
        "| column | input nulls | count | mean | std | min | max |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    if stats is not None:
        for name, r in stats.iterrows():
            n = r["count"]
            mean = r["sum"] / n if n else math.nan
            var = max(r["sumsq"] / n - mean * mean, 0.0) if n else math.nan
            lines.append(
                f"| {name} | {dataset.nulls.get(str(name), 0)} | {int(n)} | {mean:.6g} | "
                f"{math.sqrt(var):.6g} | {r['min']:.6g} | {r['max']:.6g} |"
            )
    return "\n".join(lines) + "\n"
