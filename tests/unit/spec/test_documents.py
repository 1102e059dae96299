"""Documents from outside are plain data: what JSON holds and Python can read, and no more."""

from __future__ import annotations

import pytest

from headwater.errors import InvalidArgumentError, UserError
from headwater.spec.documents import read_json


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ('{"x": NaN}', "NaN is not a JSON value"),
        ('{"x": "a\\u0000"}', "a NUL character at x"),
        ('{"x": "\\ud800"}', "lone surrogate"),
        ("[" * 101 + "]" * 101, "deeper than 100 levels"),
        ('{"x": 1' + "0" * 4300 + "}", "an integer of more than 4300 digits"),
        ('{"x": -1' + "0" * 5000 + "}", "send it as a string"),
        ("{nope", "is not JSON"),
    ],
    ids=["nan", "nul", "surrogate", "deep", "long-int", "long-negative-int", "not-json"],
)
def test_what_json_or_python_cannot_hold_is_one_user_error(raw: str, named: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        read_json(raw.encode(), what="the body")
    assert isinstance(caught.value, UserError)
    message = str(caught.value)
    assert message.startswith("the body") and named in message and "\n" not in message


def test_an_integer_as_long_as_python_reads_is_kept() -> None:
    assert read_json('{"x": ' + "9" * 4300 + "}", what="b") == {"x": int("9" * 4300)}
