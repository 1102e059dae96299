"""Tests for bind_arguments: checking pipeline arguments against the root's inputs."""

from typing import Any, Optional

import pytest
from kfp import dsl
from kfp.dsl import Dataset, Input

from headwater.engine.runner import bind_arguments
from headwater.errors import ParameterError
from headwater.spec.ir import PipelineIR
from headwater.spec.loader import ir_from_component


@dsl.component(base_image="python:3.11")
def show(data: Input[Dataset], n: int, ratio: float, flag: bool, tags: list, conf: dict):
    print(data, n, ratio, flag, tags, conf)


@dsl.pipeline
def typed(
    data: Input[Dataset],
    n: int,
    ratio: float = 0.5,
    flag: bool = True,
    tags: list = ["a"],  # noqa: B006 - KFP default
    conf: dict = {"lr": 1.0},  # noqa: B006 - KFP default
    note: Optional[str] = None,  # noqa: UP045 - KFP does not read `str | None`
):
    show(data=data, n=n, ratio=ratio, flag=flag, tags=tags, conf=conf)


@pytest.fixture(scope="module")
def ir() -> PipelineIR:
    return ir_from_component(typed)


def test_defaults_fill_missing_arguments(ir: PipelineIR) -> None:
    bound = bind_arguments(ir, {"n": 3})
    assert bound == {"n": 3, "ratio": 0.5, "flag": True, "tags": ["a"], "conf": {"lr": 1}}
    assert type(bound["conf"]["lr"]) is int  # protojson: the IR's 1.0 comes back as 1


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"n": "7"}, {"n": 7}),
        ({"n": 7.0}, {"n": 7}),
        ({"n": 1, "ratio": 2}, {"ratio": 2.0}),
        ({"n": 1, "flag": "false"}, {"flag": False}),
        ({"n": 1, "tags": "[1, 2]"}, {"tags": [1, 2]}),
        ({"n": 1, "note": "hi"}, {"note": "hi"}),
    ],
    ids=["int-from-str", "int-from-float", "double-from-int", "bool-from-str", "list", "optional"],
)
def test_arguments_are_coerced(
    ir: PipelineIR, arguments: dict[str, Any], expected: dict[str, Any]
) -> None:
    bound = bind_arguments(ir, arguments)
    for name, value in expected.items():
        assert bound[name] == value
        assert type(bound[name]) is type(value)


def test_optional_parameter_without_default_is_left_out(ir: PipelineIR) -> None:
    assert "note" not in bind_arguments(ir, {"n": 1})


def test_artifact_inputs_are_not_unknown_parameters(ir: PipelineIR) -> None:
    assert "data" not in bind_arguments(ir, {"n": 1, "data": "/tmp/x.csv"})


def test_unknown_parameter_lists_the_valid_ones(ir: PipelineIR) -> None:
    with pytest.raises(ParameterError) as info:
        bind_arguments(ir, {"n": 1, "epochs": 3})
    message = str(info.value)
    assert "unknown parameter 'epochs' for pipeline 'typed'" in message
    assert "(parameters: conf, flag, n, note, ratio, tags)" in message


def test_missing_required_parameter_says_how_to_pass_it(ir: PipelineIR) -> None:
    with pytest.raises(ParameterError, match=r"missing required parameter 'n'.*--param n=VALUE"):
        bind_arguments(ir, {})


def test_mistyped_argument_names_the_parameter(ir: PipelineIR) -> None:
    with pytest.raises(ParameterError, match=r"parameter 'ratio' expects float"):
        bind_arguments(ir, {"n": 1, "ratio": "fast"})
