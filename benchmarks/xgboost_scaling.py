#!/usr/bin/env python
"""XGBoost scaling: single-process ``xgb.train`` against our ``train_xgboost`` on 2 Dask workers.

In one run, on the same data, parameters and rounds:

* setup (untimed): ``--rows`` synthetic Higgs rows (``generate_higgs``, 100 MB parts) split by
  ``preprocess`` into train/validation/test (80/10/10, 30 features);
* ``xgb.train`` (one process, ``nthread`` = ``--workers`` x ``--threads``): read train and
  validation with pandas, ``QuantileDMatrix`` for both (validation with ``ref=``), train
  ``--rounds`` rounds evaluating both splits each round;
* ``train_xgboost`` (``headwater.components.xgboost.training``) on a LocalCluster of
  ``--workers`` worker processes x ``--threads`` threads: footers, parameter check, reading the
  splits onto the workers, ``DaskQuantileDMatrix``, ``xgboost.dask.train``, the same rounds
  (no early stopping on either side);
* then the test AUC of both models (scikit-learn's ``roc_auc_score``, untimed).

Both sides import XGBoost before they are timed (the workers too; their cold import is shown
apart). Runs alternate (single, dask, single, dask, ...) ``--repeat`` times so that load from
other processes falls on both; the table shows each side's fastest run, the report every run
and the load average around each. When an NVIDIA GPU, cuDF and dask-cuda are present, a GPU row
is added: ``xgb.train(device="cuda")`` against ``train_xgboost`` on a LocalCUDACluster.

Targets (issue 9): Dask time <= 1.3x single-process time, test AUC within 0.005.

Usage::

    python benchmarks/xgboost_scaling.py [--rows 2000000] [--rounds 50] [--repeat 2]
        [--workers 2] [--threads 1] [--gpu-rows 10000000] [--dir DIR]
        [--markdown] [--json-out FILE] [--strict]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    add_report_options,
    base_machine_info,
    finish,
    fmt_s,
    heading,
    info_section,
    load_average,
    progress,
    table,
)

TARGET_RATIO = 1.3
TARGET_AUC = 0.005


def make_data(root: Path, rows: int, workers: int) -> dict[str, Path]:
    """Generate and split `rows` Higgs rows under `root` (on a temporary cluster)."""
    from headwater.components.data.higgs import generate_higgs
    from headwater.components.data.preprocessing import preprocess
    from headwater.compute import cluster

    paths = {s: root / s for s in ("raw", "train", "validation", "test")}
    with cluster(n_workers=workers, threads_per_worker=1) as client:
        generate_higgs(str(paths["raw"]), rows, seed=0, client=client)
        preprocess(
            str(paths["raw"]),
            str(paths["train"]),
            str(paths["validation"]),
            str(paths["test"]),
            str(root / "stats.md"),
            client=client,
        )
    shutil.rmtree(paths["raw"])
    return paths


def single_process(
    paths: dict[str, Path], params: dict[str, Any], rounds: int, nthread: int, device: str
) -> tuple[float, Any, int]:
    """(seconds, booster, train rows) for read + QuantileDMatrix + xgb.train in this process."""
    import pandas as pd
    import xgboost as xgb

    start = time.perf_counter()
    train = pd.read_parquet(paths["train"])
    valid = pd.read_parquet(paths["validation"])
    if device == "cuda":
        import cudf

        train, valid = cudf.from_pandas(train), cudf.from_pandas(valid)
    dtrain = xgb.QuantileDMatrix(
        train.drop(columns="label"), train["label"], max_bin=params.get("max_bin")
    )
    dvalid = xgb.QuantileDMatrix(valid.drop(columns="label"), valid["label"], ref=dtrain)
    booster = xgb.train(
        {**params, "nthread": nthread, "device": device},
        dtrain,
        rounds,
        evals=[(dtrain, "train"), (dvalid, "validation")],
        verbose_eval=False,
    )
    return time.perf_counter() - start, booster, len(train)


def on_dask(
    client: Any, paths: dict[str, Path], params: dict[str, Any], rounds: int
) -> tuple[float, Any, int]:
    """(seconds, booster, workers used) for our train_xgboost on `client`."""
    from headwater.components.xgboost.training import train_xgboost

    start = time.perf_counter()
    result = train_xgboost(
        str(paths["train"]),
        str(paths["validation"]),
        params=params,
        rounds=rounds,
        early_stopping_rounds=0,
        client=client,
    )
    return time.perf_counter() - start, result.booster, result.workers


def test_auc(booster: Any, paths: dict[str, Path]) -> float:
    import pandas as pd
    from sklearn.metrics import roc_auc_score

    test = pd.read_parquet(paths["test"])
    booster.set_param({"device": "cpu"})
    return float(roc_auc_score(test["label"], booster.inplace_predict(test.drop(columns="label"))))


def warm_workers(client: Any) -> float:
    """Import XGBoost on every worker; the slowest worker's seconds."""

    def load() -> float:
        t = time.perf_counter()
        import xgboost.dask  # noqa: F401

        return time.perf_counter() - t

    return max(client.run(load).values())


def compare(
    label: str,
    paths: dict[str, Path],
    args: argparse.Namespace,
    gpu: bool,
) -> dict[str, Any]:
    """Alternate single-process and Dask runs; the fastest of each, and every run."""
    from headwater.components.xgboost import hyperparameters
    from headwater.compute import cluster

    params = hyperparameters.merged({})
    nthread = args.workers * args.threads
    device = "cuda" if gpu else "cpu"
    runs: list[dict[str, Any]] = []
    started = time.perf_counter()
    settings: dict[str, Any] = (
        {"gpu": True}
        if gpu
        else {"n_workers": args.workers, "threads_per_worker": args.threads, "gpu": False}
    )
    with cluster(**settings) as client:
        cluster_s = time.perf_counter() - started
        cold_import_s = warm_workers(client)
        n_workers = len(client.scheduler_info(n_workers=-1)["workers"])
        for i in range(args.repeat):
            for side in ("single", "dask"):
                before = load_average()
                progress(f"{label}: {side} run {i + 1}/{args.repeat} (load {before})")
                if side == "single":
                    seconds, booster, rows = single_process(
                        paths, params, args.rounds, nthread, device
                    )
                    used = 1
                else:
                    seconds, booster, used = on_dask(client, paths, params, args.rounds)
                auc = test_auc(booster, paths)
                runs.append(
                    {
                        "side": side,
                        "seconds": seconds,
                        "auc": auc,
                        "workers": used,
                        "rounds": booster.num_boosted_rounds(),
                        "load_before": before,
                        "load_after": load_average(),
                    }
                )
                progress(f"  {seconds:.1f} s, test AUC {auc:.5f}")
    best = {
        side: min((r for r in runs if r["side"] == side), key=lambda r: r["seconds"])
        for side in ("single", "dask")
    }
    return {
        "label": label,
        "device": device,
        "train_rows": rows,
        "rounds": args.rounds,
        "nthread_single": nthread,
        "dask_workers": n_workers,
        "cluster_start_s": cluster_s,
        "worker_cold_import_s": cold_import_s,
        "runs": runs,
        "single": best["single"],
        "dask": best["dask"],
        "ratio": best["dask"]["seconds"] / best["single"]["seconds"],
        "auc_diff": best["dask"]["auc"] - best["single"]["auc"],
    }


def gpu_available() -> bool:
    from headwater.machine import detect_gpus

    if not detect_gpus():
        return False
    import importlib.util

    return all(importlib.util.find_spec(m) for m in ("cudf", "dask_cuda"))


def report(results: list[dict[str, Any]], args: argparse.Namespace, machine: dict[str, str]) -> str:
    md = args.markdown
    headers = [
        "device",
        "train rows x rounds",
        "single-process s",
        "dask s (workers)",
        "ratio",
        "single AUC",
        "dask AUC",
        "AUC diff",
        "single rows*rounds/s",
        "dask rows*rounds/s",
    ]
    rows = []
    for r in results:
        work = r["train_rows"] * r["rounds"]
        single, dask = r["single"], r["dask"]
        rows.append(
            [
                r["device"],
                f"{r['train_rows']:,} x {r['rounds']}",
                fmt_s(single["seconds"]),
                f"{fmt_s(dask['seconds'])} ({dask['workers']})",
                f"{r['ratio']:.2f}x",
                f"{single['auc']:.5f}",
                f"{dask['auc']:.5f}",
                f"{r['auc_diff']:+.5f}",
                f"{work / single['seconds'] / 1e6:.2f}M",
                f"{work / dask['seconds'] / 1e6:.2f}M",
            ]
        )
    runs = []
    for r in results:
        for run in r["runs"]:
            runs.append(
                [
                    r["device"],
                    run["side"],
                    fmt_s(run["seconds"]),
                    f"{run['auc']:.5f}",
                    str(run["workers"]),
                    run["load_before"],
                    run["load_after"],
                ]
            )
    extra = {
        f"{r['device']} cluster": (
            f"{r['dask_workers']} workers, started in {r['cluster_start_s']:.1f} s; cold "
            f"`import xgboost.dask` on a worker {r['worker_cold_import_s']:.1f} s (untimed)"
        )
        for r in results
    }
    parts = [
        *info_section("Machine", {**machine, **extra}, md),
        f"{heading(md)}Fastest run of each side",
        table(headers, rows, md),
        f"{heading(md)}Every run (load average 1/5/15 min before and after)",
        table(
            ["device", "side", "s", "test AUC", "workers", "load before", "load after"], runs, md
        ),
    ]
    verdicts = [
        f"{r['device']}: ratio {r['ratio']:.2f}x (target <= {TARGET_RATIO}x) "
        f"{'ok' if r['ratio'] <= TARGET_RATIO else 'MISSED'}; AUC diff {r['auc_diff']:+.5f} "
        f"(target within {TARGET_AUC}) {'ok' if abs(r['auc_diff']) <= TARGET_AUC else 'MISSED'}"
        for r in results
    ]
    parts.append(f"{heading(md)}Targets\n" + "\n".join(verdicts))
    return "\n\n".join(parts)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rows", type=int, default=2_000_000, help="Higgs rows before the split")
    p.add_argument("--rounds", type=int, default=50)
    p.add_argument("--repeat", type=int, default=2, help="runs of each side, alternating")
    p.add_argument("--workers", type=int, default=2, help="Dask worker processes (CPU)")
    p.add_argument("--threads", type=int, default=1, help="threads per Dask worker (CPU)")
    p.add_argument("--gpu-rows", type=int, default=10_000_000, help="rows for the GPU row")
    p.add_argument("--no-gpu", action="store_true", help="skip the GPU row even with a GPU")
    p.add_argument("--dir", type=Path, help="where the data go (default: a temporary directory)")
    add_report_options(p, "exit 2 when a target is missed")
    args = p.parse_args()
    os.environ.pop("HEADWATER_DASK_SCHEDULER", None)  # always a cluster of our own

    machine = base_machine_info()
    import xgboost

    machine["xgboost"] = xgboost.__version__
    machine["load average at start"] = load_average()
    root = Path(args.dir or tempfile.mkdtemp(prefix="hw-xgb-bench-"))
    results = []
    try:
        progress(f"generating {args.rows:,} Higgs rows under {root} ...")
        paths = make_data(root / "cpu", args.rows, args.workers)
        results.append(compare("cpu", paths, args, gpu=False))
        if gpu_available() and not args.no_gpu:
            progress(f"generating {args.gpu_rows:,} Higgs rows for the GPU row ...")
            gpu_paths = make_data(root / "gpu", args.gpu_rows, args.workers)
            results.append(compare("gpu", gpu_paths, args, gpu=True))
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    machine["load average at end"] = load_average()
    passed = all(r["ratio"] <= TARGET_RATIO and abs(r["auc_diff"]) <= TARGET_AUC for r in results)
    return finish(report(results, args, machine), passed, args, {"results": results})


if __name__ == "__main__":
    raise SystemExit(main())
