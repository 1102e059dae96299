"""Reading untrusted IR: typed getters that name the JSON path of whatever is malformed.

A compiled IR is user input (hand-edited YAML, another tool's output), so every value the
engine later reads is checked here once, at load time, and a wrong shape becomes one
`PipelineSpecError` naming where it is (`root.dag.tasks.train.inputs`) instead of a
`KeyError` or `TypeError` deep inside a run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from headwater.errors import PipelineSpecError

_EMPTY: Mapping[str, Any] = {}


def at(path: str, key: str) -> str:
    """The path of `key` inside the node at `path`.

    Getters take the parent's path and the key apart and join them only for an error
    message: building every path up front was most of what validation cost.
    """
    if not key:
        return path
    return f"{path}.{key}" if path else key


def malformed(path: str, expected: str, value: Any, key: str = "") -> NoReturn:
    """Raise the one error for a value of the wrong shape (at `path.key`)."""
    path = at(path, key)
    got = type(value).__name__ if value is not None else "null"
    raise PipelineSpecError(
        f"malformed PipelineSpec at {path}: expected {expected}, got {got} {_short(value)}; "
        "recompile the pipeline with kfp.compiler.Compiler or fix the file"
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def mapping(value: Any, path: str, key: str = "") -> Mapping[str, Any]:
    """`value` as a mapping; null (an empty YAML block) is an empty one."""
    if type(value) is dict:  # nearly always: the fast path skips the ABC check
        return value
    if value is None:
        return _EMPTY
    if not isinstance(value, Mapping):
        malformed(path, "a mapping", value, key)
    return value


def node(value: Any, path: str, key: str = "") -> Mapping[str, Any]:
    """`value` as a mapping that must be there: null is an error, not an empty mapping."""
    if value is None:
        malformed(path, "a mapping", value, key)
    return mapping(value, path, key)


def named(value: Any, path: str, key: str = "") -> Mapping[str, Any]:
    """`value` as a mapping keyed by names (tasks, inputs...): every key a string.

    YAML reads `1:` as an int key; names are compared and sorted as strings later.
    """
    result = mapping(value, path, key)
    for name in result:
        if type(name) is not str:
            malformed(at(at(path, key), str(name)), "a name (a string key)", name)
    return result


def sequence(value: Any, path: str, key: str = "") -> list[Any]:
    """`value` as a list; null is an empty one."""
    if value is None:
        return []
    if not isinstance(value, list):
        malformed(path, "a list", value, key)
    return value


def text(value: Any, path: str, key: str = "", default: str = "") -> str:
    """`value` as a string; null is `default`."""
    if value is None:
        return default
    if not isinstance(value, str):
        malformed(path, "a string", value, key)
    return value


def strings(value: Any, path: str, key: str = "") -> list[str]:
    """`value` as a list of strings (null is an empty list; a null item is an error)."""
    items = sequence(value, path, key)
    for index, item in enumerate(items):
        if type(item) is not str:
            malformed(f"{at(path, key)}[{index}]", "a string", item)
    return items


def flag(value: Any, path: str, key: str = "") -> bool:
    """`value` as a boolean; null is False."""
    if value is None:
        return False
    if not isinstance(value, bool):
        malformed(path, "true or false", value, key)
    return value


def number(value: Any, path: str, key: str = "", default: float = 0.0) -> float:
    """`value` as a number (protobuf JSON may quote it); null is `default`."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        malformed(path, "a number", value, key)
    try:
        return float(value)
    except ValueError:
        malformed(path, "a number", value, key)


def integer(value: Any, path: str, key: str = "", default: int = 0) -> int:
    """`value` as an integer (protobuf JSON quotes 64-bit ones); null is `default`."""
    if value is None:
        return default
    if isinstance(value, bool):
        malformed(path, "an integer", value, key)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    malformed(path, "an integer", value, key)


def required(node: Mapping[str, Any], key: str, path: str) -> Any:
    """`node[key]`, or an error naming the missing key's path."""
    if key not in node:
        raise PipelineSpecError(
            f"malformed PipelineSpec at {path}: missing {key!r}; recompile the pipeline with "
            "kfp.compiler.Compiler or fix the file"
        )
    return node[key]
