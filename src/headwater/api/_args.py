"""Checks on API arguments, shared by the API's modules: each failure is one clear line."""

from __future__ import annotations

from collections.abc import Iterable

from headwater.errors import InvalidArgumentError

#: The largest integer a database column or parameter holds (signed 64 bits).
INT64_MAX = 2**63 - 1


def count(name: str, value: int, *, minimum: int) -> int:
    """`value` checked to be an integer from `minimum` to `INT64_MAX`.

    Raises:
        InvalidArgumentError: It is not an integer or is out of that range.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}")
    if not minimum <= value <= INT64_MAX:
        raise InvalidArgumentError(f"{name} must be between {minimum} and {INT64_MAX}, got {value}")
    return value


def choice(name: str, value: str, choices: Iterable[str]) -> str:
    """`value` upper-cased and checked to be one of `choices` (upper-case names).

    Raises:
        InvalidArgumentError: It is not one of them.
    """
    known = tuple(choices)
    upper = str(value).upper()
    if upper not in known:
        raise InvalidArgumentError(f"{name} {value!r} is not one of {', '.join(known)}")
    return upper
