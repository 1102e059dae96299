"""`make demo`: the flagship Higgs pipeline on this machine's defaults, then a short summary.

Headwater's engine running each task in a process of its own (`executor="local"`): the data
steps compute on Polars there, and XGBoost trains on a Dask LocalCluster its task starts. The
SQLite metadata store and local artifacts are under $HEADWATER_HOME. A second run is served
from the cache in seconds. `--executor dask` runs every task on a LocalCluster instead (the
data steps then on pandas, on its workers).

    python examples/demo.py [--rows N] [--rounds N] [--executor local|dask]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import headwater
from headwater.cli.progress import ConsoleReporter
from headwater.config import home_command
from headwater.errors import HeadwaterError

PIPELINE = Path(__file__).with_name("higgs_xgboost.py")
#: The order the summary lists the stages in.
STAGES = (
    "generate-higgs",
    "groupby-summary",
    "preprocess",
    "train-xgboost",
    "evaluate-classifier",
    "register-model",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="Higgs rows to generate")
    parser.add_argument("--rounds", type=int, default=100, help="XGBoost boosting rounds")
    parser.add_argument("--executor", default="local", help="local (default) or dask")
    args = parser.parse_args()

    started = time.monotonic()
    try:
        run = headwater.run(
            str(PIPELINE),
            {"rows": args.rows, "rounds": args.rounds},
            executor=args.executor,
            hooks=[ConsoleReporter(sys.stderr)],
        )
    except HeadwaterError as exc:  # one line, as the CLI says it: a store it cannot open...
        print(f"headwater: error: {exc}", file=sys.stderr)
        return 2
    took = time.monotonic() - started
    print()
    print(f"Higgs XGBoost demo: run {run.run_id} {run.state} in {took:.1f} s")
    if not run.succeeded:
        error = run.error
        if error is not None:
            print(f"  failed: {error.task or 'run'}: {error.error_type}: {error.message}")
        print(f"  see: {home_command('runs', 'show', run.run_id)}")
        return 1
    print(f"  test AUC: {run.outputs['Output']:.4f}")
    print("  stages:")
    by_name = {t.name: t for t in run.tasks}
    for name in STAGES:
        task = by_name.get(name)
        if task is None:
            continue
        if task.cached:
            how = "cached"
        elif task.started_at is not None and task.finished_at is not None:
            how = f"{task.finished_at - task.started_at:.1f} s"
        else:
            how = task.state.lower()
        print(f"    {name:<20} {how}")
    models = [m for m in headwater.list_models(name="higgs-xgboost") if m.run_id == run.run_id]
    if not models:  # a cached run registered nothing new: show the newest version
        models = headwater.list_models(name="higgs-xgboost")[:1]
    if models:
        model = models[0]
        print(
            f"  registered model: {model.name} v{model.version} ({model.framework}, stage "
            f"{model.stage}) at {model.uri}"
        )
    # Each next step as it works when pasted: with HEADWATER_HOME set first when `make demo`
    # set it for this process alone.
    steps = [(home_command("runs", "show", run.run_id), "tasks, inputs, outputs, logs")]
    if models:
        model = f"{models[0].name}:{models[0].version}"
        steps += [
            (home_command("lineage", model), "what data, code and parameters made the model"),
            (
                home_command(
                    "models",
                    "promote",
                    models[0].name,
                    str(models[0].version),
                    "--stage",
                    "production",
                ),
                "",
            ),
            (home_command("serve", model), "KServe V1, V2 on :8080"),
        ]
    steps += [
        (home_command("models", "list"), ""),
        (home_command("ui"), "runs, the graph, artifacts and lineage"),
    ]
    print("  next:")
    for command, what in steps:
        print(f"    {command}" + (f"   # {what}" if what else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
