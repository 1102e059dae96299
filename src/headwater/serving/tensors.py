"""Typed tensors of the Open Inference Protocol (V2): datatypes, shapes, JSON <-> NumPy.

A V2 tensor in JSON is `{"name", "datatype", "shape", "data"}`, with `data` row-major, flat
or nested. `decode` turns one into a NumPy array and refuses what does not add up (an unknown
datatype, values of another kind, a count that does not fill the shape); `conform` then holds
it against what the model declared (`TensorSpec`); `encode` goes back to JSON.

With the binary tensor data extension (Triton's; `headwater.serving.binary` frames the body)
a tensor's values come as raw bytes instead of `data`: row-major, little-endian, in the
datatype's native size, BOOL one byte each, a BYTES element a 4-byte little-endian length and
then its bytes. `decode(..., raw=...)` reads them and `to_bytes` writes them.

Datatypes map to NumPy as `DTYPES` shows; BYTES tensors hold Python `str` (JSON has no bytes),
also when they came as binary data: those are read as UTF-8.
A dimension of -1 in a `TensorSpec` is variable, as in the protocol's model metadata.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from headwater.serving.errors import InvalidInputError

#: V2 datatype -> NumPy dtype (BYTES: Python strings in an object array).
DTYPES: dict[str, Any] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BYTES": np.dtype(object),
}
DATATYPES = tuple(DTYPES)
#: NumPy dtype -> V2 datatype, for the answers (BYTES is found by kind).
_DATATYPE_OF = {dtype: name for name, dtype in DTYPES.items() if name != "BYTES"}
_INTEGER = frozenset(d for d in DATATYPES if "INT" in d)
_FLOAT = frozenset(("FP16", "FP32", "FP64"))
#: NumPy kinds each datatype's JSON values may arrive as (a JSON 1 is a fine FP32 value).
_KINDS = {
    "BOOL": "b",
    "BYTES": "U",
    **dict.fromkeys(_INTEGER, "iu"),
    **dict.fromkeys(_FLOAT, "iuf"),
}


@dataclass(frozen=True)
class TensorSpec:
    """One input or output as a model declares it: name, V2 datatype and shape (-1: any).

    Attributes:
        also: Other shapes the input takes, not shown in the protocol's metadata (a model
            with a transform takes raw rows, as declared, and rows of its own features).
        hint: What the shapes mean, added to the message refusing another shape.
    """

    name: str
    datatype: str
    shape: tuple[int, ...]
    also: tuple[tuple[int, ...], ...] = ()
    hint: str = ""

    def to_json(self) -> dict[str, Any]:
        """The protocol's metadata shape: `{"name", "datatype", "shape"}`."""
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}


def datatype_of(array: np.ndarray) -> str:
    """The V2 datatype for a NumPy array (strings, bytes and objects are BYTES)."""
    kind = array.dtype.kind
    if kind in "USO":
        return "BYTES"
    found = _DATATYPE_OF.get(array.dtype)
    if found is not None:
        return found
    if kind == "f":
        return "FP64"
    raise InvalidInputError(
        f"the model returned {array.dtype} values, which V2 has no datatype for"
    )


def decode(tensor: Any, *, where: str, raw: bytes | None = None) -> tuple[str, np.ndarray]:
    """The name and array of one V2 input tensor, checked against its own datatype and shape.

    Args:
        tensor: The JSON object `{"name", "datatype", "shape", "data", "parameters"?}`.
        where: How to name it in errors ("inputs[0]").
        raw: The tensor's binary data, when it came so (`parameters.binary_data_size`);
            then it has no `data`.

    Raises:
        InvalidInputError: Anything missing, unknown or inconsistent, named.
    """
    if not isinstance(tensor, dict):
        raise InvalidInputError(f"{where} must be an object with name, datatype, shape and data")
    name = tensor.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"{where} needs a 'name' (a non-empty string), got {name!r}")
    where = f"input {name!r}"
    datatype = tensor.get("datatype")
    if datatype not in DTYPES:
        raise InvalidInputError(
            f"{where} has datatype {datatype!r}; V2 datatypes are {', '.join(DATATYPES)}"
        )
    shape = shape_of(tensor.get("shape"), where=where)
    if raw is not None:
        if "data" in tensor:
            raise InvalidInputError(f"{where} has both 'data' and binary data: send one")
        return name, from_bytes(raw, datatype, shape, where=where)
    parameters = tensor.get("parameters")
    if isinstance(parameters, dict) and "binary_data_size" in parameters:
        raise InvalidInputError(
            f"{where} says it is binary data (binary_data_size) but the request has no "
            "Inference-Header-Content-Length header giving the length of its JSON part"
        )
    if "data" not in tensor:
        raise InvalidInputError(f"{where} has no 'data'")
    return name, values(tensor["data"], datatype, shape, where=where)


def shape_of(shape: Any, *, where: str) -> tuple[int, ...]:
    """A request's shape as a tuple of non-negative integers.

    Raises:
        InvalidInputError: Not a list of integers >= 0.
    """
    ok = isinstance(shape, list) and all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    )
    if not ok:
        raise InvalidInputError(f"{where} has shape {shape!r}; give a list of integers >= 0")
    return tuple(shape)


def values(data: Any, datatype: str, shape: tuple[int, ...], *, where: str) -> np.ndarray:
    """`data` (flat or nested JSON values) as an array of `datatype` shaped `shape`.

    Raises:
        InvalidInputError: Values of another kind, integers out of the datatype's range, ragged
            nesting, or a count or nesting that does not match `shape`.
    """
    if not isinstance(data, list):
        data = [data]
    try:
        array = np.asarray(data)
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(
            f"{where} has ragged data: every row must have the same length"
        ) from exc
    count = math.prod(shape)
    if array.size != count:
        raise InvalidInputError(
            f"{where} has {array.size} values but its shape {list(shape)} holds {count}"
        )
    if array.ndim > 1 and array.shape != shape:
        raise InvalidInputError(
            f"{where} has data nested as {list(array.shape)} but its shape is {list(shape)}; "
            "nest it as the shape says, or send it flat"
        )
    if count == 0:
        return np.empty(shape, dtype=DTYPES[datatype])
    kinds = _KINDS[datatype]
    if array.dtype.kind not in kinds:
        raise InvalidInputError(f"{where} is {datatype} but its data holds {_described(array)}")
    if datatype in _INTEGER:
        _check_range(array, DTYPES[datatype], where)
    if datatype == "BYTES":
        return array.astype(object).reshape(shape)
    return array.astype(DTYPES[datatype], copy=False).reshape(shape)


def from_bytes(raw: bytes, datatype: str, shape: tuple[int, ...], *, where: str) -> np.ndarray:
    """A tensor's binary data as an array of `datatype` shaped `shape`.

    Raises:
        InvalidInputError: A size that does not fill the shape, BOOL bytes other than 0 and
            1, or BYTES elements that overrun the data or are not UTF-8.
    """
    count = math.prod(shape)
    if datatype == "BYTES":
        return np.asarray(_strings(raw, count, where), dtype=object).reshape(shape)
    dtype = np.dtype(np.uint8) if datatype == "BOOL" else DTYPES[datatype].newbyteorder("<")
    if len(raw) != count * dtype.itemsize:
        raise InvalidInputError(
            f"{where} has {len(raw)} bytes of binary data but its shape {list(shape)} of "
            f"{datatype} takes {count * dtype.itemsize}"
        )
    array = np.frombuffer(raw, dtype=dtype).reshape(shape)
    if datatype == "BOOL":
        if array.size and array.max() > 1:
            raise InvalidInputError(f"{where} is BOOL but its binary data holds bytes but 0 and 1")
        return array.astype(np.bool_)
    return array.astype(DTYPES[datatype])  # a copy: native byte order, and writable


def to_bytes(array: np.ndarray) -> bytes:
    """An output tensor's binary data (see the module docstring); BYTES elements that are
    not `bytes` are written as their text in UTF-8."""
    if datatype_of(array) == "BYTES":
        parts = []
        for value in array.reshape(-1):
            item = value if isinstance(value, bytes) else str(_json_scalar(value)).encode()
            parts += [len(item).to_bytes(4, "little"), item]
        return b"".join(parts)
    if array.dtype.kind == "b":
        return array.astype(np.uint8).tobytes()
    return array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()


def conform(array: np.ndarray, datatype: str, spec: TensorSpec) -> np.ndarray:
    """`array` (sent as `datatype`) as the model's input `spec` takes it, cast if need be.

    Numbers convert to a floating input, integers to an integer input within its range;
    BOOL and BYTES take only their own kind. Each fixed dimension must match, of `spec.shape`
    or of one of `spec.also`.

    Raises:
        InvalidInputError: Another kind of values, or another shape, than the model takes.
    """
    where = f"input {spec.name!r}"
    if spec.datatype in DTYPES and datatype != spec.datatype:
        fits = (spec.datatype in _FLOAT and (datatype in _FLOAT or datatype in _INTEGER)) or (
            spec.datatype in _INTEGER and datatype in _INTEGER
        )
        if not fits:
            raise InvalidInputError(
                f"{where} has datatype {datatype}; the model takes {spec.datatype}"
            )
        if spec.datatype in _INTEGER and array.size:
            _check_range(array, DTYPES[spec.datatype], where)
        array = array.astype(DTYPES[spec.datatype], copy=False)
    if spec.shape and not any(_fits(array.shape, s) for s in (spec.shape, *spec.also)):
        takes = " or ".join(str(list(s)) for s in (spec.shape, *spec.also))
        raise InvalidInputError(
            f"{where} has shape {list(array.shape)}; the model takes {takes} (-1: any size)"
            + (f": {spec.hint}" if spec.hint else "")
        )
    return array


def encode(name: str, array: Any) -> dict[str, Any]:
    """One V2 output tensor: `{"name", "datatype", "shape", "data"}`, data flat."""
    found = np.asarray(array)
    return {
        "name": name,
        "datatype": datatype_of(found),
        "shape": list(found.shape),
        "data": to_json(found.reshape(-1)),
    }


def to_json(array: np.ndarray) -> Any:
    """`array` as nested JSON lists: NaN and infinities become null (JSON has no such
    numbers), bytes are decoded as UTF-8."""
    if array.dtype.kind in "fc" and not np.isfinite(array).all():
        finite = np.isfinite(array)
        array = array.astype(object)
        array[~finite] = None
    elif array.dtype.kind == "S":
        return np.vectorize(lambda b: b.decode("utf-8", "replace"), otypes=[object])(array).tolist()
    elif array.dtype.kind == "O":
        return np.vectorize(_json_scalar, otypes=[object])(array).tolist() if array.size else []
    return array.tolist()


def infer_datatype(array: np.ndarray, *, where: str) -> str:
    """The datatype of an array parsed from plain JSON (V1 instances): BOOL, INT64, FP64 or
    BYTES.

    Raises:
        InvalidInputError: Mixed or non-scalar values (null, objects, mixed strings and numbers).
    """
    kind = array.dtype.kind
    if kind == "b":
        return "BOOL"
    if kind in "iu":
        return "INT64" if kind == "i" else "UINT64"
    if kind == "f":
        return "FP64"
    if kind == "U":
        return "BYTES"
    raise InvalidInputError(f"{where} holds {_described(array)}; send numbers, booleans or strings")


def _strings(raw: bytes, count: int, where: str) -> list[str]:
    found: list[str] = []
    at = 0
    while at < len(raw):
        if at + 4 > len(raw):
            raise InvalidInputError(f"{where}'s binary data ends inside an element's length")
        size = int.from_bytes(raw[at : at + 4], "little")
        at += 4
        if at + size > len(raw):
            raise InvalidInputError(
                f"{where}'s element {len(found)} is {size} bytes long but the data ends first"
            )
        try:
            found.append(raw[at : at + size].decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise InvalidInputError(
                f"{where}'s element {len(found)} is not UTF-8 text (Headwater's BYTES "
                "tensors hold text)"
            ) from exc
        at += size
    if len(found) != count:
        raise InvalidInputError(
            f"{where} has {len(found)} BYTES elements but its shape holds {count}"
        )
    return found


def _fits(shape: Sequence[int], declared: Sequence[int]) -> bool:
    return len(shape) == len(declared) and all(
        d in (-1, s) for s, d in zip(shape, declared, strict=True)
    )


def _check_range(array: np.ndarray, dtype: np.dtype[Any], where: str) -> None:
    info = np.iinfo(dtype)
    low, high = int(array.min()), int(array.max())
    if low < info.min or high > info.max:
        bad = low if low < info.min else high
        raise InvalidInputError(
            f"{where} holds {bad}, outside {dtype.name}'s range [{info.min}, {info.max}]"
        )


def _described(array: np.ndarray) -> str:
    kind = array.dtype.kind
    return {
        "b": "booleans",
        "i": "integers",
        "u": "integers",
        "f": "floating-point numbers",
        "U": "strings",
    }.get(kind, "mixed values (numbers with strings, nulls or objects)")


def _json_scalar(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, str | bool | int) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    item = getattr(value, "item", None)
    return _json_scalar(item()) if callable(item) else str(value)
