#!/usr/bin/env python
"""Task logs of any size, this checkout against an earlier commit, side by side in one run.

Two measurements, each on both source trees (``PYTHONPATH``), in alternating rounds:

* chatty: ``headwater run`` of a one-task pipeline whose task prints ``--megabytes`` (200) MB
  of 100-byte lines; the run's wall time and the size of the log it leaves
  (issue 30: a task's log has a size cap, default 64 MiB);
* tail: what a click on a task in the UI fetches, ``headwater.ui.data.log_tail(path, 200)``, on
  a log of one ``--line-mb`` (48) MB line; median of 5 calls (issue 30: it took 17 s).

Per-task overhead (the output now goes through the fork server) is
``engine_against_commit.py``'s to measure.

Usage::

    python benchmarks/task_logs.py REV [--rounds 2] [--megabytes 200] [--line-mb 48]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import table

HERE = Path(__file__).resolve().parent.parent
CHATTY = HERE / "tests" / "integration" / "pipelines" / "task_chatty.py"

TAIL = """
import statistics, sys, time
from pathlib import Path
from headwater.ui.data import log_tail
path = Path(sys.argv[1])
times = []
for _ in range(5):
    began = time.perf_counter()
    text = log_tail(path, 200)
    times.append(time.perf_counter() - began)
print(statistics.median(times), len(text.encode()))
"""


def chatty(tree: Path, megabytes: int, tmp: Path) -> tuple[float, int]:
    """(wall seconds, log bytes) of one run of the chatty pipeline on `tree`."""
    home = Path(tempfile.mkdtemp(dir=tmp))
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "HEADWATER_HOME": str(home)}
    env.pop("HEADWATER_TASK_LOG_LIMIT", None)
    cmd = [sys.executable, "-m", "headwater", "run", str(CHATTY), "--json", "--no-cache"]
    began = time.perf_counter()
    done = subprocess.run(
        [*cmd, "--param", f"megabytes={megabytes}"], env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"the chatty run failed on {tree}:\n{done.stderr[-2000:]}")
    run_id = json.loads(done.stdout.strip().splitlines()[-1])["run_id"]
    [log] = (home / "runs" / run_id / "tasks").glob("*/log.txt")
    size = log.stat().st_size
    subprocess.run(["rm", "-rf", str(home)], check=False)
    return wall, size


def tail(tree: Path, log: Path) -> tuple[float, int]:
    """(median seconds, bytes returned) of the UI's log tail of `log` on `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    done = subprocess.run(
        [sys.executable, "-c", TAIL, str(log)], env=env, capture_output=True, text=True, check=True
    )
    seconds, size = done.stdout.split()
    return float(seconds), int(size)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rev", help="the commit to compare against (the base)")
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds per side")
    p.add_argument("--megabytes", type=int, default=200, help="what the chatty task prints")
    p.add_argument("--line-mb", type=int, default=48, help="the one line of the tailed log")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = p.parse_args(argv)
    walls: dict[str, list[float]] = {"base": [], "head": []}
    logs: dict[str, int] = {}
    tails: dict[str, list[float]] = {"base": [], "head": []}
    tail_sizes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="hw-bench-") as scratch:
        tmp = Path(scratch)
        base = tmp / "base"
        subprocess.run(
            ["git", "-C", str(HERE), "worktree", "add", "--detach", "-q", str(base), args.rev],
            check=True,
        )
        one_line = tmp / "one-line.log"
        with one_line.open("wb") as fh:
            block = b"x" * (1 << 20)
            for _ in range(args.line_mb):
                fh.write(block)
        try:
            for i in range(args.rounds):
                order = [("base", base), ("head", HERE)]
                for side, tree in order if i % 2 == 0 else order[::-1]:
                    print(f"round {i + 1}: {side}", file=sys.stderr, flush=True)
                    wall, size = chatty(tree, args.megabytes, tmp)
                    walls[side].append(wall)
                    logs[side] = size
                    seconds, returned = tail(tree, one_line)
                    tails[side].append(seconds)
                    tail_sizes[side] = returned
        finally:
            subprocess.run(
                ["git", "-C", str(HERE), "worktree", "remove", "--force", str(base)], check=False
            )
    mib = 1 << 20
    rows = [
        [
            f"chatty task, {args.megabytes} MB printed: run wall time (median)",
            f"{statistics.median(walls['base']):.2f} s",
            f"{statistics.median(walls['head']):.2f} s",
            f"{statistics.median(walls['head']) / statistics.median(walls['base']):.2f}x",
        ],
        [
            "its log",
            f"{logs['base'] / mib:.1f} MiB",
            f"{logs['head'] / mib:.1f} MiB",
            f"{logs['head'] / logs['base']:.2f}x",
        ],
        [
            f"UI log tail, one {args.line_mb} MB line (median of 5)",
            f"{statistics.median(tails['base']) * 1000:.1f} ms",
            f"{statistics.median(tails['head']) * 1000:.1f} ms",
            f"{statistics.median(tails['head']) / statistics.median(tails['base']):.4f}x",
        ],
        [
            "bytes it returns",
            f"{tail_sizes['base'] / mib:.1f} MiB",
            f"{tail_sizes['head'] / mib:.1f} MiB",
            "",
        ],
    ]
    print(
        table(
            ["measure", f"base ({args.rev})", "this checkout", "head / base"], rows, args.markdown
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
