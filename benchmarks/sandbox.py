#!/usr/bin/env python
"""What a sandbox costs a task: `headwater.run` with and without `--sandbox`, side by side.

Workloads (trivial `inc(x: int) -> int` lightweight components, the cache off):

* ``chain``: N tasks, each consuming the previous one's output (default N = 20);
* ``fanout``: a ``dsl.ParallelFor`` of M tasks (default M = 50) fanned in by ``dsl.Collected``.

Each round runs every workload without a sandbox and sandboxed, alternating, in this one
process (the API, warm: imports and the metadata database are set up once, outside the timed
region), each run from the pipeline call to its result. The table shows medians and the
cost added per task, against the issue's target (under 15 ms a task for host tasks).

Usage::

    python benchmarks/sandbox.py [--rounds 5] [--chain 20] [--fanout 50] [--markdown]
"""

# No `from __future__ import annotations`: KFP reads the components' annotations as types.
import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, List  # noqa: UP035 (KFP reads typing.List)

TARGET_MS_PER_TASK = 15.0


def _pipelines(chain: int, fanout: int) -> dict[str, tuple[Callable[..., Any], int, int]]:
    """name -> (pipeline, its task count, its result)."""
    from kfp import dsl

    @dsl.component(base_image="python:3.11")
    def inc(x: int) -> int:
        return x + 1

    @dsl.component(base_image="python:3.11")
    def total(xs: List[int]) -> int:  # noqa: UP006 (KFP reads typing's List)
        return int(sum(xs))

    @dsl.pipeline(name="bench-chain")
    def chain_pipeline() -> int:
        task = inc(x=0)
        for _ in range(chain - 1):
            task = inc(x=task.output)
        return task.output

    @dsl.pipeline(name="bench-fanout")
    def fanout_pipeline() -> int:
        with dsl.ParallelFor(items=list(range(fanout))) as item:
            task = inc(x=item)
        return total(xs=dsl.Collected(task.output)).output

    return {
        "chain": (chain_pipeline, chain, chain),
        "fanout": (fanout_pipeline, fanout + 1, sum(range(fanout)) + fanout),
    }


def _timed(pipeline: Callable[..., Any], expected: int, sandbox: Any) -> float:
    import headwater

    began = time.perf_counter()
    run = headwater.run(pipeline, enable_cache=False, sandbox=sandbox)
    took = time.perf_counter() - began
    if run.state != "SUCCEEDED" or run.outputs.get("Output") != expected:
        sys.exit(f"a run did not give {expected}: {run.state} {run.outputs} {run.error}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chain", type=int, default=20)
    parser.add_argument("--fanout", type=int, default=50)
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="headwater-bench-sandbox-")
    os.environ["HEADWATER_HOME"] = home
    os.environ.pop("HEADWATER_METADATA_URL", None)
    from headwater.sandbox import SandboxPolicy, check_available

    check_available()
    policy = SandboxPolicy()
    pipelines = _pipelines(args.chain, args.fanout)
    for pipeline, _, expected in pipelines.values():  # warm-up: store, imports, bwrap's pages
        _timed(pipeline, expected, None)
        _timed(pipeline, expected, policy)
    times: dict[tuple[str, bool], list[float]] = {}
    for _ in range(args.rounds):
        for name, (pipeline, _, expected) in pipelines.items():
            for sandboxed in (False, True):
                took = _timed(pipeline, expected, policy if sandboxed else None)
                times.setdefault((name, sandboxed), []).append(took)
    rows = []
    for name, (_, tasks, _) in pipelines.items():
        plain = statistics.median(times[(name, False)])
        boxed = statistics.median(times[(name, True)])
        added = (boxed - plain) / tasks * 1000
        verdict = "met" if added < TARGET_MS_PER_TASK else "MISSED"
        rows.append((f"{name}, {tasks} tasks", plain, boxed, added, verdict))
    sep = " | " if args.markdown else "  "
    target = f"< {TARGET_MS_PER_TASK:g} ms"
    header = ["workload", "no sandbox", "sandboxed", "added per task", target]
    print(f"rounds: {args.rounds}, cpus: {os.cpu_count()}, uid: {os.geteuid()}")
    if args.markdown:
        print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    else:
        print(sep.join(header))
    for label, plain, boxed, added, verdict in rows:
        cells = [label, f"{plain:.2f} s", f"{boxed:.2f} s", f"{added:.1f} ms", verdict]
        print(("| " + " | ".join(cells) + " |") if args.markdown else sep.join(cells))
    return 0 if all(row[-1] == "met" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
