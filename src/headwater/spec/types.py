"""KFP parameter types: coercing values the way KFP's backend hands them to components."""

from __future__ import annotations

import json
import math
from typing import Any

from headwater.errors import ParameterError

#: The parameter types a PipelineSpec declares (`ParameterType.ParameterTypeEnum`).
PARAMETER_TYPES = (
    "STRING",
    "NUMBER_INTEGER",
    "NUMBER_DOUBLE",
    "BOOLEAN",
    "LIST",
    "STRUCT",
    "TASK_FINAL_STATUS",
    "TASK_CONFIG",
)

_PYTHON_NAMES = {
    "STRING": "str",
    "NUMBER_INTEGER": "int",
    "NUMBER_DOUBLE": "float",
    "BOOLEAN": "bool",
    "LIST": "list",
    "STRUCT": "dict",
}


def protojson(value: Any) -> Any:
    """Normalise numbers inside a value as KFP's Go backend renders `google.protobuf.Value`.

    The IR stores every number as a double, so `[1]` compiles to `[1.0]`. The backend's
    protojson writes integral doubles without a fraction, so components receive ints back.
    Doing the same keeps `List[int]` elements ints (kfp.local turns them into floats).
    """
    if isinstance(value, bool) or value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 2**53:
            return int(value)
        return value
    if isinstance(value, list | tuple):
        return [protojson(v) for v in value]
    if isinstance(value, dict):
        return {str(k): protojson(v) for k, v in value.items()}
    return value


def coerce(value: Any, parameter_type: str, *, name: str, what: str = "parameter") -> Any:
    """Coerce a value to a declared parameter type, or explain why it does not fit.

    Args:
        value: The value as given (JSON-compatible).
        parameter_type: One of `PARAMETER_TYPES`.
        name: The parameter's name, for the error message.
        what: What the value is, for the error message ("parameter", "input").

    Returns:
        The value in the Python type a KFP component receives.

    Raises:
        ParameterError: The value cannot represent the declared type.
    """
    if value is None:
        return None
    try:
        return _coerce(value, parameter_type)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        expected = _PYTHON_NAMES.get(parameter_type, parameter_type)
        hint = exc.hint if isinstance(exc, _OutOfRangeError) else f"pass a value of type {expected}"
        raise ParameterError(
            f"{what} {name!r} expects {expected} ({parameter_type}) but got {_show(value)}: {hint}"
        ) from exc


#: KFP's NUMBER_INTEGER is a protobuf int64: the backend and every component see 64 bits.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class _OutOfRangeError(ValueError):
    """A value of the right type that the declared type cannot hold."""

    def __init__(self, hint: str) -> None:
        super().__init__(hint)
        self.hint = hint


def _show(value: Any) -> str:
    """`repr(value)`, short, and safe for ints too long to print (`sys.set_int_max_str_digits`)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _int64(value: int) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise _OutOfRangeError(
            f"KFP integers are 64-bit ({INT64_MIN} to {INT64_MAX}); pass a smaller value, "
            "or declare the parameter str and convert it in the component"
        )
    return value


def _coerce(value: Any, parameter_type: str) -> Any:
    if parameter_type == "STRING":
        if isinstance(value, str):
            return value
        # Compact, as KFP's backend renders a non-string value handed to a STRING input.
        return json.dumps(value, separators=(",", ":"))
    if parameter_type == "NUMBER_INTEGER":
        if isinstance(value, str):
            value = json.loads(value)
        if isinstance(value, bool):
            raise TypeError("bool is not an int")
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError("not integral")
            return _int64(int(value))
        if isinstance(value, int):
            return _int64(value)
        raise TypeError("not a number")
    if parameter_type == "NUMBER_DOUBLE":
        if isinstance(value, str):
            value = json.loads(value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError("not a number")
        return float(value)
    if parameter_type == "BOOLEAN":
        if isinstance(value, str):
            lowered = value.strip().lower()
            if lowered not in ("true", "false"):
                raise ValueError("not a boolean")
            return lowered == "true"
        if not isinstance(value, bool):
            raise TypeError("not a boolean")
        return value
    if parameter_type == "LIST":
        if isinstance(value, str):
            value = json.loads(value)
        if not isinstance(value, list | tuple):
            raise TypeError("not a list")
        return protojson(list(value))
    if parameter_type == "STRUCT":
        if isinstance(value, str):
            value = json.loads(value)
        if not isinstance(value, dict):
            raise TypeError("not a dict")
        return protojson(value)
    return value


def parse_cli_value(text: str, parameter_type: str | None) -> Any:
    """Parse a `--param NAME=VALUE` value: JSON first, else the plain string.

    A STRING parameter keeps the text exactly as typed (`--param tag=007` stays "007").
    """
    if parameter_type == "STRING":
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text
