#!/usr/bin/env python
"""`headwater server` benchmark: submission latency, many clients, and list_runs at scale.

Three measurements against a real `headwater server` subprocess, each in a fresh
HEADWATER_HOME (SQLite), driven by the real `kfp.Client`:

* latency: from `create_run` returning to the first task starting (the task's `started_at` in
  the store), against `headwater run` of the same compiled pipeline, from process start to its
  first task starting; medians of `--repeat`;
* throughput: `--runs` (200) runs submitted by `--clients` (8) concurrent clients; every one
  must end SUCCEEDED, with as many distinct Headwater runs as submissions (none lost, none
  duplicated); wall time from the first submission to the last completion;
* listing: `--list-rows` (10,000) runs in the store (inserted directly), then `list_runs`
  (page of 10, newest first; and with a display_name filter) `--list-calls` times; p50 / p95
  (target: p95 under 100 ms).

Usage::

    python benchmarks/server.py [--repeat 3] [--runs 200] [--clients 8] [--max-concurrent 8]
        [--list-rows 10000] [--list-calls 200] [--json-out FILE]
"""

# No `from __future__ import annotations`: kfp reads the components' annotations as types.

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

warnings.simplefilter("ignore", FutureWarning)

from kfp import compiler, dsl  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "integration"))


@dsl.component(base_image="python:3.11")
def add(a: int, b: int) -> int:
    return a + b


@dsl.pipeline(name="bench-adder")
def adder(x: int = 1) -> int:
    return add(a=x, b=1).output


def first_task_start(home: Path, run_id: str) -> float | None:
    db = sqlite3.connect(home / "metadata.db")
    try:
        row = db.execute(
            "SELECT MIN(started_at) FROM executions WHERE run_id = ?", (run_id,)
        ).fetchone()
    finally:
        db.close()
    return None if row is None else row[0]


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency(repeat: int, root: Path) -> dict[str, Any]:
    from server_harness import kfp_client, running_server, server_env

    home = root / "latency"
    package = root / "adder.yaml"
    compiler.Compiler().compile(adder, str(package))
    server_s: list[float] = []
    with running_server(home, "--max-concurrent-runs", "4") as base:
        client = kfp_client(base)
        client.create_run_from_pipeline_func(adder).wait_for_run_completion(60)  # warm-up
        for i in range(repeat):
            # New arguments each time: a cached task would not start at all.
            result = client.create_run_from_pipeline_func(adder, arguments={"x": 100 + i})
            submitted = time.time()
            client.wait_for_run_completion(result.run_id, timeout=120, sleep_duration=0.1)
            started = first_task_start(home, result.run_id)
            assert started is not None
            server_s.append(started - submitted)
    cli_s: list[float] = []
    cli_home = root / "cli"
    env = server_env(cli_home)
    for i in range(repeat + 1):
        begun = time.time()
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "headwater",
                "run",
                str(package),
                "--json",
                "--param",
                f"x={200 + i}",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        run_id = json.loads(out.stdout.strip().splitlines()[-1])["run_id"]
        started = first_task_start(cli_home, run_id)
        assert started is not None
        cli_s.append(started - begun)
    cli_s = cli_s[1:]  # the first made the store
    return {
        "server_create_run_to_first_task_s": statistics.median(server_s),
        "cli_process_start_to_first_task_s": statistics.median(cli_s),
        "samples": {"server": server_s, "cli": cli_s},
    }


def throughput(runs: int, clients: int, concurrent: int, root: Path) -> dict[str, Any]:
    from server_harness import kfp_client, running_server

    home = root / "throughput"
    ids: list[str] = []
    errors: list[str] = []
    lock = threading.Lock()
    with running_server(home, "--max-concurrent-runs", str(concurrent)) as base:
        kfp_client(base).create_experiment("bench")
        per_client = [runs // clients + (1 if i < runs % clients else 0) for i in range(clients)]

        def submit(n: int) -> None:
            client = kfp_client(base)
            for i in range(n):
                try:
                    rid = client.create_run_from_pipeline_func(
                        adder, arguments={"x": i}, experiment_name="bench"
                    ).run_id
                except Exception as exc:
                    with lock:
                        errors.append(repr(exc))
                    continue
                with lock:
                    ids.append(rid)

        began = time.time()
        threads = [threading.Thread(target=submit, args=(n,)) for n in per_client]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        submitted = time.time() - began
        client = kfp_client(base)
        states = {
            rid: client.wait_for_run_completion(rid, timeout=1800, sleep_duration=0.5).state
            for rid in ids
        }
        wall = time.time() - began
    db = sqlite3.connect(home / "metadata.db")
    try:
        (recorded,) = db.execute("SELECT COUNT(*) FROM runs").fetchone()
    finally:
        db.close()
    return {
        "submitted": len(ids),
        "distinct": len(set(ids)),
        "errors": errors,
        "succeeded": sum(s == "SUCCEEDED" for s in states.values()),
        "headwater_runs": recorded,
        "submit_s": submitted,
        "wall_s": wall,
        "runs_per_s": len(ids) / wall,
    }


def listing(rows: int, calls: int, root: Path) -> dict[str, Any]:
    from server_harness import kfp_client, running_server

    from headwater.metadata.schema import KFP_RUNS
    from headwater.server.store import KfpStore

    home = root / "listing"
    home.mkdir(parents=True)
    store = KfpStore(f"sqlite:///{home / 'metadata.db'}")
    exp = store.create_experiment("big", "", "")
    now = time.time()
    spec = adder.pipeline_spec
    from google.protobuf import json_format

    doc = json_format.MessageToDict(spec)
    batch = [
        {
            "run_id": str(uuid.uuid4()),
            "experiment_id": exp["experiment_id"],
            "namespace": "",
            "display_name": f"run-{i:05d}",
            "description": "",
            "pipeline_spec": doc,
            "pipeline_id": None,
            "pipeline_version_id": None,
            "runtime_config": {"parameters": {"x": i}},
            "storage_state": "AVAILABLE",
            "state": "SUCCEEDED",
            "error": None,
            "created_at": now - rows + i,
            "scheduled_at": now - rows + i,
            "finished_at": now - rows + i + 1,
            "worker_host": None,
            "worker_pid": None,
            "starts": 1,
            "recurring_run_id": None,
        }
        for i in range(rows)
    ]
    store.db.transaction(lambda conn: conn.execute(KFP_RUNS.insert(), batch), write=True)
    store.db.dispose()
    results: dict[str, Any] = {}
    with running_server(home) as base:
        client = kfp_client(base)
        wanted = json.dumps(
            {"predicates": [{"operation": 9, "key": "display_name", "stringValue": "run-0999"}]}
        )
        for name, kwargs in (
            ("newest_10", {"page_size": 10, "sort_by": "created_at desc"}),
            ("filtered", {"page_size": 10, "filter": wanted}),
            ("page_100_deep", {"page_size": 100, "page_token": str(rows // 2)}),
        ):
            client.list_runs(**kwargs)  # warm
            times = []
            for _ in range(calls):
                t0 = time.perf_counter()
                page = client.list_runs(**kwargs)
                times.append((time.perf_counter() - t0) * 1000)
            assert page.total_size is not None
            results[name] = {
                "p50_ms": p(times, 0.5),
                "p95_ms": p(times, 0.95),
                "total": page.total_size,
            }
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--max-concurrent", type=int, default=8)
    ap.add_argument("--list-rows", type=int, default=10_000)
    ap.add_argument("--list-calls", type=int, default=200)
    ap.add_argument("--skip", action="append", default=[], help="latency, throughput, listing")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    report: dict[str, Any] = {"cpus": os.cpu_count(), "load": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if "latency" not in args.skip:
            report["latency"] = latency(args.repeat, root)
            print(json.dumps({"latency": report["latency"]}, indent=1), flush=True)
        if "listing" not in args.skip:
            report["listing"] = listing(args.list_rows, args.list_calls, root)
            print(json.dumps({"listing": report["listing"]}, indent=1), flush=True)
        if "throughput" not in args.skip:
            report["throughput"] = throughput(args.runs, args.clients, args.max_concurrent, root)
            print(json.dumps({"throughput": report["throughput"]}, indent=1), flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=1))
    t = report.get("throughput")
    ok = t is None or (
        t["errors"] == [] and t["distinct"] == t["submitted"] == t["succeeded"] == args.runs
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
