"""Polars and Dask (pandas) give the same answers on the same files, and the functions choose
Polars only where nothing names a cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from headwater.components.data import _backend
from headwater.components.data.higgs import generate_higgs
from headwater.components.data.ingestion import ingest
from headwater.components.data.preprocessing import SPLITS, preprocess
from headwater.components.data.summary import groupby_summary
from headwater.errors import InvalidArgumentError, UserError
from headwater.machine import detect_gpus

ENGINES = ("polars", "pandas")


@pytest.fixture(autouse=True)
def engine() -> Iterator[str]:
    """Here each test names its engines: pandas runs on Dask's synchronous scheduler."""
    with dask.config.set(scheduler="synchronous"):
        yield "pandas"


@pytest.fixture(scope="module")
def messy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five parts with what pandas and Polars treat apart: null and NaN floats, an integer
    label and an integer feature with nulls, a boolean, and the Higgs jet columns; the first
    part has no rows, and the third no labels."""
    src = tmp_path_factory.mktemp("messy")
    rng = np.random.default_rng(1)
    for i, n in enumerate((0, 4000, 3000, 4000, 4000)):
        x = rng.normal(size=n).astype("f4")
        x[rng.random(n) < 0.03] = np.nan
        unlabelled = 1.0 if i == 2 else 0.05
        columns = {
            "label": pa.array(
                np.where(rng.random(n) < unlabelled, None, rng.integers(0, 2, n)).tolist(),
                pa.int8(),
            ),
            "x": pa.array(x, mask=rng.random(n) < 0.05),
            "k": pa.array(
                np.where(rng.random(n) < 0.05, None, rng.integers(0, 9, n)).tolist(), pa.int64()
            ),
            "flag": pa.array(rng.random(n) < 0.5),
            **{
                f"jet{j}pt": pa.array(rng.gamma(2, 1, n).astype("f4"), mask=rng.random(n) < 0.02)
                for j in range(1, 5)
            },
            **{
                f"jet{j}b-tag": pa.array(np.where(rng.random(n) < 0.4, 2.17, 0).astype("f4"))
                for j in range(1, 5)
            },
        }
        pq.write_table(pa.table(columns), src / f"part-{i}.parquet")
    return src


def test_preprocess_writes_the_same_rows_statistics_and_transform(
    tmp_path: Path, messy: Path
) -> None:
    done = {
        engine: preprocess(
            str(messy),
            *(str(tmp_path / engine / s) for s in SPLITS),
            str(tmp_path / engine / "stats.md"),
            backend=engine,
        )
        for engine in ENGINES
    }
    assert {engine: done[engine].pop("engine") for engine in ENGINES} == {e: e for e in ENGINES}
    assert done["polars"] == done["pandas"]
    assert done["polars"]["dropped"] > 0
    assert done["polars"]["filled"] == ["jet1pt", "jet2pt", "jet3pt", "jet4pt", "k", "x"]
    for split in SPLITS:
        # One part per input file with rows, the same rows in the same order and types.
        assert len(list((tmp_path / "polars" / split).glob("part-*.parquet"))) == 4
        pd.testing.assert_frame_equal(
            pd.read_parquet(tmp_path / "polars" / split),
            pd.read_parquet(tmp_path / "pandas" / split),
        )
        transform = [(tmp_path / e / split / "_transform.json").read_text() for e in ENGINES]
        assert transform[0] == transform[1]
    assert (tmp_path / "polars" / "stats.md").read_text() == (
        tmp_path / "pandas" / "stats.md"
    ).read_text()


def test_groupby_summary_agrees_within_1e_9(tmp_path: Path, messy: Path, higgs_dir: Path) -> None:
    for src, column in ((messy, "x"), (higgs_dir, "m_bb")):
        tables = {
            engine: groupby_summary(
                str(src), str(tmp_path / f"{engine}.csv"), bin_column=column, backend=engine
            )
            for engine in ENGINES
        }
        assert {e: tables[e].attrs["engine"] for e in ENGINES} == {e: e for e in ENGINES}
        pd.testing.assert_frame_equal(tables["polars"], tables["pandas"], rtol=1e-9)


def test_generate_and_ingest_write_the_same_parts(tmp_path: Path) -> None:
    for engine in ENGINES:
        made = generate_higgs(
            str(tmp_path / engine), 20_000, seed=5, partition_size_mb=1, backend=engine
        )
        assert made["partitions"] == 3
        ingest(
            str(tmp_path / engine),
            str(tmp_path / f"{engine}-cut"),
            partition_size_mb=0.4,
            backend=engine,
        )
        frame = pd.read_parquet(tmp_path / engine)
        frame.to_csv(tmp_path / f"{engine}.csv", index=False)
        ingest(str(tmp_path / f"{engine}.csv"), str(tmp_path / f"{engine}-csv"), backend=engine)
    for suffix in ("", "-cut", "-csv"):
        polars, pandas = (sorted((tmp_path / f"{e}{suffix}").glob("*.parquet")) for e in ENGINES)
        if suffix != "-csv":  # CSV: streamed per file here, cut in byte ranges by Dask
            assert [p.name for p in polars] == [p.name for p in pandas]
        pd.testing.assert_frame_equal(
            pd.read_parquet(tmp_path / f"polars{suffix}"),
            pd.read_parquet(tmp_path / f"pandas{suffix}"),
        )


def test_with_no_cluster_named_the_work_runs_on_polars_here() -> None:
    if _backend._have("cudf") and detect_gpus():
        pytest.skip("a GPU with cuDF here: the functions choose cuDF")
    # dask.config names a scheduler (this module's fixture): Dask computes, here.
    assert _backend.plan(None, None, "/data/in") == _backend.Plan("pandas")
    with dask.config.set(scheduler=None):  # nothing names a cluster
        where = _backend.plan(None, None, "/data/in", "file:///data/out")
    assert where == _backend.Plan("polars") and where.local


def test_a_run_on_a_dask_cluster_keeps_dask(monkeypatch: pytest.MonkeyPatch) -> None:
    # Under --executor dask the engine hands each task its scheduler: the functions go there
    # (end to end: test_data_components' pipeline on the run's cluster records "pandas").
    with dask.config.set(scheduler=None):
        assert _backend._one_machine() or detect_gpus()
        monkeypatch.setenv("HEADWATER_DASK_SCHEDULER", "tcp://127.0.0.1:8786")
        assert not _backend._one_machine()
    assert _backend.plan(None, "polars", "/data/in").local  # backend= still forces one


def test_backend_polars_refuses_an_object_store_in_one_line() -> None:
    with pytest.raises(InvalidArgumentError, match=r"reads and writes local paths only, not 's3:"):
        _backend.plan(None, "polars", "/data/in", "s3://bucket/out")
    with pytest.raises(InvalidArgumentError, match=r"unknown backend 'duckdb' \(known: auto, "):
        _backend.plan(None, "duckdb", "/data/in")


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        ({"label": [0, 1], "x": ["a", "b"]}, r"bin column 'x' of .* holds (large_)?string, not"),
        ({"label": ["s", "b"], "x": [1.0, 2.0]}, r"label column 'label' of .* holds (large_)?str"),
    ],
    ids=["bin", "label"],
)
def test_a_column_that_is_not_numeric_is_named(
    tmp_path: Path, frame: dict[str, list[object]], message: str
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    pd.DataFrame(frame).to_parquet(src / "part-0.parquet")
    for engine in ENGINES:
        with pytest.raises(UserError, match=message):
            groupby_summary(str(src), str(tmp_path / "t.csv"), bin_column="x", backend=engine)


def test_the_memory_limit_reaches_polars_which_spills_past_it(tmp_path: Path) -> None:
    """HEADWATER_DATA_MEMORY_LIMIT becomes Polars' out-of-core budget when Headwater loads it:
    a sort of 100 MB under a 64 MB limit spills to HEADWATER_DATA_SPILL_DIR; without the
    limit the same sort stays in memory."""
    code = """
        import json, os, threading
        from headwater.components.data import _polars
        pl = _polars.pl()
        spill = os.environ["HEADWATER_DATA_SPILL_DIR"]
        seen, stop = [], threading.Event()
        def watch():
            while not stop.wait(0.005):
                if any(files for _, _, files in os.walk(spill)):
                    seen.append(True)
                    return
        threading.Thread(target=watch, daemon=True).start()
        rows = pl.int_range(0, 12_500_000).shuffle(seed=1).alias("x")
        pl.LazyFrame({"x": [0]}).select(rows).sort("x").sink_parquet("sorted.parquet")
        stop.set()
        print(json.dumps({"budget": os.environ.get(_polars.POLARS_MEMORY_BUDGET_ENV),
                          "spilled": bool(seen)}))
    """
    found = []
    for limit in ("64MB", None):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HEADWATER_", "POLARS_"))}
        env |= {"POLARS_MAX_THREADS": "2", "HEADWATER_DATA_SPILL_DIR": str(tmp_path / "spill")}
        if limit:
            env["HEADWATER_DATA_MEMORY_LIMIT"] = limit
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        found.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert found == [{"budget": "61", "spilled": True}, {"budget": None, "spilled": False}]


def test_a_bad_memory_limit_fails_the_step_in_one_line(tmp_path: Path, higgs_dir: Path) -> None:
    code = f"""
        from headwater.components.data.summary import groupby_summary
        groupby_summary({str(higgs_dir)!r}, "t.csv")
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_")}
    env["HEADWATER_DATA_MEMORY_LIMIT"] = "lots"
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        "headwater.errors.ConfigError: HEADWATER_DATA_MEMORY_LIMIT='lots' is not a size of 64MB "
        'or more ("1GB", "500MB"): fix or unset it'
    )
