"""`tune` builds the IR of Bayesian rounds: what it unrolls, what it takes, what it refuses."""

# No `from __future__ import annotations`: KFP reads the components' annotations as objects.
from typing import Any

import pytest
from kfp import compiler, dsl
from kfp.dsl import Dataset, Input, Output
from kfp.pipeline_spec import pipeline_spec_pb2

from headwater.errors import InvalidArgumentError
from headwater.hpo import tune

IMAGE = "python:3.11-slim"
SPACE = [
    {"name": "x", "bounds": [0.0, 1.0], "parameter_type": "float"},
    {"name": "w", "bounds": [4, 64], "parameter_type": "int"},
]


@dsl.component(base_image=IMAGE)
def quadratic(hyperparameters: dict = {}, center: float = 0.3) -> float:  # noqa: B006
    return (hyperparameters["x"] - center) ** 2


@dsl.component(base_image=IMAGE)
def make_data(data: Output[Dataset]) -> None:
    with open(data.path, "w") as fh:
        fh.write("1,2,3")


@dsl.component(base_image=IMAGE)
def fit(
    module: str,
    data: Input[Dataset] = None,  # type: ignore[assignment]
    extra: Input[Dataset] = None,  # type: ignore[assignment]
    hyperparameters: dict = {},  # noqa: B006
    rounds: int = 10,
) -> float:
    return 0.0


def _ir(pipeline: Any) -> Any:
    return pipeline.pipeline_spec


def test_rounds_are_unrolled_each_a_loop_of_trials_between_suggest_and_complete() -> None:
    pipeline = tune(quadratic, SPACE, "loss", minimize=True, rounds=3, trials_per_round=2)
    assert pipeline.name == "tune-quadratic"
    ir = _ir(pipeline)
    tasks = ir.root.dag.tasks
    assert sorted(t for t in tasks if not t.startswith("for-loop")) == [
        "complete-trials",
        "complete-trials-2",
        "complete-trials-3",
        "create-experiment",
        "suggest-trials",
        "suggest-trials-2",
        "suggest-trials-3",
    ]
    # Round 2 is suggested from round 1's completed experiment, and so on.
    second = tasks["suggest-trials-2"].inputs.artifacts["experiment"].task_output_artifact
    assert second.producer_task == "complete-trials"
    kinds = pipeline_spec_pb2.ParameterType.ParameterTypeEnum.Name
    assert {
        n: kinds(p.parameter_type) for n, p in ir.root.input_definitions.parameters.items()
    } == {
        "rounds": "NUMBER_INTEGER",
        "trials_per_round": "NUMBER_INTEGER",
        "center": "NUMBER_DOUBLE",
    }
    defaults = ir.root.input_definitions.parameters
    assert defaults["rounds"].default_value.number_value == 3
    assert defaults["trials_per_round"].default_value.number_value == 2
    outputs = ir.root.dag.outputs.parameters
    assert {n: o.value_from_parameter.producer_subtask for n, o in outputs.items()} == {
        "best_parameters": "complete-trials-3",
        "best_objective": "complete-trials-3",
    }


def test_max_rounds_unrolls_more_and_train_args_bind_constants() -> None:
    pipeline = tune(quadratic, SPACE, "loss", rounds=2, max_rounds=4, train_args={"center": 0.5})
    ir = _ir(pipeline)
    assert "complete-trials-4" in ir.root.dag.tasks
    assert set(ir.root.input_definitions.parameters) == {"rounds", "trials_per_round"}
    create = ir.root.dag.tasks["create-experiment"].inputs.parameters
    assert create["max_rounds"].runtime_value.constant.number_value == 4


def test_it_compiles_and_nests_with_an_artifact_for_every_trial(tmp_path: Any) -> None:
    tuned = tune(fit, SPACE, "acc", train_args={"module": "m:M"}, inputs=["data"])
    # An optional artifact input is taken only when named, and then required.
    assert set(_ir(tuned).root.input_definitions.artifacts) == {"data"}

    @dsl.pipeline(name="outer")
    def outer() -> float:
        made = make_data()
        return tuned(data=made.outputs["data"]).outputs["best_objective"]  # type: ignore[no-any-return]

    compiler.Compiler().compile(outer, str(tmp_path / "outer.yaml"))
    assert "comp-tune-fit" in (tmp_path / "outer.yaml").read_text()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rounds": 0}, "rounds must be a whole number >= 1, got 0"),
        ({"trials_per_round": 0}, "trials_per_round must be a whole number >= 1, got 0"),
        ({"rounds": 3, "max_rounds": 2}, "rounds=3, but this pipeline was built with at most 2"),
        ({"objective": "-loss"}, "objective must be the name of the metric to optimize"),
        ({"parallelism": 0}, "parallelism must be >= 1"),
        ({"train_args": {"centre": 1.0}}, "'centre': not an input of the train component"),
        (
            {"search_space": [{"name": "x", "bounds": [1, 0], "parameter_type": "float"}]},
            "search space: parameter 'x' has bounds [1, 0]",
        ),
        ({"parameters_input": "params"}, "has no dict input 'params'"),
    ],
    ids=[
        "no-rounds",
        "no-trials",
        "beyond-max",
        "minus",
        "no-parallelism",
        "unknown-train-arg",
        "bad-space",
        "no-dict-input",
    ],
)
def test_bad_arguments_are_refused_when_the_pipeline_is_built(
    kwargs: dict[str, Any], message: str
) -> None:
    args = {"search_space": SPACE, "objective": "loss", **kwargs}
    with pytest.raises(InvalidArgumentError) as caught:
        tune(quadratic, args.pop("search_space"), args.pop("objective"), **args)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"inputs": ["data"]}, "the train component's input 'module' has no default"),
        (
            {"train_args": {"module": "m:M"}, "inputs": ["data", "rounds"]},
            "the train component's input 'rounds' has the name of a tuning pipeline input",
        ),
    ],
    ids=["required-input", "input-named-rounds"],
)
def test_train_inputs_that_cannot_be_pipeline_inputs_are_named(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        tune(fit, SPACE, "acc", **kwargs)
