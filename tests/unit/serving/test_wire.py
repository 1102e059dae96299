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
        b"-123456789012345678901234567890",  # a bare negative one, at the start
        b'{"s": "12345678901234567890123", "n": [1, 2]}',  # digits in a string
        b'{"f": 0.1234567890123456789012, "e": 1e-1234567890123456789012}',  # no integers
    ],
)
def test_bodies_parse_as_json_parses_them(body: bytes) -> None:
    got = wire.parse_json(body)
    expected = json.loads(body)
    assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)


@pytest.mark.parametrize(
    ("body", "long"),
    [
        (b'{"big": 123456789012345678901234567890}', True),
        (b'{"low":-9223372036854775809}', True),
        (b"12345678901234567890", True),
        (b'["12345678901234567890"]', True),  # in a string: only the slower parse
        (b'{"f": 0.0002314434456825256123}', False),  # a float's long fraction: orjson
        (b'{"e": 1e-1234567890123456789, "E": 2E+1234567890123456789}', False),
        (b'{"data": [1, 22, 333, 1234567890123456789.5]}', True),  # 19 integer digits
        (b'{"data": [1.5, -2.25, 3]}', False),
    ],
)
def test_only_bodies_with_long_integers_leave_orjson(body: bytes, long: bool) -> None:
    # A float's 19-digit fraction (json writes many float32 values so) sent whole batches to
    # the standard library's parser, 3-4x slower.
    assert wire._long_integer(body) is long


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
