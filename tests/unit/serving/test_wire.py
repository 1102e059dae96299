"""Parsing request bodies: orjson first, the standard library on anything orjson refuses, so
every body is read (or refused) exactly as `json` would (ADR 15)."""

from __future__ import annotations

import json

import pytest

from headwater.serving import wire
from headwater.serving.errors import InvalidInputError

orjson = pytest.importorskip("orjson")


@pytest.mark.parametrize(
    "body",
    [
        b'{"inputs": [{"name": "input-0", "data": [0.1, 1e-05, 3.141592653589793]}]}',
        b'{"a": 1, "a": 2}',  # the last duplicate wins, as in json
        b'{"x": "\\u00e9\\ud83d\\ude00", "y": null, "z": [true, false]}',
        b'{"big": 123456789012345678901234567890}',  # beyond 64 bits: orjson makes floats
        b'{"low": -9223372036854775809, "max": 18446744073709551615}',
        b'{"nan": NaN, "inf": Infinity, "ninf": -Infinity}',  # json's extensions
        b'{"huge": 1e400}',
    ],
)
def test_bodies_parse_as_json_parses_them(body: bytes) -> None:
    got = wire.parse_json(body)
    expected = json.loads(body)
    assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)


def test_orjson_is_the_fast_path() -> None:
    # What makes the fallback necessary: orjson refuses json's NaN literal.
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(b'{"a": NaN}')
    assert wire._orjson is orjson


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            b"{not json",
            "malformed JSON: Expecting property name enclosed in double quotes at line 1",
        ),
        (b"\xff\xfe", "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    ],
)
def test_bad_bodies_say_what_json_says(body: bytes, said: str) -> None:
    with pytest.raises(InvalidInputError, match=said):
        wire.parse_json(body)
