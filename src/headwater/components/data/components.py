"""The data functions as KFP components: thin wrappers that compile to portable IR.

Each body imports and calls the plain function, so the same IR runs under `headwater run`
(local or `--executor dask`) and on Kubeflow or Vertex AI Pipelines, given an image with
Headwater installed: set `HEADWATER_COMPONENT_IMAGE` when compiling (default
`python:3.11-slim`, which installs `headwater[dask,data]` from the package index at start).

`backend` on each: "auto" (Polars in the task's process with no cluster given, Dask on the
run's cluster under `--executor dask`, cuDF on GPUs), or "polars", "pandas", "cudf" to force
one.
"""

# No `from __future__ import annotations`: KFP reads the parameter annotations as objects.
from kfp.dsl import Dataset, Input, Markdown, Output

from headwater.components._component import component

#: What a pod without Headwater installs first (Headwater checks it is installed instead).
PACKAGES = ["headwater[dask,data]"]


@component(packages_to_install=PACKAGES)
def generate_higgs(
    data: Output[Dataset],
    rows: int,
    seed: int = 0,
    partition_size_mb: int = 100,
    backend: str = "auto",
) -> None:
    """Synthetic Higgs data (label + 28 features) as Parquet parts, generated in parallel."""
    from headwater.components.data.higgs import generate_higgs as generate

    data.metadata.update(
        generate(data.path, rows, seed=seed, partition_size_mb=partition_size_mb, backend=backend)
    )


@component(packages_to_install=PACKAGES)
def ingest(
    source: str,
    data: Output[Dataset],
    partition_size_mb: int = 100,
    format: str = "auto",
    column_names: str = "",
    backend: str = "auto",
) -> None:
    """CSV or Parquet from a path or URL (s3://, gs://) to Parquet parts of a target size.

    `column_names`: comma-separated names for a CSV without a header row.
    """
    from headwater.components.data.ingestion import ingest as run

    names = [n.strip() for n in column_names.split(",") if n.strip()] or None
    data.metadata.update(
        run(
            source,
            data.path,
            partition_size_mb=partition_size_mb,
            format=format,
            column_names=names,
            backend=backend,
        )
    )


@component(packages_to_install=PACKAGES)
def preprocess(
    data: Input[Dataset],
    train: Output[Dataset],
    validation: Output[Dataset],
    test: Output[Dataset],
    stats: Output[Markdown],
    label: str = "label",
    seed: int = 0,
    train_fraction: float = 0.8,
    validation_fraction: float = 0.1,
    backend: str = "auto",
) -> None:
    """Nulls, derived features, a deterministic train/validation/test split, column statistics.

    Each split's directory also gets `_transform.json`: what was done to a row, which
    `train_xgboost` keeps with the model so that the served model takes raw rows.
    """
    from headwater.components.data.preprocessing import preprocess as run

    fractions = (train_fraction, validation_fraction, 1 - train_fraction - validation_fraction)
    done = run(
        data.path,
        train.path,
        validation.path,
        test.path,
        stats.path,
        label=label,
        fractions=fractions,
        seed=seed,
        backend=backend,
    )
    for split, artifact in (("train", train), ("validation", validation), ("test", test)):
        artifact.metadata.update(
            {"rows": done["rows"][split], "columns": done["columns"], "engine": done["engine"]}
        )


@component(packages_to_install=PACKAGES)
def groupby_summary(
    data: Input[Dataset],
    table: Output[Dataset],
    report: Output[Markdown],
    label: str = "label",
    bin_column: str = "m_bb",
    bins: int = 10,
    backend: str = "auto",
) -> None:
    """Feature means by label and by a binned feature: a CSV table and a Markdown report."""
    from headwater.components.data.summary import groupby_summary as run

    result = run(
        data.path,
        table.path,
        report.path,
        label=label,
        bin_column=bin_column,
        bins=bins,
        backend=backend,
    )
    table.metadata.update({"rows": len(result), "format": "csv", "engine": result.attrs["engine"]})
