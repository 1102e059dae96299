#!/usr/bin/env python
"""Bayesian rounds against random search on Hartmann-6, at the same trial budget.

The objective is BoTorch's Hartmann-6 (`botorch.test_functions.Hartmann(dim=6)`), six
parameters in [0, 1], to minimize; its optimum is known (-3.32237), so the *simple regret* of
a search is its best value found minus the optimum (0 is perfect). For each seed:

* **Ax rounds**: what `headwater.hpo.tune` runs, with the plain functions it wraps, in this
  process: `create_experiment` (the first round quasi-random: Sobol, the centre first), then
  `--rounds` times `suggest_trials(--trials-per-round)` -> evaluate -> `complete_trials`,
  the experiment going through its JSON file between steps as it does between tasks;
* **random search**: `--rounds` x `--trials-per-round` points drawn uniformly (numpy,
  seeded), the best of them.

Target (issue 11): Ax's median simple regret over the seeds below random search's.

Usage::

    python benchmarks/hpo.py [--rounds 8] [--trials-per-round 4] [--seeds 5]
        [--markdown] [--json-out FILE] [--strict]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
import warnings
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

DIM = 6
OBJECTIVE = "hartmann6"


def hartmann() -> tuple[Any, float]:
    """The Hartmann-6 function (minimize) and its optimal value."""
    from botorch.test_functions import Hartmann

    function = Hartmann(dim=DIM)
    return function, float(function.optimal_value)


def evaluate(function: Any, points: list[list[float]]) -> list[float]:
    import torch

    with torch.no_grad():
        return [float(v) for v in function(torch.tensor(points, dtype=torch.double))]


def ax_rounds(seed: int, rounds: int, per_round: int, workdir: Path) -> dict[str, Any]:
    """Tune Hartmann-6 in `rounds` rounds of `per_round` trials; the best value and timings."""
    from headwater.components.hpo.experiment import (
        complete_trials,
        create_experiment,
        suggest_trials,
    )

    function, _ = hartmann()
    path = workdir / f"experiment-{seed}.json"
    space = [{"name": f"x{i}", "bounds": [0.0, 1.0], "parameter_type": "float"} for i in range(DIM)]
    create_experiment(
        path, space, OBJECTIVE, minimize=True, seed=seed, initialization_trials=per_round
    )
    best = float("inf")
    suggest_s: list[float] = []
    complete_s: list[float] = []
    trials = 0
    for _ in range(rounds):
        started = time.perf_counter()
        suggested = suggest_trials(path, per_round)
        suggest_s.append(time.perf_counter() - started)
        points = [[t["parameters"][f"x{i}"] for i in range(DIM)] for t in suggested]
        values = evaluate(function, points)
        trials += len(values)
        best = min(best, *values)
        started = time.perf_counter()
        done = complete_trials(
            path,
            [
                {"trial_index": t["trial_index"], "objective": v}
                for t, v in zip(suggested, values, strict=True)
            ],
        )
        complete_s.append(time.perf_counter() - started)
    assert abs(done.best_objective - best) < 1e-6, (done.best_objective, best)
    return {
        "best": best,
        "trials": trials,
        "suggest_s": suggest_s,
        "complete_s": complete_s,
        "snapshot_kb": path.stat().st_size / 1024,
    }


def random_search(seed: int, budget: int) -> dict[str, Any]:
    import numpy as np

    function, _ = hartmann()
    points = np.random.default_rng(seed).uniform(size=(budget, DIM)).tolist()
    return {"best": min(evaluate(function, points)), "trials": budget}


def report(
    runs: list[dict[str, Any]],
    summary: dict[str, Any],
    args: argparse.Namespace,
    machine: dict[str, str],
) -> str:
    h = heading(args.markdown)
    budget = args.rounds * args.trials_per_round
    out = [
        f"{h}Hartmann-6: Ax rounds vs random search, {args.rounds} rounds x "
        f"{args.trials_per_round} trials = {budget} trials each "
        f"(optimum {summary['optimum']:.5f})\n"
    ]
    rows = [
        [
            str(r["seed"]),
            f"{r['ax']['best']:.4f}",
            f"{r['ax']['regret']:.4f}",
            f"{r['random']['best']:.4f}",
            f"{r['random']['regret']:.4f}",
            fmt_s(sum(r["ax"]["suggest_s"]) + sum(r["ax"]["complete_s"])),
        ]
        for r in runs
    ]
    rows.append(
        [
            "median",
            f"{summary['ax_best']:.4f}",
            f"{summary['ax_regret']:.4f}",
            f"{summary['random_best']:.4f}",
            f"{summary['random_regret']:.4f}",
            "",
        ]
    )
    out.append(
        table(
            ["seed", "Ax best", "Ax regret", "random best", "random regret", "Ax steps (s)"],
            rows,
            args.markdown,
        )
    )
    ratio = summary["ratio"]
    out.append(
        f"\nmedian regret: random / Ax = {ratio:.1f}x; Ax better on "
        f"{summary['ax_wins']} of {len(runs)} seeds. Target (Ax median regret < random's): "
        f"{'ok' if summary['passed'] else 'MISSED'}"
    )
    suggest = [s for r in runs for s in r["ax"]["suggest_s"]]
    complete = [s for r in runs for s in r["ax"]["complete_s"]]
    out.append(
        f"\nAx steps in process (JSON snapshot read and written each step): suggest round 1 "
        f"(Sobol) median {fmt_s(statistics.median(r['ax']['suggest_s'][0] for r in runs))} s, "
        f"later rounds (BoTorch) median {fmt_s(statistics.median(suggest[1:] or [0.0]))} s; "
        f"complete median {fmt_s(statistics.median(complete))} s; snapshot "
        f"{statistics.median(r['ax']['snapshot_kb'] for r in runs):.0f} KB after "
        f"{budget} trials."
    )
    out.extend(info_section("Machine", machine, args.markdown))
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--trials-per-round", type=int, default=4)
    p.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1")
    add_report_options(p, "exit 2 when Ax's median regret is not below random search's")
    args = p.parse_args()
    # Ax logs every trial at INFO and its dependencies warn about their own deprecations.
    logging.disable(logging.WARNING)  # and "fewer trials than asked", which suggest_trials handles
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", module="ax")
    machine = base_machine_info()
    machine["load average (start)"] = load_average()
    started = time.perf_counter()
    _, optimum = hartmann()
    progress(f"imports: {time.perf_counter() - started:.1f} s")
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="headwater-hpo-bench-") as tmp:
        for seed in range(args.seeds):
            ax = ax_rounds(seed, args.rounds, args.trials_per_round, Path(tmp))
            rnd = random_search(seed, args.rounds * args.trials_per_round)
            for side in (ax, rnd):
                side["regret"] = side["best"] - optimum
            runs.append({"seed": seed, "ax": ax, "random": rnd})
            progress(
                f"seed {seed}: Ax regret {ax['regret']:.4f}, random {rnd['regret']:.4f} "
                f"({sum(ax['suggest_s']) + sum(ax['complete_s']):.1f} s of Ax steps)"
            )
    machine["load average (end)"] = load_average()
    ax_regret = statistics.median(r["ax"]["regret"] for r in runs)
    random_regret = statistics.median(r["random"]["regret"] for r in runs)
    summary = {
        "optimum": optimum,
        "ax_best": statistics.median(r["ax"]["best"] for r in runs),
        "random_best": statistics.median(r["random"]["best"] for r in runs),
        "ax_regret": ax_regret,
        "random_regret": random_regret,
        "ratio": random_regret / ax_regret if ax_regret > 0 else float("inf"),
        "ax_wins": sum(r["ax"]["regret"] < r["random"]["regret"] for r in runs),
        "passed": ax_regret < random_regret,
    }
    text = report(runs, summary, args, machine)
    return finish(text, summary["passed"], args, {"runs": runs, "summary": summary})


if __name__ == "__main__":
    raise SystemExit(main())
