#!/usr/bin/env python
"""Dask-executor overhead: the same trivial pipelines on a 2-worker loopback cluster and locally.

Side by side in one run, on the pipelines of ``engine_overhead.py``:

* workload ``chain``:     ``--chain`` (default 20) ``inc`` tasks, each taking the previous output;
* workload ``fanout``:    a ``dsl.ParallelFor`` over ``--fanout`` (default 50) ``inc`` tasks and a
  ``dsl.Collected`` total;
* workload ``fanout-big``: the same fan-out ``--fanout-big`` (default 500) wide, to show how the
  cost grows with the number of tasks,

each with these runners:

* ``local (CLI)`` -- ``python -m headwater run compiled.yaml --json``;
* ``dask (CLI)``  -- the same with ``--executor dask --scheduler ADDRESS``;
* ``local (API)`` / ``dask (API)`` -- ``headwater.run(compiled.yaml, executor=..., scheduler=...)``
  in a fresh interpreter, only the call timed (so connecting to the scheduler and importing
  ``distributed`` are in, the interpreter's start-up and Headwater's imports are not);
* ``dask (API, own Client)`` -- the same call given a connected ``distributed.Client`` made
  beforehand, untimed, as in a notebook that already works with Dask;
* ``plain dask (process)`` / ``plain dask (calls)`` -- the floor: the workload's graph as plain
  ``Client.submit``/``Client.map`` calls of a Python function on the same cluster (no Headwater,
  no process per task), timed as a whole process (interpreter, ``import distributed``,
  connecting) and as the calls alone. Any executor built on the Dask client pays at least this,
  so ``plain dask / local`` above the target means the target cannot be met on this machine.

The cluster is started by this script as real processes, as a user starts one: ``dask scheduler
--host 127.0.0.1`` and two ``dask worker ADDRESS --nworkers 1 --nthreads N`` (default N = 2, so
the cluster runs as many tasks at once as the local executor's default on 2 CPUs), each worker in
its own temporary directory, with ``DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0`` as
Headwater asks. It is started once, before anything is timed, and reused by every dask run (as a
user's long-lived cluster would be); its workers' warm-up (the first run) is measured like any
other run. Pipelines are compiled beforehand (untimed), so no KFP import or compile is timed;
each run has its own ``HEADWATER_HOME`` whose metadata database is created untimed, so nothing
is a cache hit. Every result is checked.

Target (issue 7): dask within 1.5x of the local executor on the 50-way fan-out (CLI).

Usage::

    python benchmarks/dask_overhead.py [--repeat 3] [--chain 20] [--fanout 50]
        [--fanout-big 500] [--no-big] [--no-floor] [--nthreads 2] [--runners cli|api|all]
        [--markdown] [--json-out FILE] [--strict]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
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
    tail,
)
from engine_overhead import BenchmarkError, Workload, make_workloads

TARGET_FANOUT_RATIO = 1.5

LOCAL_CLI, DASK_CLI = "local (CLI)", "dask (CLI)"
LOCAL_API, DASK_API = "local (API)", "dask (API)"
# `headwater.run(..., scheduler=client)` from a session that already imported `distributed`
# and holds a connected Client, as a notebook does: only the run is timed.
DASK_CLIENT = "dask (API, own Client)"
# The floor: the same task graph as plain Dask calls of a Python function (no Headwater, no
# process per task), timed as a whole process and as the calls alone.
FLOOR_CLI, FLOOR_API = "plain dask (process)", "plain dask (calls)"
PAIRS = (
    (LOCAL_CLI, DASK_CLI),
    (LOCAL_API, DASK_API),
    (LOCAL_API, DASK_CLIENT),
    (LOCAL_CLI, FLOOR_CLI),
    (LOCAL_API, FLOOR_API),
)
WORKLOAD_ORDER = ("chain", "fanout", "fanout-big")

# Run in a fresh interpreter: one timed `headwater.run`, then one JSON line on stdout.
_API_SCRIPT = """
import json, sys, time, warnings
warnings.simplefilter("ignore")
import headwater
from headwater.metadata import open_store
path, executor, scheduler = sys.argv[1], sys.argv[2], sys.argv[3] or None
open_store().close()
options = {"scheduler": scheduler} if executor == "dask" else {}
if len(sys.argv) > 4:  # a session that already holds a Client (a notebook): not timed
    from distributed import Client

    options["scheduler"] = Client(scheduler)
t0 = time.perf_counter()
run = headwater.run(path, executor=executor, max_parallel=None, **options)
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "state": run.state, "outputs": run.outputs}, default=repr))
"""
_INIT_STORE = "from headwater.metadata import open_store; open_store().close()"

# Plain Dask, the graph of a workload: argv is scheduler, workload name, size. One JSON line.
_FLOOR_SCRIPT = """
import json, sys, time
t0 = time.perf_counter()
from distributed import Client

def inc(x):
    return x + 1

def total(xs):
    return sum(xs)

address, name, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
with Client(address) as client:
    t1 = time.perf_counter()
    if name == "chain":
        future = client.submit(inc, 0, pure=False)
        for _ in range(size - 1):
            future = client.submit(inc, future, pure=False)
    else:
        future = client.submit(total, client.map(inc, range(size), pure=False), pure=False)
    value = future.result()
    calls = time.perf_counter() - t1
print(json.dumps({"seconds": calls, "state": "SUCCEEDED", "outputs": {"Output": value}}))
"""


# --------------------------------------------------------------------------------------------------
# The cluster
# --------------------------------------------------------------------------------------------------


@dataclass
class Cluster:
    address: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)


def _dask_cli() -> list[str]:
    script = Path(sys.executable).with_name("dask")
    return [str(script)] if script.exists() else [sys.executable, "-m", "dask"]


def _wait_for_workers(address: str, n: int, env: dict[str, str], timeout: float) -> None:
    code = (
        "import sys; from distributed import Client\n"
        "with Client(sys.argv[1], timeout=float(sys.argv[3])) as c:\n"
        "    c.wait_for_workers(int(sys.argv[2]), timeout=float(sys.argv[3]))\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, address, str(n), str(timeout)],
        env=env,
        check=True,
        capture_output=True,
        timeout=timeout + 30,
    )


@contextlib.contextmanager
def loopback_cluster(directory: Path, workers: int, nthreads: int) -> Iterator[Cluster]:
    """A `dask scheduler` and `workers` `dask worker` processes on 127.0.0.1; stopped after."""
    env = {k: v for k, v in os.environ.items() if k != "HEADWATER_HOME"}
    env["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] = "0"
    scheduler_file = directory / "scheduler.json"
    log = (directory / "cluster.log").open("ab")
    cluster = Cluster("")
    try:
        argv = [*_dask_cli(), "scheduler", "--host", "127.0.0.1", "--port", "0"]
        argv += ["--no-dashboard", "--scheduler-file", str(scheduler_file)]
        cluster.procs.append(subprocess.Popen(argv, env=env, cwd=directory, stdout=log, stderr=log))
        deadline = time.monotonic() + 60
        while not cluster.address:
            if time.monotonic() > deadline or cluster.procs[0].poll() is not None:
                raise BenchmarkError(f"the scheduler did not start; see {directory}/cluster.log")
            with contextlib.suppress(OSError, ValueError, KeyError):
                cluster.address = json.loads(scheduler_file.read_text())["address"]
            time.sleep(0.05)
        for i in range(workers):
            cwd = directory / f"worker-{i}"
            cwd.mkdir()
            argv = [*_dask_cli(), "worker", cluster.address, "--name", f"worker-{i}"]
            argv += ["--nworkers", "1", "--nthreads", str(nthreads), "--no-dashboard"]
            argv += ["--host", "127.0.0.1", "--local-directory", str(cwd / "dask-scratch")]
            worker_env = {**env, "HEADWATER_HOME": str(cwd / "headwater-home")}
            cluster.procs.append(
                subprocess.Popen(argv, env=worker_env, cwd=cwd, stdout=log, stderr=log)
            )
        _wait_for_workers(cluster.address, workers, env, timeout=60)
        yield cluster
    finally:
        for proc in reversed(cluster.procs):
            proc.send_signal(signal.SIGTERM)
        for proc in reversed(cluster.procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


# --------------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------------


@dataclass
class Measurement:
    workload: str
    runner: str
    n_tasks: int
    times: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEADWATER_")}
    env["HEADWATER_HOME"] = str(home)
    return env


def _output(outputs: Any) -> Any:
    if isinstance(outputs, dict) and len(outputs) == 1:
        return next(iter(outputs.values()))
    return outputs


def _check(value: Any, workload: Workload, label: str) -> None:
    if type(value) is not int or value != workload.expected:
        raise BenchmarkError(f"{label}: wrong result {value!r}; expected {workload.expected}")


def _compile(tmp: Path, workload: Workload) -> Path:
    source = tmp / f"{workload.name}.py"
    source.write_text(workload.source(install_kfp_package=True))
    out = source.with_suffix(".yaml")
    cmd = [sys.executable, "-m", "headwater", "compile", str(source), "-o", str(out)]
    subprocess.run(cmd, env=_env(tmp / "compile-home"), check=True, capture_output=True)
    return out


def timed_run(
    ir: Path, workload: Workload, runner: str, cluster: Cluster, timeout: float, label: str
) -> float:
    """One run in a fresh HEADWATER_HOME; its seconds (whole process for the CLI)."""
    dask = runner in (DASK_CLI, DASK_API, DASK_CLIENT)
    whole = runner in (LOCAL_CLI, DASK_CLI, FLOOR_CLI)
    with tempfile.TemporaryDirectory(prefix="hw-bench-dask-") as d:
        work = Path(d)
        env = _env(work / "home")
        subprocess.run([sys.executable, "-c", _INIT_STORE], env=env, check=True)
        if runner in (FLOOR_CLI, FLOOR_API):
            size = workload.size
            cmd = [sys.executable, "-c", _FLOOR_SCRIPT, cluster.address, workload.name, str(size)]
        elif runner in (LOCAL_CLI, DASK_CLI):
            cmd = [sys.executable, "-m", "headwater", "run", str(ir), "--json"]
            if dask:
                cmd += ["--executor", "dask", "--scheduler", cluster.address]
        else:
            executor = "dask" if dask else "local"
            scheduler = cluster.address if dask else ""
            cmd = [sys.executable, "-c", _API_SCRIPT, str(ir), executor, scheduler]
            if runner == DASK_CLIENT:
                cmd.append("client")
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, env=env, cwd=work, timeout=timeout
            )
        except subprocess.TimeoutExpired as exc:
            raise BenchmarkError(f"{label}: timed out after {timeout:.0f} s") from exc
        seconds = time.perf_counter() - t0
        lines = proc.stdout.strip().splitlines()
        try:
            doc = json.loads(lines[-1]) if lines else {}
        except json.JSONDecodeError:
            doc = {}
        if proc.returncode != 0 or doc.get("state") != "SUCCEEDED":
            raise BenchmarkError(
                f"{label}: `{' '.join(cmd)}` exited {proc.returncode}\n"
                f"--- stdout ---\n{tail(proc.stdout)}\n--- stderr ---\n{tail(proc.stderr)}"
            )
        _check(_output(doc.get("outputs")), workload, label)
        return seconds if whole else float(doc["seconds"])


# --------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------


def report(
    results: dict[tuple[str, str], Measurement], info: dict[str, str], markdown: bool
) -> tuple[str, bool]:
    """The report, and False if the target was measured and missed."""
    h = heading(markdown)
    parts = info_section("Machine and cluster", info, markdown)
    rows = [
        [
            m.workload,
            m.runner,
            str(m.n_tasks),
            str(len(m.times)),
            fmt_s(m.median),
            f"{m.median / m.n_tasks * 1000:.1f} ms",
            f"{fmt_s(min(m.times))}-{fmt_s(max(m.times))}",
        ]
        for m in sorted(
            results.values(), key=lambda m: (WORKLOAD_ORDER.index(m.workload), m.runner)
        )
    ]
    headers = ["workload", "runner", "tasks", "runs", "median s", "per task", "min-max s"]
    parts += [f"{h}Wall time (median of runs)", table(headers, rows, markdown)]

    ratio_rows = []
    for workload in WORKLOAD_ORDER:
        for local, dask in PAIRS:
            if (workload, local) in results and (workload, dask) in results:
                ratio = results[(workload, dask)].median / results[(workload, local)].median
                ratio_rows.append([workload, f"{dask} / {local}", f"{ratio:.2f}x"])
    if ratio_rows:
        parts.append(f"{h}Dask against local (dask median / local median; lower is better)")
        parts.append(table(["workload", "ratio", "dask / local"], ratio_rows, markdown))

    passed = True
    target_rows = []
    for local, dask in ((LOCAL_CLI, DASK_CLI), (LOCAL_API, DASK_CLIENT)):
        if ("fanout", local) not in results or ("fanout", dask) not in results:
            continue
        ratio = results[("fanout", dask)].median / results[("fanout", local)].median
        met = ratio <= TARGET_FANOUT_RATIO
        passed = passed and met
        target_rows.append(
            [
                f"fanout: {dask} <= {TARGET_FANOUT_RATIO}x {local}",
                f"{ratio:.2f}x",
                "PASS" if met else "FAIL",
            ]
        )
    parts.append(f"{h}Target")
    parts.append(
        table(["target", "measured", "result"], target_rows, markdown)
        if target_rows
        else "(the fan-out was not measured on both executors: target not evaluated)"
    )
    return "\n\n".join(parts), passed


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Dask executor overhead: trivial pipelines on a 2-worker loopback cluster "
        "against the local executor."
    )
    p.add_argument("--repeat", type=int, default=3, help="runs per runner and workload (median)")
    p.add_argument("--chain", type=int, default=20, help="chain length (tasks)")
    p.add_argument("--fanout", type=int, default=50, help="ParallelFor width")
    p.add_argument("--fanout-big", type=int, default=500, help="the wide ParallelFor's width")
    p.add_argument("--no-big", action="store_true", help="skip the wide fan-out")
    p.add_argument("--workers", type=int, default=2, help="dask worker processes")
    p.add_argument("--nthreads", type=int, default=2, help="threads (task slots) per worker")
    p.add_argument(
        "--runners",
        choices=["cli", "api", "all"],
        default="all",
        help="CLI (whole process), API (the run call) or both",
    )
    p.add_argument(
        "--no-floor",
        action="store_true",
        help="skip plain Dask (the same graph of Python calls, no Headwater): the floor any "
        "executor on the Dask client pays",
    )
    p.add_argument("--timeout", type=float, default=900, help="per-run timeout in seconds")
    add_report_options(p, strict_help=f"exit 2 if dask is over {TARGET_FANOUT_RATIO}x on fanout")
    args = p.parse_args(argv)
    if min(args.repeat, args.chain, args.fanout, args.fanout_big, args.workers) < 1:
        p.error("--repeat, --chain, --fanout, --fanout-big and --workers must be >= 1")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    info = base_machine_info() | {"load average (1/5/15 min) at start": load_average()}
    info["cluster"] = (
        f"dask scheduler + {args.workers} dask worker(s) on 127.0.0.1, "
        f"--nworkers 1 --nthreads {args.nthreads} each"
    )
    base = make_workloads(args.chain, args.fanout)
    workloads = {"chain": base["chain"], "fanout": base["fanout"]}
    if not args.no_big:
        big = make_workloads(args.chain, args.fanout_big)["fanout"]
        workloads["fanout-big"] = replace(big, name="fanout-big")
    runners = {"cli": [LOCAL_CLI, DASK_CLI], "api": [LOCAL_API, DASK_API, DASK_CLIENT]}.get(
        args.runners, [LOCAL_CLI, DASK_CLI, LOCAL_API, DASK_API, DASK_CLIENT]
    )
    if not args.no_floor:
        runners += [FLOOR_CLI] if args.runners == "cli" else [FLOOR_API]
        if args.runners == "all":
            runners.insert(-1, FLOOR_CLI)

    results: dict[tuple[str, str], Measurement] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="hw-bench-dask-src-") as d:
            tmp = Path(d)
            progress("starting the loopback cluster ...")
            with loopback_cluster(tmp, args.workers, args.nthreads) as cluster:
                for wname, workload in workloads.items():
                    ir = _compile(tmp, workload)
                    # Alternate the runners, so a drift in the machine's load hits both sides.
                    for i in range(args.repeat):
                        for runner in runners:
                            label = f"{wname} / {runner} (run {i + 1}/{args.repeat})"
                            progress(f"running {label} ...")
                            secs = timed_run(ir, workload, runner, cluster, args.timeout, label)
                            m = results.setdefault(
                                (wname, runner), Measurement(wname, runner, workload.n_tasks)
                            )
                            m.times.append(secs)
                            progress(f"  {secs:.3f} s")
    except BenchmarkError as exc:
        print(f"\nBENCHMARK FAILED: {exc}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as exc:
        print(f"\nBENCHMARK FAILED: {exc}\n{tail(exc.stderr or '')}", file=sys.stderr)
        return 1

    info["load average (1/5/15 min) at end"] = load_average()
    text, passed = report(results, info, args.markdown)
    raw = {
        "machine": info,
        "results": [
            {"workload": m.workload, "runner": m.runner, "n_tasks": m.n_tasks}
            | {"times_s": m.times, "median_s": m.median}
            for m in results.values()
        ],
    }
    return finish(text, passed, args, raw)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
