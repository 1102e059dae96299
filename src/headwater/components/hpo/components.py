"""The tuning functions as KFP components: thin wrappers that compile to portable IR.

Each body imports and calls the plain function in `headwater.components.hpo.experiment`; the
experiment crosses tasks only as its Artifact (Ax's JSON snapshot) and the trials and results
as task parameters, so the same IR runs under `headwater run` (local or `--executor dask`) and
on Kubeflow or Vertex AI Pipelines given an image with Headwater installed: set
`HEADWATER_COMPONENT_IMAGE` when compiling (default `python:3.11-slim`, which installs
`headwater[hpo]` at start).
"""

# No `from __future__ import annotations`: KFP reads the parameter annotations as objects.
from typing import NamedTuple

from kfp.dsl import Artifact, Input, Markdown, Output

from headwater.components._component import component

#: What a pod without Headwater installs first (Headwater checks it is installed instead).
PACKAGES = ["headwater[hpo]"]


@component(packages_to_install=PACKAGES)
def create_experiment(
    parameters: list,  # type: ignore[type-arg]
    objective: str,
    experiment: Output[Artifact],
    minimize: bool = False,
    outcome_constraints: list = [],  # type: ignore[type-arg]  # noqa: B006  (KFP reads a literal)
    parameter_constraints: list = [],  # type: ignore[type-arg]  # noqa: B006
    seed: int = 0,
    trials_per_round: int = 0,
    rounds: int = 0,
    max_rounds: int = 0,
) -> None:
    """A new Ax experiment over the search space `parameters` (a list of parameter dicts in
    Ax's terms: `{"name", "bounds", "parameter_type", "scaling"}` for a range, `{"name",
    "values", "parameter_type"}` for a choice) optimizing the metric `objective`.

    `trials_per_round` > 0 makes the whole first round quasi-random (Sobol) and every later
    one Bayesian (BoTorch); 0 keeps Ax's default of 5 quasi-random trials. `rounds` and
    `max_rounds`, when given, are checked: at least one round of at least one trial, and no
    more rounds than the pipeline was built with.
    """
    from headwater.components.hpo.experiment import check_schedule
    from headwater.components.hpo.experiment import create_experiment as create

    if rounds or max_rounds or trials_per_round:
        check_schedule(rounds, trials_per_round, max_rounds or None)
    create(
        experiment.path,
        parameters,
        objective,
        minimize=minimize,
        outcome_constraints=outcome_constraints,
        parameter_constraints=parameter_constraints,
        seed=seed,
        initialization_trials=trials_per_round or None,
    )
    experiment.metadata.update(
        {"format": "ax-client-json", "objective": objective, "minimize": minimize}
    )


@component(packages_to_install=PACKAGES)
def suggest_trials(
    experiment: Input[Artifact],
    updated_experiment: Output[Artifact],
    n: int = 1,
    round_number: int = 0,
    rounds: int = 0,
) -> list:  # type: ignore[type-arg]
    """Start `n` trials of `experiment`: returns them as `[{"trial_index", "parameters"}]`,
    for a `dsl.ParallelFor`. Round `round_number` of a pipeline built for more rounds than
    this run's `rounds` starts none (and the experiment passes through unchanged)."""
    from headwater.components.hpo.experiment import suggest_trials as suggest

    skipped = rounds > 0 and round_number > rounds
    trials = suggest(experiment.path, 0 if skipped else n, out=updated_experiment.path)
    updated_experiment.metadata.update({"format": "ax-client-json", "suggested": len(trials)})
    return trials


@component(packages_to_install=PACKAGES)
def complete_trials(
    experiment: Input[Artifact],
    results: list,  # type: ignore[type-arg]
    updated_experiment: Output[Artifact],
    report: Output[Markdown],
    round_number: int = 0,
    rounds: int = 0,
) -> NamedTuple("Outputs", [("best_parameters", dict), ("best_objective", float)]):  # type: ignore[valid-type]
    """Complete the trials of `experiment` with their `results` (collected with
    `dsl.Collected`): `{"trial_index", "objective"}` (a number, or a dict of metrics) or
    `{"trial_index", "error"}` for a failed trial, which Ax marks failed. Fails, naming each
    trial's error, when every trial failed. Returns the best observed parameters so far and
    their objective; `report` is a Markdown table of every trial. `round_number` of `rounds`
    says which round of a tuning pipeline this is (for the people watching it; 0 when
    unknown)."""
    from collections import namedtuple

    from headwater.components.hpo.experiment import complete_trials as complete

    done = complete(experiment.path, results, out=updated_experiment.path)
    with open(report.path, "w", encoding="utf-8") as fh:
        fh.write(done.report)
    updated_experiment.metadata.update(
        {"format": "ax-client-json", "completed": len(done.completed), "failed": len(done.failed)}
    )
    if done.best_trial is None:  # only for results=[] before any trial completed
        from headwater.errors import UserError

        raise UserError("no trial of the experiment has completed yet: there is no best")
    updated_experiment.metadata["best_trial"] = done.best_trial
    outputs = namedtuple("outputs", ["best_parameters", "best_objective"])
    return outputs(done.best_parameters, done.best_objective)
