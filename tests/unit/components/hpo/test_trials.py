"""The trial wrapper: a train component whose failure is a value, built from its own source."""

# No `from __future__ import annotations`: KFP reads the components' annotations as objects.
from pathlib import Path
from typing import Any

import pytest
from kfp import dsl
from kfp.dsl import Model, Output

from headwater.errors import InvalidArgumentError
from headwater.hpo import trial_component

IMAGE = "python:3.11-slim"


@dsl.component(base_image=IMAGE, packages_to_install=["numpy"])
def train(
    model: Output[Model],
    scale: float,
    hyperparameters: dict = {},  # noqa: B006  (KFP reads a literal)
    bias: float = 0.0,
) -> float:
    if hyperparameters["x"] < 0:
        raise ValueError(f"x={hyperparameters['x']} is negative")
    if not isinstance(hyperparameters["n"], int):
        raise TypeError("n is not an int")
    model.metadata["x"] = hyperparameters["x"]
    return scale * hyperparameters["x"] + bias


@dsl.component(base_image=IMAGE)
def metrics(hyperparameters: dict = {}) -> dict:  # noqa: B006
    return {"loss": hyperparameters["x"], "size": float("inf") if hyperparameters["x"] > 1 else 3}


def _call(component: Any, x: float, **kwargs: Any) -> dict[str, Any]:
    result = component.python_func(
        trial={"trial_index": 4, "parameters": {"x": x, "n": 2.0}}, **kwargs
    )
    assert isinstance(result, dict)
    return result


def test_a_trial_returns_its_objective_or_its_error_as_a_value() -> None:
    wrapped = trial_component(train, parameter_types={"x": "float", "n": "int"})
    model = Model(uri="memory://model")
    assert _call(wrapped, 0.5, model=model, scale=2.0, bias=1.0) == {
        "trial_index": 4,
        "objective": 2.0,
    }
    assert model.metadata == {"x": 0.5}
    assert _call(wrapped, -1.0, model=model, scale=2.0) == {
        "trial_index": 4,
        "error": "ValueError: x=-1.0 is negative",
    }


def test_ints_are_made_ints_again_only_when_the_space_says_so() -> None:
    untyped = trial_component(train)
    assert _call(untyped, 0.5, model=Model(uri="memory://m"), scale=1.0) == {
        "trial_index": 4,
        "error": "TypeError: n is not an int",
    }


def test_a_dict_of_metrics_is_the_result_and_a_non_finite_one_an_error() -> None:
    wrapped = trial_component(metrics)
    assert _call(wrapped, 0.5) == {"trial_index": 4, "objective": {"loss": 0.5, "size": 3}}
    assert _call(wrapped, 2.0) == {"trial_index": 4, "error": "size is inf, not a finite number"}


def test_a_failed_trial_or_one_without_its_objective_marks_its_outcome_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marked = tmp_path / "failed-outcome.txt"
    monkeypatch.setenv("HEADWATER_TASK_OUTCOME", str(marked))
    wrapped = trial_component(metrics, objective="size")
    assert _call(wrapped, 0.5) == {"trial_index": 4, "objective": {"loss": 0.5, "size": 3}}
    assert not marked.exists()
    lacking = trial_component(metrics, objective="accuracy")
    # The metrics still go on, for complete_trials to name them if no trial has the objective.
    assert _call(lacking, 0.5) == {"trial_index": 4, "objective": {"loss": 0.5, "size": 3}}
    assert (
        marked.read_text() == "did not report the objective 'accuracy' (reported ['loss', 'size'])"
    )
    assert _call(wrapped, 2.0) == {"trial_index": 4, "error": "size is inf, not a finite number"}
    assert marked.read_text() == "size is inf, not a finite number"


def test_the_wrapper_keeps_the_train_components_interface_image_and_packages() -> None:
    wrapped = trial_component(train)
    spec = wrapped.component_spec
    assert list(spec.inputs) == ["trial", "scale", "bias"]
    assert spec.inputs["trial"].type == "Dict" and spec.outputs["Output"].type == "Dict"
    assert spec.outputs["model"].type.startswith("system.Model")
    original = train.component_spec.implementation.container
    container = spec.implementation.container
    assert container.image == original.image
    assert container.command[:-1] == original.command[:-1]  # the pip prelude of numpy
    assert container.command[-1].startswith(original.command[-1].rstrip())
    assert (
        "def train_trial(trial: dict, model: Output[Model], scale: float, bias: float = 0.0)"
        in (container.command[-1])
    )
    assert container.args[-2:] == ["--function_to_execute", "train_trial"]
    # The train component is untouched.
    assert train.component_spec.implementation.container.args[-1] == "train"


@dsl.component(base_image=IMAGE)
def no_dict(x: float = 0.0) -> float:
    return x


@dsl.component(base_image=IMAGE)
def two_outputs(hyperparameters: dict = {}) -> dsl.Metrics:  # type: ignore[valid-type]  # noqa: B006
    return dsl.Metrics()


@dsl.component(base_image=IMAGE)
def takes_trial(trial: int, hyperparameters: dict = {}) -> float:  # noqa: B006
    return 0.0


@dsl.container_component
def container(hyperparameters: dict = {}):  # type: ignore[no-untyped-def]  # noqa: B006
    return dsl.ContainerSpec(image="alpine", command=["echo", hyperparameters])


@pytest.mark.parametrize(
    ("component", "message"),
    [
        (container, "tune() needs a lightweight Python component (@dsl.component)"),
        (no_dict, "has no dict input 'hyperparameters' for the trial's parameters"),
        (two_outputs, "must return its objective (a float, or a dict of metrics)"),
        (takes_trial, "has an input named 'trial'"),
    ],
    ids=["container", "no-dict-input", "artifact-output", "input-named-trial"],
)
def test_a_component_that_cannot_be_a_trial_is_refused(component: Any, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message.replace("(", r"\(").replace(")", r"\)")):
        trial_component(component)
