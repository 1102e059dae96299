#!/usr/bin/env python
"""How the engine grows with a run's tasks: wall, per-task time and peak memory, up to 100,000.

Each case is one run of trivial tasks with the cache off, in a fresh process and a fresh
``HEADWATER_HOME``:

* ``flat``:   ``dsl.ParallelFor(range(N))`` of ``inc(x) -> x + 1``, then ``dsl.Collected`` into
  ``total(xs) -> sum(xs)``: N + 1 tasks;
* ``nested``: ``ParallelFor(range(10))`` around ``ParallelFor(range(N / 10))`` of ``inc``, then
  ``Collected`` into ``total`` (which gets the 10 lists): N + 1 tasks.

The pipeline is compiled to IR beforehand (untimed: a 100,000-item list is KFP's compiler's
time, not the engine's); the timed region is ``headwater.run(ir)``, the whole run from the
engine's start to its recorded end. The ``dask`` executor runs on a LocalCluster made
beforehand (2 worker processes, 1 thread each; untimed). Peak memory is the engine process's
(``ru_maxrss``) growth over what it had before the run; ``store`` is the size the run adds to
the metadata database. Every result is checked (``total`` must be ``sum(range(N)) + N``).

With ``--base REV`` each case also runs on a ``git worktree`` of REV, side by side, and the
table gives the ratio base / head; a case the base does not finish within ``--base-timeout``
seconds is shown as ``>TIMEOUT``, and sizes over ``--base-max`` are not run on the base.

Usage::

    python benchmarks/engine_scale.py [--sizes 100,1000,10000,100000] [--shapes flat,nested]
        [--executors local,dask] [--base REV] [--base-timeout 300] [--base-max 10000]
        [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

from _common import add_report_options, base_machine_info, finish, info_section, progress, table

HERE = Path(__file__).resolve().parent.parent

PIPELINES = """
from typing import List
from kfp import compiler, dsl

@dsl.component
def inc(x: int) -> int:
    return x + 1

@dsl.component
def total(xs: List[int]) -> int:
    return sum(xs)

@dsl.component
def total_nested(xs: List[List[int]]) -> int:
    return sum(sum(x) for x in xs)

def flat(n):
    @dsl.pipeline(name="flat")
    def pipeline() -> int:
        with dsl.ParallelFor(items=list(range(n))) as item:
            t = inc(x=item)
        return total(xs=dsl.Collected(t.output)).output
    return pipeline

def nested(n):
    @dsl.pipeline(name="nested")
    def pipeline() -> int:
        with dsl.ParallelFor(items=list(range(10))) as outer:
            with dsl.ParallelFor(items=list(range(n // 10))) as inner:
                t = inc(x=inner)
        return total_nested(xs=dsl.Collected(t.output)).output
    return pipeline
"""

RUNNER = """
import json, os, resource, sys, time
import warnings
warnings.simplefilter("ignore")
sys.path.insert(0, os.environ["HW_BENCH_DIR"])
from hw_scale_pipelines import flat, nested
from kfp import compiler

shape, n, executor = sys.argv[1], int(sys.argv[2]), sys.argv[3]
home = os.environ["HEADWATER_HOME"]
ir = os.path.join(home, "pipeline.yaml")
compiler.Compiler().compile({"flat": flat, "nested": nested}[shape](n), ir)
import headwater
settings = {"enable_cache": False}
if executor == "dask":
    from distributed import Client, LocalCluster
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    settings.update(executor="dask", scheduler=Client(cluster))
# The store exists before the clock starts, as in every other engine benchmark.
headwater.run(flat(1), **{k: v for k, v in settings.items()})
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
db = os.path.join(home, "metadata.db")
size = os.path.getsize(db)
started = time.perf_counter()
run = headwater.run(ir, **settings)
wall = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
inner = n if shape == "flat" else (n // 10) * 10
expected = sum(range(n)) + n if shape == "flat" else 10 * (sum(range(n // 10)) + n // 10)
print(json.dumps({
    "state": run.state, "output": run.outputs.get("Output"), "expected": expected,
    "tasks": len(run.tasks), "wall": wall, "peak_kb": peak, "before_kb": before,
    "store_bytes": os.path.getsize(db) - size,
}))
"""


def run_case(
    tree: Path, shape: str, n: int, executor: str, timeout: float | None, workdir: Path
) -> dict[str, Any] | None:
    """One case on the source tree `tree`: its measurements, or None if it timed out."""
    with tempfile.TemporaryDirectory(prefix="hw-scale-", dir=workdir) as home:
        env = {
            **os.environ,
            "PYTHONPATH": str(tree / "src"),
            "HEADWATER_HOME": home,
            "HW_BENCH_DIR": str(workdir),
        }
        try:
            done = subprocess.run(
                [sys.executable, "-c", RUNNER, shape, str(n), executor],
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return None
    if done.returncode != 0:
        raise SystemExit(f"{shape} {n} on {executor} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if result["state"] != "SUCCEEDED" or result["output"] != result["expected"]:
        raise SystemExit(f"{shape} {n} on {executor}: wrong result {result}")
    return result


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="100,1000,10000,100000")
    p.add_argument("--shapes", default="flat,nested")
    p.add_argument("--executors", default="local,dask")
    p.add_argument("--base", help="also run each case on this commit, side by side")
    p.add_argument("--base-timeout", type=float, default=300.0)
    p.add_argument("--base-max", type=int, default=10_000, help="largest size run on the base")
    add_report_options(p, "exit 2 when a 10,000-task flat run takes over 60 s")
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows, raw, passed = [], [], True
    with tempfile.TemporaryDirectory(prefix="hw-bench-") as tmp:
        workdir = Path(tmp)
        (workdir / "hw_scale_pipelines.py").write_text(textwrap.dedent(PIPELINES))
        base = None
        if args.base:
            base = workdir / "base"
            subprocess.run(
                ["git", "-C", str(HERE), "worktree", "add", "--detach", "-q", str(base), args.base],
                check=True,
            )
        try:
            for executor in args.executors.split(","):
                for shape in args.shapes.split(","):
                    for n in sizes:
                        progress(f"{executor} {shape} {n} ...")
                        head = run_case(HERE, shape, n, executor, None, workdir)
                        assert head is not None
                        tasks = head["tasks"]
                        if shape == "flat" and n == 10_000 and head["wall"] > 60:
                            passed = False
                        grown = max(0, head["peak_kb"] - head["before_kb"]) * 1024
                        row = [
                            executor,
                            shape,
                            f"{tasks:,}",
                            f"{head['wall']:.1f} s",
                            f"{head['wall'] / tasks * 1000:.2f} ms",
                            f"{grown / 2**20:.0f} MiB",
                            f"{grown / tasks / 1024:.1f} KiB",
                            f"{head['store_bytes'] / tasks / 1024:.1f} KiB",
                        ]
                        entry = {"executor": executor, "shape": shape, "n": n, "head": head}
                        if base is not None and n > args.base_max:
                            row += ["not run", "-"]
                        elif base is not None:
                            progress(f"{executor} {shape} {n} on {args.base} ...")
                            old = run_case(base, shape, n, executor, args.base_timeout, workdir)
                            entry["base"] = old
                            if old is None:
                                row += [f">{args.base_timeout:.0f} s", "-"]
                            else:
                                row += [
                                    f"{old['wall']:.1f} s",
                                    f"{old['wall'] / head['wall']:.2f}x",
                                ]
                        rows.append(row)
                        raw.append(entry)
        finally:
            if base is not None:
                subprocess.run(
                    ["git", "-C", str(HERE), "worktree", "remove", "--force", str(base)],
                    check=False,
                )
    headers = ["executor", "shape", "tasks", "wall", "per task", "peak memory", "per task",
               "store per task"]  # fmt: skip
    if args.base:
        headers += [f"wall at {args.base}", "speed-up"]
    parts = info_section("Machine", base_machine_info(), args.markdown)
    parts.append(table(headers, rows, args.markdown))
    return finish("\n\n".join(parts), passed, args, {"results": raw})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
