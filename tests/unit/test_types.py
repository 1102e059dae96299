"""Tests for parameter types: coercion, protobuf-JSON number normalisation, CLI values."""

import math
from typing import Any

import pytest

from headwater.errors import ParameterError, UserError
from headwater.spec.types import PARAMETER_TYPES, coerce, parse_cli_value, protojson


@pytest.mark.parametrize(
    ("value", "parameter_type", "expected"),
    [
        ("hello", "STRING", "hello"),
        ("007", "STRING", "007"),
        ("", "STRING", ""),
        (3, "STRING", "3"),
        ([1, "a"], "STRING", '[1,"a"]'),
        ({"k": True}, "STRING", '{"k":true}'),
        (3, "NUMBER_INTEGER", 3),
        (3.0, "NUMBER_INTEGER", 3),
        ("42", "NUMBER_INTEGER", 42),
        ("-7", "NUMBER_INTEGER", -7),
        (1.5, "NUMBER_DOUBLE", 1.5),
        (2, "NUMBER_DOUBLE", 2.0),
        ("0.25", "NUMBER_DOUBLE", 0.25),
        ("3", "NUMBER_DOUBLE", 3.0),
        (True, "BOOLEAN", True),
        (False, "BOOLEAN", False),
        ("true", "BOOLEAN", True),
        ("False", "BOOLEAN", False),
        (" TRUE ", "BOOLEAN", True),
        ([1, 2], "LIST", [1, 2]),
        ([1.0, 2.5], "LIST", [1, 2.5]),
        ((1, 2), "LIST", [1, 2]),
        ("[1, 2]", "LIST", [1, 2]),
        ([], "LIST", []),
        ({"a": 1.0, "b": [2.0]}, "STRUCT", {"a": 1, "b": [2]}),
        ('{"a": 1}', "STRUCT", {"a": 1}),
        ({}, "STRUCT", {}),
        ({"state": "COMPLETE"}, "TASK_FINAL_STATUS", {"state": "COMPLETE"}),
        ({"x": 1.0}, "TASK_CONFIG", {"x": 1.0}),
    ],
    ids=lambda v: repr(v) if not isinstance(v, str) else v,
)
def test_coerce(value: Any, parameter_type: str, expected: Any) -> None:
    result = coerce(value, parameter_type, name="p")
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize("parameter_type", PARAMETER_TYPES)
def test_coerce_passes_none_through(parameter_type: str) -> None:
    assert coerce(None, parameter_type, name="p") is None


def test_coerce_keeps_list_elements_int() -> None:
    values = coerce([1.0, 2.0, [3.0]], "LIST", name="p")
    assert values == [1, 2, [3]]
    assert [type(v) for v in values[:2]] == [int, int]
    assert type(values[2][0]) is int


@pytest.mark.parametrize(
    ("value", "parameter_type", "expected"),
    [
        (1.5, "NUMBER_INTEGER", "int"),
        ("abc", "NUMBER_INTEGER", "int"),
        ("1.5", "NUMBER_INTEGER", "int"),
        (True, "NUMBER_INTEGER", "int"),
        ([1], "NUMBER_INTEGER", "int"),
        ("abc", "NUMBER_DOUBLE", "float"),
        (False, "NUMBER_DOUBLE", "float"),
        ({"a": 1}, "NUMBER_DOUBLE", "float"),
        ("yes", "BOOLEAN", "bool"),
        (1, "BOOLEAN", "bool"),
        ("not json", "LIST", "list"),
        ({"a": 1}, "LIST", "list"),
        ('{"a": 1}', "LIST", "list"),
        (3, "LIST", "list"),
        ("[1]", "STRUCT", "dict"),
        ([1], "STRUCT", "dict"),
        ("{", "STRUCT", "dict"),
    ],
    ids=lambda v: repr(v) if not isinstance(v, str) else v,
)
def test_coerce_rejects_mistyped_values(value: Any, parameter_type: str, expected: str) -> None:
    with pytest.raises(ParameterError) as info:
        coerce(value, parameter_type, name="learning_rate")
    message = str(info.value)
    assert "'learning_rate'" in message
    assert f"expects {expected} ({parameter_type})" in message
    assert repr(value) in message
    assert isinstance(info.value, UserError)
    assert info.value.__cause__ is not None


def test_coerce_names_what_the_value_is() -> None:
    with pytest.raises(ParameterError, match=r"^task 'train' input 'epochs' expects int"):
        coerce("many", "NUMBER_INTEGER", name="epochs", what="task 'train' input")


@pytest.mark.parametrize(
    "value",
    [2**63 - 1, -(2**63), "9223372036854775807", float(2**62)],
    ids=["max", "min", "max-text", "float"],
)
def test_coerce_accepts_every_int64(value: Any) -> None:
    assert coerce(value, "NUMBER_INTEGER", name="n") == int(value)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (2**63, "9223372036854775808"),
        (-(2**63) - 1, "-9223372036854775809"),
        ("123456789012345678901234567890", "'123456789012345678901234567890'"),
        (1e30, "1e+30"),
        (10**5000, "an integer of 16610 bits"),
    ],
    ids=["max+1", "min-1", "30-digits", "float", "huge"],
)
def test_coerce_refuses_integers_beyond_64_bits(value: Any, shown: str) -> None:
    with pytest.raises(ParameterError) as info:
        coerce(value, "NUMBER_INTEGER", name="n")
    message = str(info.value)
    assert f"parameter 'n' expects int (NUMBER_INTEGER) but got {shown}" in message
    assert "KFP integers are 64-bit (-9223372036854775808 to 9223372036854775807)" in message


def test_coerce_refuses_a_double_too_large_for_a_float() -> None:
    with pytest.raises(ParameterError, match=r"expects float \(NUMBER_DOUBLE\)"):
        coerce(10**400, "NUMBER_DOUBLE", name="x")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, 1),
        (-2.0, -2),
        (1.5, 1.5),
        (1e20, 1e20),
        (float("inf"), float("inf")),
        (True, True),
        (None, None),
        ("1.0", "1.0"),
        (7, 7),
        ([1.0, [2.0, 2.5]], [1, [2, 2.5]]),
        ((1.0, 2.0), [1, 2]),
        ({"a": 3.0, 1: "x"}, {"a": 3, "1": "x"}),
    ],
    ids=[
        "integral",
        "negative",
        "fraction",
        "beyond-2**53",
        "inf",
        "bool",
        "none",
        "string",
        "int",
        "nested-list",
        "tuple",
        "dict",
    ],
)
def test_protojson(value: Any, expected: Any) -> None:
    result = protojson(value)
    assert result == expected
    assert type(result) is type(expected)


def test_protojson_leaves_nan_alone() -> None:
    result = protojson(float("nan"))
    assert isinstance(result, float)
    assert math.isnan(result)


@pytest.mark.parametrize(
    ("text", "parameter_type", "expected"),
    [
        ("007", "STRING", "007"),
        ("true", "STRING", "true"),
        ("[1, 2]", "STRING", "[1, 2]"),
        ("  spaced ", "STRING", "  spaced "),
        ("007", None, "007"),
        ("42", "NUMBER_INTEGER", 42),
        ("4.5", "NUMBER_DOUBLE", 4.5),
        ("true", "BOOLEAN", True),
        ("[1, 2]", "LIST", [1, 2]),
        ('{"a": 1}', "STRUCT", {"a": 1}),
        ("hello", None, "hello"),
        ("null", None, None),
        ("not json", "LIST", "not json"),
    ],
    ids=[
        "string-keeps-zeros",
        "string-keeps-true",
        "string-keeps-json",
        "string-keeps-spaces",
        "untyped-leading-zeros",
        "int",
        "double",
        "bool",
        "list",
        "struct",
        "untyped-text",
        "null",
        "bad-json-stays-text",
    ],
)
def test_parse_cli_value(text: str, parameter_type: str | None, expected: Any) -> None:
    result = parse_cli_value(text, parameter_type)
    assert result == expected
    assert type(result) is type(expected)


def test_cli_value_then_coerce_reports_the_parameter() -> None:
    value = parse_cli_value("ten", "NUMBER_INTEGER")
    with pytest.raises(ParameterError, match="'epochs' expects int"):
        coerce(value, "NUMBER_INTEGER", name="epochs")
