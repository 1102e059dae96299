"""The declarative transform: what it does to raw rows, its JSON, and what a reader refuses."""

from __future__ import annotations

import json

import numpy as np
import pytest

from headwater.errors import UserError
from headwater.models.transform import FORMAT, Derived, Transform, dumps, loads

SPEC = Transform(
    inputs=("a", "b", "c"),
    fill={"b": 0.1},
    derived=(
        Derived("total", "sum", ("a", "b")),
        Derived("positive", "count_positive", ("a", "c")),
    ),
)


def test_fill_comes_first_then_the_derived_features_in_order() -> None:
    rows = np.array([[1.5, np.nan, -2.0], [np.nan, 2.0, 3.0]], dtype=np.float32)
    out = SPEC.apply(rows)
    assert SPEC.outputs == ("a", "b", "c", "total", "positive")
    assert out.dtype == np.float32 and out.shape == (2, 5)
    b = np.float32(0.1)  # a fill value becomes the float32 pandas' fillna writes
    expected = [[1.5, b, -2.0, np.float32(1.5 + float(b)), 1], [np.nan, 2.0, 3.0, 2.0, 1]]
    np.testing.assert_array_equal(out, np.array(expected, dtype=np.float32))
    np.testing.assert_array_equal(rows[0, 1], np.nan)  # the caller's rows are left alone


def test_a_derived_feature_named_like_an_input_replaces_it() -> None:
    spec = Transform(inputs=("a", "b"), derived=(Derived("b", "sum", ("a", "b")),))
    assert spec.outputs == ("a", "b")
    np.testing.assert_array_equal(spec.apply(np.array([[1.0, 2.0]])), [[1.0, 3.0]])


def test_the_json_round_trips_and_is_versioned() -> None:
    text = dumps(SPEC)
    assert json.loads(text)["format"] == FORMAT == "headwater.transform/1"
    assert loads(text, where="x") == SPEC


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "headwater.transform/2"}, r"format 'headwater.transform/2' is not one"),
        ({"inputs": []}, r"'inputs' must be a non-empty list of column names"),
        ({"fill": {"z": 1.0}}, r"'fill' must map input columns to numbers"),
        ({"derived": [{"name": "d", "op": "mean", "columns": ["a"]}]}, r"op 'mean'; known ops"),
        ({"derived": [{"name": "d", "op": "sum", "columns": ["z"]}]}, r"these are not: \['z'\]"),
    ],
    ids=["newer-format", "no-inputs", "fill-unknown-column", "unknown-op", "unknown-column"],
)
def test_a_reader_refuses_what_it_cannot_apply_naming_it(
    change: dict[str, object], message: str
) -> None:
    data = {**SPEC.to_json(), **change}
    with pytest.raises(UserError, match=rf"^model/_transform.json: transform .*{message}"):
        loads(json.dumps(data), where="model/_transform.json")


def test_rows_of_another_width_are_a_value_error() -> None:
    with pytest.raises(ValueError, match=r"raw rows have 3 columns \(a, b, c, \.\.\.\); got"):
        SPEC.apply(np.zeros((1, 5), dtype=np.float32))
