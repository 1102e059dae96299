"""Masking secret values: whole texts and bytes, and streams cut anywhere."""

from __future__ import annotations

import itertools
import json
import random

import pytest

from headwater.platform.masking import MIN_LENGTH, Masker, maskable


def streamed(masker: Masker, chunks: list[bytes]) -> bytes:
    stream = masker.stream()
    return b"".join(stream.feed(chunk) for chunk in chunks) + stream.close()


@pytest.mark.parametrize(
    ("values", "text", "masked"),
    [
        (["hunter2-pw"], "pw=hunter2-pw; again hunter2-pw.", "pw=***; again ***."),
        (["abcd", "abcdef"], "x abcdef y abcd", "x *** y ***"),
        (["secret1", "ret1-more"], "a secret1-more b", "a *** b"),
        (["abab"], "ababab", "***"),
        (["abcd", "efgh"], "abcdefgh", "******"),
        (["abc", "  ", "wxyz"], "abc wxyz", "abc ***"),
    ],
    ids=[
        "every-occurrence",
        "longest-first",
        "overlapping-values",
        "overlapping-self",
        "adjacent",
        "too-short",
    ],
)
def test_mask_replaces_every_place_a_value_occurs(
    values: list[str], text: str, masked: str
) -> None:
    masker = Masker(values)

    assert masker.mask(text) == masked
    assert masker.mask_bytes(text.encode()) == masked.encode()


def test_bytes_that_are_not_utf8_are_masked_in_bytes_and_in_text_as_the_task_sees_them() -> None:
    value = b"pass\xffword"
    masker = Masker([value])

    assert masker.mask_bytes(b"[" + value + b"]") == b"[***]"
    as_env = value.decode("utf-8", "surrogateescape")  # what apply_platform puts in $ENV
    assert masker.mask(f"[{as_env}]") == "[***]"


@pytest.mark.parametrize(
    "shown",
    [
        "line-two-secret",  # one line of a multi-line value
        json.dumps("ünïcode\nline-two-secret"),  # ensure_ascii: \u00fc..., \n
        json.dumps("ünïcode\nline-two-secret", ensure_ascii=False),
        repr("ünïcode\nline-two-secret"),  # as a traceback shows a str argument
    ],
    ids=["a-line", "json", "json-unicode", "repr"],
)
def test_forms_of_a_value_that_reach_output_are_masked(shown: str) -> None:
    masker = Masker(["ünïcode\nline-two-secret\n".encode()])

    assert "secret" not in masker.mask(f"error: {shown}")
    assert b"secret" not in masker.mask_bytes(f"error: {shown}".encode())


def test_values_shorter_than_the_minimum_are_not_masked() -> None:
    short = "x" * (MIN_LENGTH - 1)

    assert not maskable(short) and not maskable(b"   \n") and maskable("x" * MIN_LENGTH)
    assert not Masker([short, ""])
    assert Masker([short]).mask(f"a {short} b") == f"a {short} b"


def test_a_stream_cut_anywhere_is_masked_as_the_whole() -> None:
    masker = Masker([b"0123456789", b"6789-abc"])
    text = b"id 0123456789-abc and 012345 and 01234567890123456789 end"
    whole = masker.mask_bytes(text)
    assert whole == b"id *** and 012345 and ****** end"

    for i, j in itertools.combinations(range(len(text) + 1), 2):
        assert streamed(masker, [text[:i], text[i:j], text[j:]]) == whole, (i, j)
    assert streamed(masker, [bytes([b]) for b in text]) == whole


def test_a_stream_passes_on_at_once_what_cannot_start_a_value() -> None:
    stream = Masker([b"token-1234"]).stream()

    assert stream.feed(b"hello world\n") == b"hello world\n"
    assert stream.feed(b"now tok") == b"now "  # "tok" may be the start of the value
    assert stream.feed(b"en-1234!") == b"***!"
    assert stream.feed(b"tok") == b""
    assert stream.close() == b"tok"


def test_random_streams_match_the_whole() -> None:
    rng = random.Random(23)
    for _ in range(300):
        values = ["".join(rng.choices("abc", k=rng.randint(4, 7))) for _ in range(3)]
        masker = Masker([v.encode() for v in values])
        text = "".join(rng.choices("abcx", k=rng.randint(0, 40))).encode()
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, 5)))
        chunks = [text[a:b] for a, b in itertools.pairwise([0, *cuts, len(text)])]
        whole = masker.mask_bytes(text)
        assert streamed(masker, chunks) == whole, (values, text, cuts)
        assert not any(v.encode() in whole for v in values)
