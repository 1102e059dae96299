"""`tune`: a KFP pipeline of Bayesian optimisation rounds, each a ParallelFor of trials.

The rounds are unrolled in the compiled IR (KFP has no loop whose body depends on the last
iteration), so the pipeline runs unchanged under `headwater run`, on Kubeflow and on Vertex::

    create-experiment -> suggest-trials -> ParallelFor(trial) -> complete-trials   round 1
                      -> suggest-trials -> ParallelFor(trial) -> complete-trials   round 2 ...

Round 1 is quasi-random (Sobol, the centre of the space first); every later round's
suggestions come from a BoTorch model fitted on all the trials completed before it. The
experiment crosses tasks as an Artifact (Ax's JSON snapshot), the trials and their results
as task parameters: nothing is shared through a file.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from headwater.components.hpo import search_space as spaces
from headwater.errors import InvalidArgumentError
from headwater.hpo.trials import trial_component

#: The inputs of a tuning pipeline besides the train component's.
SCHEDULE = ("rounds", "trials_per_round")
# Made by call, not by class syntax: KFP reads the field types, which this module's
# `from __future__ import annotations` would turn into strings.
_Outputs = NamedTuple("_Outputs", [("best_parameters", dict), ("best_objective", float)])  # type: ignore[type-arg]  # noqa: UP014


def tune(
    train_component: Any,
    search_space: Sequence[Mapping[str, Any]],
    objective: str,
    *,
    rounds: int = 3,
    trials_per_round: int = 4,
    minimize: bool = False,
    outcome_constraints: Sequence[str] = (),
    parameter_constraints: Sequence[str] = (),
    seed: int = 0,
    max_rounds: int | None = None,
    parallelism: int | None = None,
    parameters_input: str = "hyperparameters",
    train_args: Mapping[str, Any] | None = None,
    inputs: Sequence[str] | None = None,
    name: str | None = None,
) -> Any:
    """Build a pipeline that tunes `train_component` over `search_space` with Ax/BoTorch.

    Each trial runs `train_component` with its parameters as the dict input
    `parameters_input` (merged over the component's own, for `train_lightning`); the
    component returns the trial's `objective` as its output (a number, or a dict of metrics
    holding it and any metric an outcome constraint names). A trial that raises is marked
    failed in Ax, with its error, and the round goes on; a round in which every trial fails
    ends the tuning with each trial's error.

    The pipeline's inputs are `rounds` and `trials_per_round` (defaulting to the values given
    here) and the train component's other inputs (see `inputs`), passed to every trial: use
    the pipeline as a nested pipeline to give them task outputs (a Dataset, say). Its outputs are
    `best_parameters` (dict) and `best_objective` (float), the best observed trial.

    Args:
        train_component: A lightweight Python component (`@dsl.component`).
        search_space: A list of parameter dicts in Ax's terms, e.g. `{"name": "lr",
            "bounds": [1e-4, 0.1], "parameter_type": "float", "scaling": "log"}` or
            `{"name": "width", "values": [8, 16, 32], "parameter_type": "int"}`.
        objective: The metric to optimize, as the train component reports it.
        rounds: Rounds of trials; each after the first is suggested by a model fitted on
            every earlier one.
        trials_per_round: Trials per round, run in parallel (a `dsl.ParallelFor`).
        minimize: Minimize the objective (default: maximize).
        outcome_constraints: Ax constraints on other reported metrics ("latency <= 20").
        parameter_constraints: Ax constraints between parameters ("x1 + x2 <= 1").
        seed: Makes the suggestions reproducible.
        max_rounds: Rounds unrolled in the IR (default `rounds`); a run may then ask for up
            to this many with `--param rounds=N`, and rounds beyond N start no trials.
        parallelism: Trials of a round that run at once (default: all of them).
        parameters_input: The train component's dict input for a trial's parameters.
        train_args: Constant inputs of the train component, given to every trial and not
            made pipeline inputs.
        inputs: The train component's inputs the pipeline takes and passes to every trial
            (default: all its parameters and required artifacts). Name an optional artifact
            input (`train_lightning`'s `data`) to pass it; the pipeline then requires it.
        name: The pipeline's name (default "tune-<train component>").

    Returns:
        The pipeline: a KFP `GraphComponent`, for `headwater run`, `kfp.compiler` or as a
        nested pipeline.

    Raises:
        InvalidArgumentError: A bad search space, objective or schedule, or a train
            component tune() cannot wrap; the message says which and why.
    """
    from kfp import dsl

    from headwater.components.hpo.components import (
        complete_trials,
        create_experiment,
        suggest_trials,
    )
    from headwater.components.hpo.experiment import check_schedule

    space = spaces.normalize(search_space)
    if not isinstance(objective, str) or not objective.strip() or objective.startswith("-"):
        raise InvalidArgumentError(
            f"objective must be the name of the metric to optimize (and minimize=True to "
            f"minimize it), got {objective!r}"
        )
    unrolled = rounds if max_rounds is None else max_rounds
    check_schedule(rounds, trials_per_round, unrolled)
    if parallelism is not None and parallelism < 1:
        raise InvalidArgumentError(f"parallelism must be >= 1 (or None for all), got {parallelism}")
    trial = trial_component(
        train_component,
        parameters_input=parameters_input,
        parameter_types=spaces.types(space),
        objective=objective,
    )
    bound = dict(train_args or {})
    declared = {n: i for n, i in (trial.component_spec.inputs or {}).items() if n != "trial"}
    wrapped = inspect.signature(trial.python_func).parameters
    forwarded = _forwarded(declared, bound, inputs)
    signature = inspect.Signature(
        [
            _keyword("rounds", int, rounds),
            _keyword("trials_per_round", int, trials_per_round),
            *(_pipeline_input(wrapped[n], _is_parameter(declared[n].type)) for n in forwarded),
        ],
        return_annotation=_Outputs,
    )
    names = list(signature.parameters)

    def pipeline(*channels: Any) -> _Outputs:
        given = dict(zip(names, channels, strict=True))
        schedule = {k: given.pop(k) for k in SCHEDULE}
        created = create_experiment(
            parameters=space,
            objective=objective,
            minimize=minimize,
            outcome_constraints=list(outcome_constraints),
            parameter_constraints=list(parameter_constraints),
            seed=seed,
            trials_per_round=schedule["trials_per_round"],
            rounds=schedule["rounds"],
            max_rounds=unrolled,
        )
        experiment = created.outputs["experiment"]
        done: Any = None
        for number in range(1, unrolled + 1):
            suggested = suggest_trials(
                experiment=experiment,
                n=schedule["trials_per_round"],
                round_number=number,
                rounds=schedule["rounds"],
            ).set_display_name(f"suggest-round-{number}")
            with dsl.ParallelFor(suggested.outputs["Output"], parallelism=parallelism or 0) as item:
                ran = trial(trial=item, **given, **bound)
            done = complete_trials(
                experiment=suggested.outputs["updated_experiment"],
                results=dsl.Collected(ran.outputs["Output"]),
                round_number=number,
                rounds=schedule["rounds"],
            ).set_display_name(f"complete-round-{number}")
            experiment = done.outputs["updated_experiment"]
        return _Outputs(
            best_parameters=done.outputs["best_parameters"],
            best_objective=done.outputs["best_objective"],
        )

    label = name or f"tune-{trial_label(train_component)}"
    pipeline.__signature__ = signature  # type: ignore[attr-defined]
    pipeline.__name__ = pipeline.__qualname__ = label.replace("-", "_")
    pipeline.__doc__ = (
        f"Tune {trial_label(train_component)} over {', '.join(spaces.names(space))}: "
        f"{'minimize' if minimize else 'maximize'} {objective} with Ax/BoTorch."
    )
    return dsl.pipeline(name=label)(pipeline)


def _forwarded(
    declared: Mapping[str, Any], bound: Mapping[str, Any], inputs: Sequence[str] | None
) -> list[str]:
    """The train inputs the pipeline takes, after checking every required one is given."""
    unknown = sorted((set(bound) | set(inputs or ())) - set(declared))
    if unknown:
        raise InvalidArgumentError(
            f"{', '.join(map(repr, unknown))}: not an input of the train component (its "
            f"inputs: {', '.join(sorted(declared))})"
        )
    if inputs is None:
        # An optional artifact input passed into a ParallelFor loses its optionality in
        # KFP's IR (the loop's own input is required), so it is forwarded only when named.
        forwarded = [
            n
            for n, spec in declared.items()
            if n not in bound and (_is_parameter(spec.type) or not spec.optional)
        ]
    else:
        forwarded = [n for n in declared if n in set(inputs) - set(bound)]
    missing = [
        n
        for n, spec in declared.items()
        if n not in forwarded and n not in bound and not spec.optional and spec.default is None
    ]
    if missing:
        raise InvalidArgumentError(
            f"the train component's input {missing[0]!r} has no default: name it in inputs= "
            f"or give it with train_args={{{missing[0]!r}: ...}}"
        )
    clash = sorted(set(forwarded) & set(SCHEDULE))
    if clash:
        raise InvalidArgumentError(
            f"the train component's input {clash[0]!r} has the name of a tuning pipeline "
            f"input; give it a value with train_args={{{clash[0]!r}: ...}}"
        )
    return forwarded


def _keyword(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


def _pipeline_input(param: inspect.Parameter, is_parameter: bool) -> inspect.Parameter:
    """The wrapper's parameter as a pipeline input: an artifact one required (not Optional)."""
    # Keyword-only: a Signature then accepts a required input after one with a default.
    param = param.replace(kind=inspect.Parameter.KEYWORD_ONLY)
    if is_parameter:
        return param
    kinds = [a for a in typing.get_args(param.annotation) if a is not type(None)]
    annotation = kinds[0] if len(kinds) == 1 else param.annotation
    return param.replace(annotation=annotation, default=inspect.Parameter.empty)


def _is_parameter(kfp_type: str) -> bool:
    from kfp.dsl.types import type_utils

    return bool(type_utils.is_parameter_type(kfp_type))


def trial_label(component: Any) -> str:
    """A component's name as KFP writes it in the IR ("train-quadratic")."""
    return str(getattr(component, "name", "train")).replace("_", "-")
