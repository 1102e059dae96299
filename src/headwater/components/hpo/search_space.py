"""A search space as a list of parameter dicts in Ax's own terms, checked without importing Ax.

Each dict holds the fields of Ax's `RangeParameterConfig` or `ChoiceParameterConfig`::

    {"name": "lr", "bounds": [1e-4, 1e-1], "parameter_type": "float", "scaling": "log"}
    {"name": "width", "bounds": [8, 64], "parameter_type": "int", "scaling": "log"}
    {"name": "optimizer", "values": ["adam", "sgd"]}
    {"name": "layers", "values": [1, 2, 3], "parameter_type": "int", "is_ordered": True}

The legacy `AxClient` spelling (KFP's samples) is read too: `"type": "range"|"choice"`,
`"value_type"` for `parameter_type` and `"log_scale": true` for `"scaling": "log"`.
`normalize` checks what it can here, so a pipeline with a bad search space fails when it is
built rather than in its first task; `to_ax` makes the Ax configs, which Ax checks again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from headwater.errors import InvalidArgumentError

_RANGE_KEYS = {"name", "bounds", "parameter_type", "scaling", "step_size"}
_CHOICE_KEYS = {"name", "values", "parameter_type", "is_ordered", "dependent_parameters"}
_LEGACY = {"type", "value_type", "log_scale"}
_RANGE_TYPES = ("float", "int")
_CHOICE_TYPES = ("float", "int", "str", "bool")


def normalize(parameters: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Check a search space and return it in Ax 1.x terms (legacy keys translated).

    Numbers arrive as doubles through KFP (a protobuf Struct), so an int parameter's bounds
    and values are made ints again.

    Raises:
        InvalidArgumentError: The space is empty, or a parameter is malformed; the message
            names the parameter and what to change.
    """
    if isinstance(parameters, (str, bytes, Mapping)) or not isinstance(parameters, Sequence):
        raise InvalidArgumentError(
            f"the search space must be a list of parameter dicts, not {type(parameters).__name__}"
        )
    if not parameters:
        raise InvalidArgumentError("the search space is empty: give at least one parameter")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for position, raw in enumerate(parameters):
        spec = _one(raw, position)
        if spec["name"] in seen:
            raise InvalidArgumentError(
                f"search space: parameter {spec['name']!r} appears twice; names must be unique"
            )
        seen.add(spec["name"])
        out.append(spec)
    return out


def names(parameters: Sequence[Mapping[str, Any]]) -> list[str]:
    """The parameter names of a normalized search space, in order."""
    return [str(p["name"]) for p in parameters]


def types(parameters: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """{name: "float" | "int" | "str" | "bool"} of a normalized search space."""
    return {str(p["name"]): str(p["parameter_type"]) for p in parameters}


def to_ax(parameters: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Ax's `RangeParameterConfig`/`ChoiceParameterConfig` for a normalized search space."""
    from headwater.components.hpo._library import ax

    api = ax()
    configs: list[Any] = []
    for spec in parameters:
        if "bounds" in spec:
            configs.append(api.RangeParameterConfig(**{**spec, "bounds": tuple(spec["bounds"])}))
        else:
            configs.append(api.ChoiceParameterConfig(**spec))
    return configs


def _one(raw: Any, position: int) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise InvalidArgumentError(
            f"search space: item {position} is {raw!r:.60}, not a parameter dict such as "
            '{"name": "lr", "bounds": [0.0001, 0.1], "parameter_type": "float"}'
        )
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgumentError(f"search space: item {position} has no 'name' (got {raw!r:.80})")
    spec = {k: v for k, v in raw.items() if k not in _LEGACY}
    kind = raw.get("type")
    if kind not in (None, "range", "choice"):
        raise InvalidArgumentError(
            f"search space: parameter {name!r} has type {kind!r}; Headwater tunes 'range' and "
            "'choice' parameters (pass a fixed value to the train component instead)"
        )
    if "value_type" in raw:
        spec.setdefault("parameter_type", raw["value_type"])
    if raw.get("log_scale"):
        spec.setdefault("scaling", "log")
    is_range = kind == "range" or (kind is None and "bounds" in raw)
    is_choice = kind == "choice" or (kind is None and "values" in raw)
    if is_range == is_choice:
        raise InvalidArgumentError(
            f"search space: parameter {name!r} needs either 'bounds' (a range) or 'values' "
            f"(a choice), not {'both' if is_range else 'neither'}"
        )
    allowed = _RANGE_KEYS if is_range else _CHOICE_KEYS
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise InvalidArgumentError(
            f"search space: parameter {name!r} has unknown key(s) {', '.join(map(repr, unknown))}"
            f" (a {'range' if is_range else 'choice'} takes: {', '.join(sorted(allowed))})"
        )
    return _range(name, spec) if is_range else _choice(name, spec)


def _range(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    kind = spec.get("parameter_type")
    if kind not in _RANGE_TYPES:
        raise InvalidArgumentError(
            f"search space: range parameter {name!r} has parameter_type {kind!r}; "
            "give 'float' or 'int'"
        )
    bounds = spec["bounds"]
    if (
        not isinstance(bounds, Sequence)
        or isinstance(bounds, str)
        or len(bounds) != 2
        or not all(_number(b) for b in bounds)
    ):
        raise InvalidArgumentError(
            f"search space: parameter {name!r} has bounds {bounds!r}; give [lower, upper] numbers"
        )
    lower, upper = (float(b) for b in bounds)
    if kind == "int":
        if not (lower.is_integer() and upper.is_integer()):
            raise InvalidArgumentError(
                f"search space: int parameter {name!r} has bounds {list(bounds)!r}; give whole "
                "numbers, or make it a 'float'"
            )
        spec["bounds"] = [int(lower), int(upper)]
    else:
        spec["bounds"] = [lower, upper]
    if not lower < upper:
        raise InvalidArgumentError(
            f"search space: parameter {name!r} has bounds {list(bounds)!r}; the lower bound "
            "must be below the upper one"
        )
    scaling = spec.get("scaling")
    if scaling not in (None, "linear", "log"):
        raise InvalidArgumentError(
            f"search space: parameter {name!r} has scaling {scaling!r}; give 'linear' or 'log'"
        )
    if scaling == "log" and lower <= 0:
        raise InvalidArgumentError(
            f"search space: parameter {name!r} has a log scale but bounds {list(bounds)!r}; "
            "a log scale needs a lower bound above 0"
        )
    return spec


def _choice(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    values = spec["values"]
    if not isinstance(values, Sequence) or isinstance(values, str) or len(values) < 2:
        raise InvalidArgumentError(
            f"search space: choice parameter {name!r} has values {values!r}; give a list of at "
            "least two (a single value is a constant: pass it to the train component)"
        )
    kind = spec.get("parameter_type")
    if kind is None:
        if all(isinstance(v, bool) for v in values):
            kind = "bool"
        elif all(isinstance(v, str) for v in values):
            kind = "str"
        else:
            raise InvalidArgumentError(
                f"search space: choice parameter {name!r} needs a parameter_type "
                f"({', '.join(_CHOICE_TYPES)}) for values {list(values)!r}"
            )
        spec["parameter_type"] = kind
    if kind not in _CHOICE_TYPES:
        raise InvalidArgumentError(
            f"search space: choice parameter {name!r} has parameter_type {kind!r}; give one of "
            f"{', '.join(_CHOICE_TYPES)}"
        )
    checks: dict[str, Callable[[Any], bool]] = {
        "int": lambda v: _number(v) and float(v).is_integer(),
        "float": _number,
        "str": lambda v: isinstance(v, str),
        "bool": lambda v: isinstance(v, bool),
    }
    wrong = [v for v in values if not checks[kind](v)]
    if wrong:
        raise InvalidArgumentError(
            f"search space: choice parameter {name!r} of type {kind!r} has value(s) {wrong!r:.80}"
        )
    casts: dict[str, Callable[[Any], Any]] = {"int": int, "float": float}
    cast = casts.get(kind, lambda v: v)
    spec["values"] = [cast(v) for v in values]
    if len(set(spec["values"])) != len(spec["values"]):
        raise InvalidArgumentError(
            f"search space: choice parameter {name!r} repeats a value in {list(values)!r}"
        )
    return spec


def _number(value: Any) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )
