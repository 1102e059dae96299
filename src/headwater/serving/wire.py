"""Bodies on the wire: reading a bounded JSON request, writing JSON answers and errors.

Every error the server sends is `{"error": "<message>"}` with the status its `ProtocolError`
carries: the protocols' own format, also for routes that do not exist (404), methods a route
does not take (405) and bodies too large (413).
"""

from __future__ import annotations

import json
import math
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response

from headwater.serving.errors import InvalidInputError, PayloadTooLargeError, ProtocolError

try:  # 5-13x faster parsing (ADR 15); `json` is the reference and the fallback
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson comes with the serve extra
    _orjson = None  # type: ignore[assignment]

#: Each byte as the shape `_long_integer` looks for: a digit as "0", a byte that may precede
#: the digits of a number's fraction or exponent (".eE+") as "x", "-" as itself, others " ".
_SHAPE = bytes(
    ord("0") if c in b"0123456789" else ord("x") if c in b".eE+" else c if c == ord("-") else 32
    for c in range(256)
)
_RUN = b"0" * 19
#: The response header naming the model version that served a request.
VERSION_HEADER = "x-headwater-model-version"
#: Bodies larger than this are parsed on a worker thread, not on the event loop.
OFFLOAD_BYTES = 256 * 1024
_BINARY = (
    "binary tensor data (Inference-Header-Content-Length) is taken by V2 inference only "
    "(POST /v2/models/{name}/infer): send this request as JSON"
)


async def read_json(request: Request, limit: int) -> tuple[dict[str, Any], int]:
    """The request's JSON object and its size in bytes, reading at most `limit` bytes.

    Raises:
        PayloadTooLargeError: The body (declared or as read) exceeds `limit`.
        InvalidInputError: No body, a binary-extension body, malformed JSON, or not an object.
    """
    body, header_length = await read_body(request, limit)
    if header_length is not None:
        raise InvalidInputError(_BINARY)
    return await json_object(body), len(body)


async def read_body(request: Request, limit: int) -> tuple[bytes, int | None]:
    """The request's body, reading at most `limit` bytes, and the length of its JSON header
    when it has binary tensor data after it (`Inference-Header-Content-Length`), else None.

    Raises:
        PayloadTooLargeError: The body (declared or as read) exceeds `limit`.
        InvalidInputError: An `Inference-Header-Content-Length` that is not a length
            within the body.
    """
    declared = ""
    header_length: str | None = None
    for key, value in request.scope["headers"]:  # one pass; ASGI names are lower case
        if key == b"content-length" and not declared:
            declared = value.decode("latin-1")
        elif key == b"inference-header-content-length":
            header_length = value.decode("latin-1").strip()
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLargeError(_too_large(int(declared), limit))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLargeError(_too_large(size, limit, at_least=True))
        chunks.append(chunk)
    body = b"".join(chunks)
    if header_length is None:
        return body, None
    if not header_length.isdigit() or int(header_length) > len(body):
        raise InvalidInputError(
            f"Inference-Header-Content-Length is {header_length[:40]!r}; it must be the "
            f"length in bytes of the JSON header at the start of the body ({len(body)} bytes)"
        )
    return body, int(header_length)


async def json_object(body: bytes) -> dict[str, Any]:
    """`body` parsed as a JSON object (on a worker thread when it is large).

    Raises:
        InvalidInputError: No body, malformed JSON, or not an object.
    """
    if not body.strip():
        raise InvalidInputError("the request has no body: send a JSON object")
    parsed = (
        await anyio.to_thread.run_sync(parse_json, body)
        if len(body) > OFFLOAD_BYTES
        else parse_json(body)
    )
    if not isinstance(parsed, dict):
        raise InvalidInputError(f"the body must be a JSON object, got a JSON {_kind(parsed)}")
    return parsed


def header(request: Request, name: bytes) -> str | None:
    """The first value of the header `name` (lower case), or None; a plain scan of the
    request's headers, cheaper than building `request.headers` to ask it once."""
    for key, value in request.scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


def json_response(
    payload: Any, *, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """`payload` as compact JSON (NaN and infinities as null: JSON has no such numbers)."""
    return Response(
        json_bytes(payload), status_code=status, headers=headers, media_type="application/json"
    )


def json_bytes(payload: Any) -> bytes:
    """`payload` as compact JSON in UTF-8 (NaN and infinities as null)."""
    try:
        text = json.dumps(payload, separators=(",", ":"), allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(payload), separators=(",", ":"))
    return text.encode("utf-8")


def error_response(error: ProtocolError) -> Response:
    """The protocols' error answer: `{"error": message}` with the error's status."""
    headers = {"www-authenticate": "Bearer"} if error.status == 401 else None
    return json_response({"error": str(error)}, status=error.status, headers=headers)


def parse_json(body: bytes) -> Any:
    """`body` as JSON (any value).

    Raises:
        InvalidInputError: Not UTF-8, or malformed JSON (where, said).
    """
    # orjson reads an integer beyond 64 bits as a float, where `json` keeps the integer (and
    # the tensor checks then name it): such bodies go to `json`.
    if _orjson is not None and not _long_integer(body):
        try:
            return _orjson.loads(body)
        except _orjson.JSONDecodeError:
            pass  # `json` takes what orjson refuses (NaN, huge integers) or says what is wrong
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidInputError("the body is not UTF-8 text: send a JSON object") from exc
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    except RecursionError as exc:
        raise InvalidInputError("malformed JSON: nested too deeply") from exc


def _long_integer(body: bytes) -> bool:
    """True if `body` may hold an integer of 19 digits or more: 19 digits in a row that are
    not a number's fraction or exponent (a string's digits count too: they only cost the
    slower parse). One pass of `bytes.translate` and `find`, not a regular expression: the
    regex scan took ~4x orjson's parse, and a float's 19-digit fraction sent whole batches
    to `json`."""
    shape = body.translate(_SHAPE)
    at = shape.find(_RUN)
    while at != -1:
        start = at - 1 if shape[at - 1 : at] == b"-" else at  # a negative integer's sign
        if start == 0 or shape[start - 1] == 32:
            return True
        at = shape.find(_RUN, at + 1)
    return False


def _too_large(size: int, limit: int, *, at_least: bool = False) -> str:
    more = "more than " if at_least else ""
    return (
        f"the body is {more}{size} bytes; this server takes at most {limit} bytes "
        "(headwater serve --max-body-mb)"
    )


def _kind(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
