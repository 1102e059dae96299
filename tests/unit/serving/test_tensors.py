"""V2 typed tensors: decoding checks datatype, shape and values; encoding gives flat JSON."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from headwater.serving.errors import InvalidInputError
from headwater.serving.tensors import TensorSpec, conform, decode, encode


@pytest.mark.parametrize(
    ("datatype", "data", "dtype"),
    [
        ("BOOL", [True, False], np.bool_),
        ("UINT8", [0, 255], np.uint8),
        ("INT16", [-3, 4], np.int16),
        ("INT64", [1, 2], np.int64),
        ("FP16", [0.5, 1], np.float16),
        ("FP32", [0.5, 1], np.float32),
        ("FP64", [0.5, 1], np.float64),
        ("BYTES", ["a", "é"], object),
    ],
)
def test_each_datatype_decodes_to_its_dtype(datatype: str, data: list[Any], dtype: Any) -> None:
    name, array = decode(
        {"name": "x", "datatype": datatype, "shape": [1, 2], "data": data}, where="inputs[0]"
    )
    assert name == "x" and array.dtype == np.dtype(dtype) and array.shape == (1, 2)
    assert array.reshape(-1).tolist() == data


def test_empty_and_scalar_tensors() -> None:
    _, empty = decode({"name": "x", "datatype": "FP32", "shape": [0, 3], "data": []}, where="")
    _, scalar = decode({"name": "x", "datatype": "INT32", "shape": [], "data": 7}, where="")
    assert empty.shape == (0, 3) and scalar.shape == () and int(scalar) == 7


@pytest.mark.parametrize(
    ("array", "sent", "spec", "message"),
    [
        (np.zeros((2, 3)), "FP64", TensorSpec("x", "FP32", (-1, 4)), "shape \\[2, 3\\]"),
        (np.zeros((2, 4)), "FP64", TensorSpec("x", "FP32", (-1, -1, 4)), "shape \\[2, 4\\]"),
        (np.ones((2,), dtype=bool), "BOOL", TensorSpec("x", "FP32", (-1,)), "datatype BOOL"),
        (np.ones((2,)), "FP64", TensorSpec("x", "INT64", (-1,)), "datatype FP64"),
        (np.array([300]), "INT64", TensorSpec("x", "UINT8", (-1,)), "outside uint8"),
    ],
)
def test_conform_refuses_what_the_model_does_not_take(
    array: np.ndarray, sent: str, spec: TensorSpec, message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        conform(array, sent, spec)


def test_conform_casts_to_the_declared_dtype() -> None:
    cast = conform(np.array([[1, 2]]), "INT64", TensorSpec("x", "FP32", (-1, 2)))
    assert cast.dtype == np.float32
    assert conform(np.array([1]), "INT64", TensorSpec("x", "INT8", ())).dtype == np.int8


def test_encode_is_flat_with_nulls_for_non_finite_numbers() -> None:
    assert encode("y", np.array([[1.5, np.nan], [np.inf, 2.0]], dtype=np.float32)) == {
        "name": "y",
        "datatype": "FP32",
        "shape": [2, 2],
        "data": [1.5, None, None, 2.0],
    }
    assert encode("s", np.array([b"ab", b"c"]))["data"] == ["ab", "c"]
    assert encode("o", np.array(["x", 1], dtype=object))["datatype"] == "BYTES"
