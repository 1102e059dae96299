#!/usr/bin/env python
"""`headwater server` benchmark: submission latency, many clients, and list_runs at scale.

Three measurements against a real `headwater server` subprocess, each in a fresh
HEADWATER_HOME (SQLite), driven by the real `kfp.Client`:

* latency: from `create_run` returning to the first task starting (the task's `started_at` in
  the store), against `headwater run` of the same compiled pipeline, from process start to its
  first task starting; medians of `--repeat` (target, issue 28: under 150 ms);
* throughput: `--runs` (200) runs of a 1-task pipeline submitted by `--clients` (8) concurrent
  clients; every one must end SUCCEEDED, with as many distinct Headwater runs as submissions
  (none lost, none duplicated); runs per second from the first submission to the last
  completion (target, issue 28: 3x the baseline's);
* listing: `--list-rows` (10,000) runs in the store (inserted directly, in ten namespaces),
  then `list_runs` (page of 10, newest first; and with a display_name filter) `--list-calls`
  times; p50 / p95 (target: p95 under 100 ms);
* principals (issue 31): the same page of 10 on the same store, side by side: a server without
  principals (the baseline), its `--token`, and a multi-user server (20 personal tokens in the
  store) asked by an editor of one namespace and by an admin; the p95 of each and its ratio to
  the baseline's is the cost of resolving a principal (one indexed read per request).

With `--baseline-src DIR` (the `src` of a worktree of an earlier commit, e.g.
`git worktree add /tmp/base 2330f1c`), latency and throughput are measured for that server
too, in the same run, rounds alternating, and printed side by side with ratios.

Usage::

    python benchmarks/server.py [--repeat 10] [--runs 200] [--clients 8] [--max-concurrent 8]
        [--list-rows 10000] [--list-calls 200] [--baseline-src DIR] [--rounds 2]
        [--json-out FILE]
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


def _env(src: str | None) -> dict[str, str] | None:
    """The server's environment for the code at `src` (None: this checkout's)."""
    return None if src is None else {"PYTHONPATH": src}


def server_latency(repeat: int, root: Path, src: str | None) -> list[float]:
    """Seconds from `create_run` returning to the run's first task starting, `repeat` times."""
    from server_harness import kfp_client, running_server

    home = root / "latency"
    samples: list[float] = []
    with running_server(home, "--max-concurrent-runs", "4", env=_env(src)) as base:
        client = kfp_client(base)
        client.create_run_from_pipeline_func(adder).wait_for_run_completion(60)  # warm-up
        for i in range(repeat):
            # New arguments each time: a cached task would not start at all.
            result = client.create_run_from_pipeline_func(adder, arguments={"x": 100 + i})
            submitted = time.time()
            client.wait_for_run_completion(result.run_id, timeout=120, sleep_duration=0.05)
            started = first_task_start(home, result.run_id)
            assert started is not None
            samples.append(started - submitted)
            time.sleep(0.3)  # a quiet queue: each submission finds idle workers
    return samples


def cli_latency(repeat: int, root: Path) -> list[float]:
    """Seconds from `headwater run`'s process start to its first task starting."""
    from server_harness import server_env

    package = root / "adder.yaml"
    compiler.Compiler().compile(adder, str(package))
    samples: list[float] = []
    cli_home = root / "cli"
    env = server_env(cli_home)
    for i in range(repeat + 1):
        begun = time.time()
        out = subprocess.run(
            [sys.executable, "-m", "headwater", "run", str(package), "--json",
             "--param", f"x={200 + i}"],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        run_id = json.loads(out.stdout.strip().splitlines()[-1])["run_id"]
        started = first_task_start(cli_home, run_id)
        assert started is not None
        samples.append(started - begun)
    return samples[1:]  # the first made the store


def throughput(
    runs: int, clients: int, concurrent: int, root: Path, src: str | None
) -> dict[str, Any]:
    from server_harness import kfp_client, running_server

    home = root / "throughput"
    ids: list[str] = []
    errors: list[str] = []
    lock = threading.Lock()
    with running_server(home, "--max-concurrent-runs", str(concurrent), env=_env(src)) as base:
        kfp_client(base).create_experiment("bench")
        per_client = [runs // clients + (1 if i < runs % clients else 0) for i in range(clients)]

        def submit(n: int) -> None:
            client = kfp_client(base)
            for i in range(n):
                try:
                    rid = client.create_run_from_pipeline_func(
                        adder, arguments={"x": i + 1000 * n}, experiment_name="bench"
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
        (recorded,) = db.execute("SELECT COUNT(DISTINCT run_id) FROM executions").fetchone()
    finally:
        db.close()
    return {
        "submitted": len(ids),
        "distinct": len(set(ids)),
        "errors": errors,
        "succeeded": sum(s == "SUCCEEDED" for s in states.values()),
        "runs_with_tasks": recorded,
        "submit_s": submitted,
        "wall_s": wall,
        "runs_per_s": len(ids) / wall,
    }


def listing(rows: int, calls: int, root: Path) -> dict[str, Any]:
    from google.protobuf import json_format
    from server_harness import kfp_client, running_server

    from headwater.metadata.base import ExperimentRecord, RunRecord
    from headwater.metadata.schema import RUNS
    from headwater.metadata.sql import SqlMetadataStore

    home = root / "listing"
    home.mkdir(parents=True)
    store = SqlMetadataStore(f"sqlite:///{home / 'metadata.db'}")
    exp = store.create_experiment(ExperimentRecord(str(uuid.uuid4()), "big", created_at=1.0))
    now = time.time()
    doc = json_format.MessageToDict(adder.pipeline_spec)
    first = RunRecord(str(uuid.uuid4()), "bench-adder", "", "SUCCEEDED")
    store.create_run(first, ir=doc)  # records the version every run below points to
    made = store.get_run(first.run_id)
    assert made is not None
    batch = [
        {
            "run_id": str(uuid.uuid4()),
            "pipeline_version_id": made.pipeline_version_id,
            "state": "SUCCEEDED",
            "parameters": {"x": i},
            "pipeline_root": str(home / "artifacts"),
            "created_at": now - rows + i,
            "finished_at": now - rows + i + 1,
            "outputs": {},
            "error": None,
            "engine_host": "",
            "engine_pid": 0,
            "engine_started": "",
            "display_name": f"run-{i:05d}",
            "description": "",
            "experiment_id": exp.experiment_id,
            "namespace": f"team-{i % 10}",
            "storage_state": "AVAILABLE",
            "recurring_run_id": None,
            "scheduled_at": now - rows + i,
            "starts": 1,
        }
        for i in range(rows - 1)
    ]
    store._db.transaction(lambda conn: conn.execute(RUNS.insert(), batch), write=True)
    store.close()
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
    results["principals"] = principals(home, calls)
    return results


def principals(home: Path, calls: int) -> dict[str, Any]:
    """list_runs (page of 10, newest first) as each kind of principal, on the listing store."""
    from server_harness import kfp_client, running_server

    from headwater.access import hash_token, new_token
    from headwater.metadata.base import PrincipalRecord
    from headwater.metadata.sql import SqlMetadataStore

    def measure(base: str, **client: Any) -> dict[str, Any]:
        kfp = kfp_client(base, **client)
        namespace = client.get("namespace")
        kfp.list_runs(page_size=10, namespace=namespace)  # warm
        times = []
        for _ in range(calls):
            t0 = time.perf_counter()
            page = kfp.list_runs(page_size=10, sort_by="created_at desc", namespace=namespace)
            times.append((time.perf_counter() - t0) * 1000)
        return {"p50_ms": p(times, 0.5), "p95_ms": p(times, 0.95), "total": page.total_size}

    found: dict[str, Any] = {}
    with running_server(home) as base:
        found["no principals (baseline)"] = measure(base)
    server_token = new_token()
    with running_server(home, env={"HEADWATER_TOKEN": server_token}) as base:
        found["--token"] = measure(base, existing_token=server_token)
    store = SqlMetadataStore(f"sqlite:///{home / 'metadata.db'}")
    tokens = {}
    for i in range(20):
        tokens[i] = new_token()
        role, held = ("admin", ()) if i == 0 else ("editor", (f"team-{i % 10}",))
        store.add_principal(
            PrincipalRecord("token", f"user-{i}", role, held, hash_token(tokens[i]), time.time())
        )
    store.close()
    with running_server(home) as base:
        found["editor of team-3"] = measure(base, existing_token=tokens[3], namespace="team-3")
        found["admin, every namespace"] = measure(base, existing_token=tokens[0])
    baseline = found["no principals (baseline)"]["p95_ms"]
    for row in found.values():
        row["p95_vs_baseline"] = round(row["p95_ms"] / baseline, 2)
    # The lookup alone, in process: what `Identify` adds to each request (a worker thread hop
    # aside): one indexed read of the token's hash.
    from headwater.ui.identity import Gate

    store = SqlMetadataStore(f"sqlite:///{home / 'metadata.db'}")
    gate = Gate(lambda: store)
    gate.identify(tokens[3], None)
    took = []
    for _ in range(1000):
        t0 = time.perf_counter()
        gate.identify(tokens[3], None)
        took.append((time.perf_counter() - t0) * 1e6)
    store.close()
    found["resolve a token in process"] = {"p50_us": p(took, 0.5), "p95_us": p(took, 0.95)}
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--max-concurrent", type=int, default=8)
    ap.add_argument("--list-rows", type=int, default=10_000)
    ap.add_argument("--list-calls", type=int, default=200)
    ap.add_argument("--baseline-src", help="src of an earlier commit, measured side by side")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds with a baseline")
    ap.add_argument("--skip", action="append", default=[], help="latency, throughput, listing")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    report: dict[str, Any] = {"cpus": os.cpu_count(), "load_before": os.getloadavg()}
    servers = {"this": None} | ({"baseline": args.baseline_src} if args.baseline_src else {})
    rounds = args.rounds if args.baseline_src else 1
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if "latency" not in args.skip:
            found: dict[str, list[float]] = {name: [] for name in servers}
            for r in range(rounds):
                for name, src in servers.items():
                    where = root / f"latency-{name}-{r}"
                    found[name] += server_latency(args.repeat, where, src)
            report["latency"] = {
                f"{name}_create_run_to_first_task_s": statistics.median(v)
                for name, v in found.items()
            }
            report["latency"]["cli_process_start_to_first_task_s"] = statistics.median(
                cli_latency(min(args.repeat, 5), root)
            )
            report["latency"]["samples"] = found
            print(json.dumps({"latency": report["latency"]}, indent=1), flush=True)
        if "listing" not in args.skip:
            report["listing"] = listing(args.list_rows, args.list_calls, root)
            print(json.dumps({"listing": report["listing"]}, indent=1), flush=True)
        if "throughput" not in args.skip:
            rates: dict[str, list[dict[str, Any]]] = {name: [] for name in servers}
            for r in range(rounds):
                for name, src in servers.items():
                    where = root / f"throughput-{name}-{r}"
                    done = throughput(args.runs, args.clients, args.max_concurrent, where, src)
                    rates[name].append(done)
                    print(json.dumps({f"throughput {name}": done}), flush=True)
                    ok = (
                        ok
                        and done["errors"] == []
                        and (
                            done["distinct"] == done["submitted"] == done["succeeded"] == args.runs
                        )
                    )
            report["throughput"] = rates
        report["load_after"] = os.getloadavg()
    _side_by_side(report)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=1))
    return 0 if ok else 1


def _side_by_side(report: dict[str, Any]) -> None:
    """This server beside the baseline: medians and best rounds, with ratios."""
    lat = report.get("latency", {})
    if "baseline_create_run_to_first_task_s" in lat:
        this, base = (
            lat["this_create_run_to_first_task_s"],
            lat["baseline_create_run_to_first_task_s"],
        )
        print(f"create_run -> first task, median: this {this * 1000:.0f} ms, baseline "
              f"{base * 1000:.0f} ms ({base / this:.1f}x faster)")  # fmt: skip
    rates = report.get("throughput", {})
    if "baseline" in rates:
        this = max(r["runs_per_s"] for r in rates["this"])
        base = max(r["runs_per_s"] for r in rates["baseline"])
        print(f"1-task runs per second, best round: this {this:.2f}, baseline {base:.2f} "
              f"({this / base:.1f}x)")  # fmt: skip
    print(f"load before {report['load_before']}, after {report.get('load_after')}")


if __name__ == "__main__":
    sys.exit(main())
