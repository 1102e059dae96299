"""Synthetic data with the Higgs schema (UCI HIGGS: a label and 28 features), any size.

Signal and background differ as in the real set: signal events more often show a b-quark pair
near the Higgs mass (`m_bb`), narrower `m_wbb`/`m_wwbb`, more b-tagged jets and slightly harder
transverse momenta; angles carry nothing. The classes overlap, so a gradient-boosted model
reaches an AUC of about 0.8, as on the real data.

Rows are made in blocks of `BLOCK_ROWS`, block `b` from `numpy.random.default_rng([seed, b])`:
the data depend only on `(rows, seed)`, not on the partition size, the number of workers or
the order tasks run in, and the same on pandas and cuDF (generation is NumPy either way).
"""

from __future__ import annotations

from typing import Any

from headwater.components.data import _backend, _dataset
from headwater.errors import InvalidArgumentError

LABEL = "label"
FEATURES = (
    "lepton_pT",
    "lepton_eta",
    "lepton_phi",
    "missing_energy_magnitude",
    "missing_energy_phi",
    *(f"jet{j}{part}" for j in range(1, 5) for part in ("pt", "eta", "phi", "b-tag")),
    "m_jj",
    "m_jjj",
    "m_lv",
    "m_jlv",
    "m_bb",
    "m_wbb",
    "m_wwbb",
)
COLUMNS = (LABEL, *FEATURES)
BLOCK_ROWS = 8192
#: Bytes per row in memory and (uncompressed) on disk: an int8 label and 28 float32 features.
ROW_BYTES = 1 + 4 * len(FEATURES)
_SIGNAL_FRACTION = 0.53
# How often each class shows the signal shapes: the overlap that sets the reachable AUC.
_SIGNAL_SHAPED = {1: 0.8, 0: 0.12}
_PHI = 1.74  # HIGGS stores angles scaled to about [-1.74, 1.74]
_BTAG = 2.173  # and a b-tag as 0 or 2.173


def block(seed: int, index: int, rows: int = BLOCK_ROWS) -> dict[str, Any]:
    """Columns of block `index` (its first `rows` rows), as NumPy arrays keyed by name."""
    import numpy as np

    rng = np.random.default_rng([seed, index])
    n = BLOCK_ROWS
    label = (rng.random(n) < _SIGNAL_FRACTION).astype(np.int8)
    shaped = rng.random(n) < np.where(label == 1, _SIGNAL_SHAPED[1], _SIGNAL_SHAPED[0])

    def pick(signal: Any, background: Any) -> Any:
        return np.where(shaped, signal, background)

    def gamma(shape_s: float, shape_b: float, scale: float) -> Any:
        return pick(rng.gamma(shape_s, scale, n), rng.gamma(shape_b, scale, n))

    def lognormal(mu_s: float, sigma_s: float, mu_b: float, sigma_b: float) -> Any:
        return pick(rng.lognormal(mu_s, sigma_s, n), rng.lognormal(mu_b, sigma_b, n))

    cols: dict[str, Any] = {LABEL: label}
    cols["lepton_pT"] = gamma(2.4, 2.0, 0.5)
    cols["lepton_eta"] = np.clip(rng.normal(0, 1, n) * pick(0.9, 1.0), -2.5, 2.5)
    cols["lepton_phi"] = rng.uniform(-_PHI, _PHI, n)
    cols["missing_energy_magnitude"] = gamma(2.3, 2.0, 0.5)
    cols["missing_energy_phi"] = rng.uniform(-_PHI, _PHI, n)
    for j, hardness in enumerate((1.3, 1.0, 0.85, 0.7), start=1):
        cols[f"jet{j}pt"] = hardness * gamma(2.3, 2.0, 0.5)
        cols[f"jet{j}eta"] = np.clip(rng.normal(0, 1, n) * pick(0.9, 1.0), -2.5, 2.5)
        cols[f"jet{j}phi"] = rng.uniform(-_PHI, _PHI, n)
        p_tag = pick(0.55 if j <= 2 else 0.25, 0.3 if j <= 2 else 0.2)
        cols[f"jet{j}b-tag"] = np.where(rng.random(n) < p_tag, _BTAG, 0.0)
    cols["m_jj"] = lognormal(0.03, 0.3, 0.0, 0.35)
    cols["m_jjj"] = lognormal(0.02, 0.25, 0.0, 0.3)
    cols["m_lv"] = rng.lognormal(0.0, 0.12, n) + 0.02 * pick(1, 0)
    cols["m_jlv"] = lognormal(0.0, 0.25, 0.0, 0.3)
    cols["m_bb"] = pick(np.abs(rng.normal(0.95, 0.15, n)), rng.lognormal(0.0, 0.45, n))
    cols["m_wbb"] = lognormal(-0.03, 0.18, 0.0, 0.3)
    cols["m_wwbb"] = lognormal(-0.05, 0.15, 0.0, 0.3)
    return {
        name: (values[:rows] if name == LABEL else values[:rows].astype(np.float32))
        for name, values in cols.items()
    }


def rows_frame(seed: int, start: int, rows: int) -> Any:
    """A pandas DataFrame of rows `start` to `start + rows` (`start` a multiple of BLOCK_ROWS)."""
    import numpy as np
    import pandas as pd

    first = start // BLOCK_ROWS
    blocks = [
        block(seed, b, min(BLOCK_ROWS, start + rows - b * BLOCK_ROWS))
        for b in range(first, -(-(start + rows) // BLOCK_ROWS))
    ]
    return pd.DataFrame({name: np.concatenate([b[name] for b in blocks]) for name in COLUMNS})


def rows_per_partition(partition_size_mb: float) -> int:
    """Rows in a partition of about `partition_size_mb`, a whole number of blocks."""
    target = _dataset.check_partition_size(partition_size_mb) // ROW_BYTES
    return max(BLOCK_ROWS, target // BLOCK_ROWS * BLOCK_ROWS)


def _write_partition(fs: Any, path: str, seed: int, start: int, rows: int) -> int:
    """Generate and write one part a row group at a time (memory: one row group)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    step = _dataset.ROW_GROUP_ROWS
    with fs.open(path, "wb") as fh:
        writer = None
        try:
            for lo in range(start, start + rows, step):
                n = min(step, start + rows - lo)
                table = pa.Table.from_pandas(rows_frame(seed, lo, n), preserve_index=False)
                if writer is None:
                    writer = pq.ParquetWriter(
                        fh, table.schema, compression="snappy", use_dictionary=[LABEL]
                    )
                writer.write_table(table, row_group_size=step)
        finally:
            if writer is not None:
                writer.close()
            _dataset.release_memory()
    return int(fs.size(path))


def generate_higgs(
    url: str,
    rows: int,
    seed: int = 0,
    partition_size_mb: float = 100,
    *,
    client: Any = None,
    backend: str | None = None,
) -> dict[str, Any]:
    """Write `rows` synthetic Higgs rows to `url` as Parquet parts, generated in parallel.

    Args:
        url: Output directory (a local path or an fsspec URL).
        rows: How many rows (any positive number).
        seed: The same seed and rows give the same data, however the work is spread.
        partition_size_mb: Target size of each part (in memory and on disk; random floats do
            not compress).
        client: A `distributed.Client` to generate on; None: threads in this process on one
            machine, else `headwater.compute.get_client()` (see `_backend.plan`).
        backend: "polars" (here, on threads), "pandas" or "cudf" (Dask tasks), or None to
            choose by where it runs.

    Returns:
        `{"rows", "partitions", "bytes", "schema", "engine"}` for the artifact's metadata
        (`engine`: "polars" when it ran here, else the Dask backend).

    Raises:
        InvalidArgumentError: `rows` or `partition_size_mb` is not positive.
        ResourceError: The cluster stalled on paused workers (see `headwater.compute`).
    """
    if not isinstance(rows, int) or rows <= 0:
        raise InvalidArgumentError(f"rows must be a positive integer, got {rows!r}")
    per_part = rows_per_partition(partition_size_mb)
    where = _backend.plan(client, backend, url)
    fs, path = _dataset.prepare_output(url)
    calls = [
        (fs, f"{path}/{_dataset.PART_NAME.format(i)}", seed, start, min(per_part, rows - start))
        for i, start in enumerate(range(0, rows, per_part))
    ]
    sizes = _backend.run_each(where, _write_partition, calls)
    return {
        "rows": rows,
        "partitions": len(calls),
        "bytes": int(sum(sizes)),
        "schema": schema_text(),
        "engine": where.backend,
    }


def schema_text() -> dict[str, str]:
    """Column -> type, as the artifact metadata records it."""
    return {name: ("int8" if name == LABEL else "float32") for name in COLUMNS}
