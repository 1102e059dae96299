#!/usr/bin/env python
"""Engine overhead of this checkout against an earlier commit, side by side in one run.

``engine_overhead.py --only headwater`` measures Headwater alone; this script runs it on two
source trees in alternating rounds (base, head, head, base, ...) so that both see the same
machine state and neither always goes first, and prints each runner's median per workload
with the ratio head / base (below 1.00: this checkout is faster). The base tree is a
temporary ``git worktree`` of REV; each side runs its own copy of the benchmark against its
own ``src`` (``PYTHONPATH``).

Usage::

    python benchmarks/engine_against_commit.py REV [--rounds 3] [-- ENGINE_OVERHEAD_ARGS...]

For example ``python benchmarks/engine_against_commit.py 5948b3e --rounds 3 -- --repeat 3``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from _common import table

HERE = Path(__file__).resolve().parent.parent


def _round(tree: Path, extra: list[str], out: Path) -> list[dict[str, object]]:
    """One `engine_overhead.py --only headwater` run on `tree`; its results."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    cmd = [sys.executable, str(tree / "benchmarks" / "engine_overhead.py"), "--only", "headwater"]
    subprocess.run([*cmd, *extra, "--json-out", str(out)], env=env, check=True)
    results: list[dict[str, object]] = json.loads(out.read_text())["results"]
    return results


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rev", help="the commit to compare against (the base)")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per side")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    split = argv.index("--") if "--" in argv else len(argv)
    args = p.parse_args(argv[:split])
    args.extra = argv[split + 1 :]
    times: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="hw-bench-") as tmp:
        base = Path(tmp) / "base"
        subprocess.run(
            ["git", "-C", str(HERE), "worktree", "add", "--detach", "-q", str(base), args.rev],
            check=True,
        )
        try:
            for i in range(args.rounds):
                # Each side goes first in every other round, so neither gains from its place.
                sides = [("base", base), ("head", HERE)]
                for side, tree in sides if i % 2 == 0 else sides[::-1]:
                    print(f"round {i + 1}/{args.rounds}: {side}", file=sys.stderr, flush=True)
                    for r in _round(tree, args.extra, Path(tmp) / f"{side}{i}.json"):
                        key = (str(r["workload"]), str(r["runner"]), side)
                        times[key] += [float(t) for t in r["times_s"]]  # type: ignore[attr-defined]
        finally:
            subprocess.run(
                ["git", "-C", str(HERE), "worktree", "remove", "--force", str(base)], check=False
            )
    rows = []
    for workload, runner in sorted({(w, r) for w, r, _ in times}):
        b = statistics.median(times[(workload, runner, "base")])
        h = statistics.median(times[(workload, runner, "head")])
        rows.append([workload, runner, f"{b:.3f}", f"{h:.3f}", f"{h / b:.2f}"])
    headers = ["workload", "runner", f"base {args.rev} (s)", "head (s)", "head / base"]
    print(table(headers, rows, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
