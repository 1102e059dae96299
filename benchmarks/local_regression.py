"""Has the local executor slowed down? This tree against an earlier commit, side by side.

The in-process 20-task chain (`headwater.run(chain_pipeline)` in an interpreter that has
imported Headwater and created its store), timed for the source tree of `--baseline` (taken
with `git archive`) and for this one, in alternating rounds so that both see the same machine.
Each side is its own interpreter with `PYTHONPATH` at its `src/` (the fork server inherits it)
and its own `HEADWATER_HOME`.

    .venv/bin/python benchmarks/local_regression.py --baseline 6bd2172 --rounds 5

Target (issue 7): the current tree within 10% of the baseline (ratio <= 1.10).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from _common import base_machine_info, load_average, progress

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
from kfp import dsl
import headwater
from headwater.metadata import open_store

assert headwater.__file__.startswith(sys.argv[1]), headwater.__file__

@dsl.component
def inc(x: int) -> int:
    return x + 1

N = int(sys.argv[2])

@dsl.pipeline
def chain_pipeline(start: int = 0) -> int:
    t = inc(x=start)
    for _ in range(N - 1):
        t = inc(x=t.output)
    return t.output

open_store().close()
headwater.run(chain_pipeline, {"start": 0}, enable_cache=False)  # warm-up, untimed
times = []
for _ in range(int(sys.argv[3])):
    t0 = time.perf_counter()
    run = headwater.run(chain_pipeline, {"start": 0}, enable_cache=False)
    times.append(time.perf_counter() - t0)
    assert run.state == "SUCCEEDED" and run.outputs["Output"] == N, (run.state, run.outputs)
print(json.dumps(times))
"""


def extract(rev: str, into: Path) -> Path:
    """The `src/` of commit `rev`, extracted under `into`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "src"], check=True, capture_output=True
    ).stdout
    tar_path = into / "src.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def measure(src: Path, home: Path, tasks: int, runs: int) -> list[float]:
    child = home.parent / "chain_child.py"  # a file: KFP reads the component's source
    if not child.exists():
        child.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(src), "HEADWATER_HOME": str(home)}
    env.pop("HEADWATER_METADATA_URL", None)
    env.pop("HEADWATER_PIPELINE_ROOT", None)
    proc = subprocess.run(
        [sys.executable, str(child), str(src), str(tasks), str(runs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"the run on {src} failed:\n{proc.stderr[-3000:]}")
    return [float(t) for t in json.loads(proc.stdout.strip().splitlines()[-1])]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="6bd2172", help="the commit to compare against")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per side")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per round")
    parser.add_argument("--tasks", type=int, default=20, help="chain length")
    args = parser.parse_args()
    info = base_machine_info()
    with tempfile.TemporaryDirectory(prefix="hw-regression-") as tmp:
        work = Path(tmp)
        sides = {
            f"baseline ({args.baseline})": extract(args.baseline, work),
            "this tree": ROOT / "src",
        }
        samples: dict[str, list[float]] = {name: [] for name in sides}
        for round_ in range(args.rounds):
            for name, src in sides.items():
                progress(f"round {round_ + 1}/{args.rounds}: {name}")
                home = work / f"home-{list(sides).index(name)}"
                samples[name] += measure(src, home, args.tasks, args.runs)
    print(f"# Local executor, in-process {args.tasks}-task chain: this tree vs a baseline\n")
    for key in ("nproc", "cpu", "python"):
        if key in info:
            print(f"- {key}: {info[key]}")
    print(f"- load average at end: {load_average()}")
    print(f"- {args.rounds} alternating rounds x {args.runs} runs per side\n")
    print("| side | runs | median s | per task | min-max s |")
    print("|---|---|---|---|---|")
    medians = {}
    for name, times in samples.items():
        med = statistics.median(times)
        medians[name] = med
        print(
            f"| {name} | {len(times)} | {med:.3f} | {1000 * med / args.tasks:.1f} ms | "
            f"{min(times):.3f}-{max(times):.3f} |"
        )
    base, new = medians.values()
    ratio = new / base
    verdict = "within" if ratio <= 1.10 else "NOT within"
    print(f"\nthis tree / baseline = {ratio:.3f} ({verdict} the 10% budget)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
