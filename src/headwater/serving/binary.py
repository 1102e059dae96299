"""Triton's binary tensor data extension: a V2 body that is a JSON header, then raw tensors.

    POST /v2/models/churn/infer
    Inference-Header-Content-Length: <bytes of JSON>
    {"inputs": [{"name": "input-0", "datatype": "FP32", "shape": [2, 4],
                 "parameters": {"binary_data_size": 32}}],
     "outputs": [{"name": "predict", "parameters": {"binary_data": true}}]}<32 bytes>

    200, Inference-Header-Content-Length: <bytes of JSON>
    {"model_name": "churn", "model_version": "1", "outputs": [{"name": "predict",
     "datatype": "FP32", "shape": [2], "parameters": {"binary_data_size": 8}}]}<8 bytes>

A request's `Inference-Header-Content-Length` gives the length of its JSON part; each input
with `parameters.binary_data_size` takes that many of the bytes after it, in input order (how
the bytes encode values: `headwater.serving.tensors`). An output is answered as binary data
when its entry in `outputs` says `parameters.binary_data: true`, or, saying nothing, when the
request's `parameters.binary_data_output` is true (tritonclient's default when it names no
outputs); the answer then carries the header too. This is what Triton's and KServe's
clients send by default (`binary_data=True`). The extension's "raw binary request" (a header
length of 0, no JSON at all) is refused by name.
Source: triton-inference-server/server docs/protocol/extension_binary_data.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.responses import Response

from headwater.serving.errors import InvalidInputError
from headwater.serving.wire import json_bytes, json_object

#: The header naming the length of the JSON part of a body with binary tensors after it.
HEADER = "inference-header-content-length"
#: The parameters the extension reads; they are the wire's, never a model's.
PARAMETERS = frozenset({"binary_data_size", "binary_data", "binary_data_output"})


class BinaryData:
    """The bytes after a request's JSON header, handed to its inputs in order.

    Args:
        data: The bytes after the JSON header.
    """

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, tensor: Any, *, where: str) -> bytes | None:
        """The next `binary_data_size` bytes, for a tensor that declares it, else None.

        Raises:
            InvalidInputError: A size that is not a count of bytes, or more than is left.
        """
        parameters = tensor.get("parameters") if isinstance(tensor, dict) else None
        if not isinstance(parameters, dict) or "binary_data_size" not in parameters:
            return None
        size = parameters["binary_data_size"]
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise InvalidInputError(
                f"{where} has binary_data_size {size!r}; give a number of bytes (>= 0)"
            )
        left = len(self.data) - self.at
        if size > left:
            raise InvalidInputError(
                f"{where} has binary_data_size {size} but only {left} bytes of binary data "
                "are left after the inputs before it"
            )
        self.at += size
        return self.data[self.at - size : self.at]

    def check_used(self) -> None:
        """Raises InvalidInputError when bytes are left that no input claimed."""
        left = len(self.data) - self.at
        if left:
            raise InvalidInputError(
                f"the body has {left} bytes of binary data past what the inputs' "
                "binary_data_size claim"
            )


async def split(body: bytes, header_length: int | None) -> tuple[dict[str, Any], BinaryData | None]:
    """A V2 body's JSON object and the binary data after it (None without a header length).

    Raises:
        InvalidInputError: A raw binary request (header length 0), or a JSON part that is not
            a JSON object.
    """
    if header_length is None:
        return await json_object(body), None
    if header_length == 0:
        raise InvalidInputError(
            "Inference-Header-Content-Length: 0 (a raw binary request, without a JSON "
            "header) is not supported: send the JSON inference header before the tensor data"
        )
    return await json_object(body[:header_length]), BinaryData(body[header_length:])


def wanted(body: dict[str, Any], outputs: Any) -> tuple[bool, dict[str, bool]]:
    """Whether outputs are binary by default (`binary_data_output`), and each named output's
    own `binary_data` flag where it gives one.

    Raises:
        InvalidInputError: A flag that is not a boolean.
    """
    parameters = body.get("parameters") or {}
    default = parameters.get("binary_data_output", False) if isinstance(parameters, dict) else False
    _check_flag(default, "parameters.binary_data_output")
    own: dict[str, bool] = {}
    for output in outputs if isinstance(outputs, list) else ():
        given = output.get("parameters") if isinstance(output, dict) else None
        if isinstance(given, dict) and "binary_data" in given:
            _check_flag(given["binary_data"], f"output {output.get('name')!r} binary_data")
            own[str(output.get("name"))] = given["binary_data"]
    return default, own


def response(answer: dict[str, Any], raw: Sequence[bytes]) -> Response:
    """The answer as its JSON header then the outputs' binary data, the header's length in
    `Inference-Header-Content-Length`."""
    header = json_bytes(answer)
    return Response(
        b"".join([header, *raw]),
        media_type="application/octet-stream",
        headers={HEADER: str(len(header))},
    )


def _check_flag(value: Any, where: str) -> None:
    if not isinstance(value, bool):
        raise InvalidInputError(f"{where} must be true or false, got {value!r}")


__all__ = ["HEADER", "PARAMETERS", "BinaryData", "response", "split", "wanted"]
