"""Tests for trigger conditions: the CEL the KFP compiler emits, compiled and evaluated."""

from typing import Any

import pytest
from kfp import dsl

from headwater.errors import ConditionError
from headwater.spec.cel import compile_condition
from headwater.spec.loader import ir_from_component


def p(name: str) -> str:
    return f"inputs.parameter_values['pipelinechannel--{name}']"


X_GT_5 = f"int({p('x')}) > 5"
X_EQ_3 = f"int({p('x')}) == 3"


@pytest.mark.parametrize(
    ("expression", "values", "expected"),
    [
        (X_GT_5, {"x": 9}, True),
        (X_GT_5, {"x": 5}, False),
        (X_GT_5, {"x": 9.0}, True),
        (f"!({X_GT_5}) && {X_EQ_3}", {"x": 3}, True),
        (f"!({X_GT_5}) && {X_EQ_3}", {"x": 9}, False),
        (f"!({X_GT_5}) && !({X_EQ_3})", {"x": 1}, True),
        (f"!({X_GT_5}) && !({X_EQ_3})", {"x": 3}, False),
        (f"{p('r')} < double(1)", {"r": 0.5}, True),
        (f"{p('r')} < double(1)", {"r": 1}, False),
        (f"{p('r')} >= 0.5", {"r": 0.5}, True),
        (f"{p('r')} == 0.5", {"r": 0.25}, False),
        (f"double(int({p('x')})) != 2.5", {"x": 2}, True),
        (f"int({p('a')}) <= int({p('x')})", {"a": 1, "x": 1}, True),
        (f"int({p('a')}) <= int({p('x')})", {"a": 2, "x": 1}, False),
        (f"{p('s')} == 'heads'", {"s": "heads"}, True),
        (f"{p('s')} == 'heads'", {"s": "tails"}, False),
        (f"{p('s')} != 'y'", {"s": "x"}, True),
        (f'{p("s")} == "double quoted"', {"s": "double quoted"}, True),
        (f"{p('b')} == true", {"b": True}, True),
        (f"{p('b')} == false", {"b": True}, False),
        (f"{p('b')} == false", {"b": False}, True),
        (f"{p('x')} == 9.0", {"x": 9}, True),
    ],
    ids=[
        "int-gt",
        "int-gt-boundary",
        "int-of-double",
        "elif-taken",
        "elif-untaken",
        "else-taken",
        "else-untaken",
        "double-cast",
        "double-cast-untaken",
        "double-ge",
        "double-eq",
        "double-of-int-ne",
        "two-channels",
        "two-channels-untaken",
        "string-eq",
        "string-ne-value",
        "string-ne",
        "double-quoted-string",
        "bool-true",
        "bool-false-untaken",
        "bool-false",
        "ints-are-doubles",
    ],
)
def test_compiler_emitted_conditions(
    expression: str, values: dict[str, Any], expected: bool
) -> None:
    condition = compile_condition(expression, task="condition-1")
    params = {f"pipelinechannel--{k}": v for k, v in values.items()}
    assert condition.evaluate(params) is expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (f"{p('x')} > 1.0 || {p('s')} == 'b'", True),
        (f"{p('s')} in ['a', 'b']", True),
        (f"size({p('items')}) == 3", True),
        (f"{p('items')}[0] == 1.0", True),
        (f"{p('cfg')}.lr < 0.5", True),
        (f"{p('cfg')}['n'] == 2.0", True),
        (f"{p('s')}.startsWith('b')", True),
        (f"!({p('x')} > 0.0)", False),
    ],
    ids=["or", "in", "size", "index", "field", "key", "method", "not"],
)
def test_hand_written_cel(expression: str, expected: bool) -> None:
    params = {
        "pipelinechannel--x": 1,
        "pipelinechannel--s": "b",
        "pipelinechannel--items": [1, 2, 3],
        "pipelinechannel--cfg": {"lr": 0.1, "n": 2},
    }
    assert compile_condition(expression, task="t").evaluate(params) is expected


@dsl.component(base_image="python:3.11")
def echo(text: str) -> str:
    return text


@dsl.component(base_image="python:3.11")
def num() -> int:
    return 1


@dsl.pipeline
def conditions(x: int = 1, r: float = 0.5, s: str = "a", b: bool = True):
    n = num()
    with dsl.If(x > 5):
        echo(text="x>5")
    with dsl.Elif(x == 3):
        echo(text="x==3")
    with dsl.Else():
        echo(text="else")
    with dsl.If(r < 1):
        echo(text="r<1")
    with dsl.If(s == "go"):
        echo(text="s==go")
    with dsl.If(b == False):  # noqa: E712 - a KFP condition, not a Python comparison
        echo(text="not b")
    with dsl.If(n.output <= x):
        echo(text="n<=x")


def compiled_conditions() -> dict[str, Any]:
    """Each condition the compiler emitted for `conditions`, keyed by the text its task echoes."""
    ir = ir_from_component(conditions)
    found = {}
    for comp in [ir.root, *ir.components.values()]:
        if comp.dag is None:
            continue
        for task in comp.dag.tasks.values():
            if task.condition is None:
                continue
            (inner,) = ir.component(task.component).dag.tasks.values()  # type: ignore[union-attr]
            text = inner.parameter_inputs["text"]["runtimeValue"]["constant"]
            found[text] = task.condition
    return found


@pytest.mark.parametrize(
    ("values", "taken"),
    [
        (
            {"x": 9, "r": 0.5, "s": "go", "b": True, "num-Output": 1},
            {"x>5", "r<1", "s==go", "n<=x"},
        ),
        ({"x": 3, "r": 2.0, "s": "no", "b": False, "num-Output": 4}, {"x==3", "not b"}),
        ({"x": 0, "r": 1.0, "s": "go", "b": True, "num-Output": 0}, {"else", "s==go", "n<=x"}),
    ],
    ids=["if", "elif", "else"],
)
def test_conditions_from_the_compiler(values: dict[str, Any], taken: set[str]) -> None:
    found = compiled_conditions()
    assert set(found) == {"x>5", "x==3", "else", "r<1", "s==go", "not b", "n<=x"}
    params = {f"pipelinechannel--{k}": v for k, v in values.items()}
    assert {text for text, cond in found.items() if cond.evaluate(params)} == taken


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "column"),
    [
        ("inputs.parameter_values['x'] >", None),
        ("inputs.parameter_values['x'] === 1", 32),
        ("(1 == 1", None),
        ("inputs.parameter_values['s'] == 'it's'", 37),
    ],
    ids=["dangling", "triple-equals", "unbalanced", "unescaped-quote"],
)
def test_compile_rejects_bad_cel(expression: str, column: int | None) -> None:
    with pytest.raises(ConditionError) as info:
        compile_condition(expression, task="condition-4")
    message = str(info.value)
    assert message.startswith("task 'condition-4' has a condition that is not valid CEL")
    assert repr(expression) in message
    if column is not None:
        assert f"at column {column}" in message


def test_compiler_output_with_a_quote_in_a_string_is_reported() -> None:
    # The KFP compiler does not escape string literals, so this compiles to invalid CEL.
    @dsl.pipeline
    def quoted(s: str):
        with dsl.If(s == "it's"):
            echo(text="quoted")

    with pytest.raises(ConditionError, match=r"task 'condition-1' has a condition"):
        ir_from_component(quoted)


@pytest.mark.parametrize(
    ("expression", "values", "words"),
    [
        (f"{p('x')} + 1.0", {"x": 1}, "not a bool"),
        (f"{p('s')}", {"s": "a"}, "not a bool"),
        (f"int({p('x')}) > 5", {}, "failed"),
        (f"int({p('s')}) > 5", {"s": "abc"}, "failed"),
        (f"{p('s')} > 5", {"s": "abc"}, "failed"),
    ],
    ids=["number", "string", "missing-parameter", "bad-int-cast", "type-mismatch"],
)
def test_evaluate_errors(expression: str, values: dict[str, Any], words: str) -> None:
    condition = compile_condition(expression, task="t")
    params = {f"pipelinechannel--{k}": v for k, v in values.items()}
    with pytest.raises(ConditionError) as info:
        condition.evaluate(params)
    assert words in str(info.value)
    assert repr(expression) in str(info.value)


def test_condition_evaluates_repeatedly_with_different_values() -> None:
    condition = compile_condition(X_GT_5, task="t")
    results = [condition.evaluate({"pipelinechannel--x": x}) for x in (1, 6, 2, 7)]
    assert results == [False, True, False, True]
    assert condition.expression == X_GT_5


@pytest.mark.parametrize(
    "expression",
    ["(" * 3000 + "true" + ")" * 3000, "!" * 5000 + "true", "1 == 1 && " * 2000 + "true"],
    ids=["parentheses", "negations", "long-and-chain"],
)
def test_compile_refuses_deep_expressions_in_one_error(expression: str) -> None:
    with pytest.raises(ConditionError, match="task 'gate' has a condition that nests too deeply"):
        compile_condition(expression, task="gate")


def test_nesting_the_compiler_writes_still_compiles() -> None:
    expression = " && ".join(["(" * 20 + "1 == 1" + ")" * 20] * 30)
    assert compile_condition(expression, task="gate").evaluate({})
