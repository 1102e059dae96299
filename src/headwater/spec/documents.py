"""Documents from outside (a pipeline file, an uploaded spec, a request body) checked to be plain
data before anything uses them: what JSON can hold, and no more.

A YAML file may share one node under many names (anchors and aliases): a few kilobytes that
expand to gigabytes once written out as JSON ("billion laughs"). A compiled PipelineSpec never
has them, so a shared node is refused, as are nesting past `MAX_DEPTH` levels, NaN and
infinities, integers longer than Python converts (`sys.get_int_max_str_digits`, 4300 digits),
and strings that cannot be stored or sent back: a NUL character (PostgreSQL refuses it) or a
lone surrogate (no UTF-8 encodes it).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from headwater.errors import InvalidArgumentError

__all__ = ["MAX_DEPTH", "check_document", "read_json"]

#: Levels of nesting a document may have; a compiled pipeline has a few dozen.
MAX_DEPTH = 100


def check_document(doc: Any, *, what: str) -> None:
    """Refuse a document that is not plain data (see the module docstring).

    Args:
        doc: What `json.loads` or a YAML loader built.
        what: What it is, for the message ("pipeline.yaml", "the request body").

    Raises:
        InvalidArgumentError: Naming the problem and where.
    """
    seen: set[int] = set()
    stack: list[tuple[Any, int, str]] = [(doc, 0, "")]
    while stack:
        value, depth, path = stack.pop()
        where = path or "the top"
        if isinstance(value, str):
            _check_text(value, what, where)
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise InvalidArgumentError(f"{what}: {value} at {where} is not a JSON number")
        elif isinstance(value, dict | list):
            if depth >= MAX_DEPTH:
                raise InvalidArgumentError(
                    f"{what} nests deeper than {MAX_DEPTH} levels (at {where}): a compiled "
                    "PipelineSpec nests a few dozen"
                )
            if id(value) in seen:
                raise InvalidArgumentError(
                    f"{what} shares one node under several names (YAML anchors and aliases, at "
                    f"{where}): a compiled PipelineSpec has none; compile the pipeline again"
                )
            seen.add(id(value))
            if isinstance(value, dict):
                for key, item in value.items():
                    _check_text(str(key), what, where)
                    stack.append((item, depth + 1, f"{path}.{key}" if path else str(key)))
            else:
                stack.extend((item, depth + 1, f"{path}[{i}]") for i, item in enumerate(value))


def read_json(raw: bytes | str, *, what: str) -> Any:
    """`raw` as JSON, checked with `check_document`; NaN and Infinity, which Python's parser
    takes, are refused too, as is an integer too long for Python to read.

    Raises:
        InvalidArgumentError: It is not JSON, or not plain data.
    """

    def refuse(name: str) -> Any:
        raise InvalidArgumentError(f"{what}: {name} is not a JSON value (send a number or null)")

    try:
        doc = json.loads(raw, parse_constant=refuse)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidArgumentError(f"{what} is not JSON: {exc}") from exc
    except RecursionError as exc:
        raise InvalidArgumentError(f"{what} nests deeper than {MAX_DEPTH} levels") from exc
    except InvalidArgumentError:
        raise
    except ValueError as exc:  # the one other refusal: an integer past Python's digit limit
        raise InvalidArgumentError(
            f"{what} holds an integer of more than {sys.get_int_max_str_digits()} digits, "
            "longer than Python reads: send it as a string"
        ) from exc
    check_document(doc, what=what)
    return doc


def _check_text(text: str, what: str, where: str) -> None:
    if "\x00" in text:
        raise InvalidArgumentError(f"{what}: a NUL character at {where} (it cannot be stored)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(
            f"{what}: a lone surrogate (\\u{ord(text[exc.start]):04x}) at {where} is not "
            "text: send UTF-8"
        ) from exc
