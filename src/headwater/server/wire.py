"""KFP's v2beta1 wire conventions: errors, timestamps, int64s, list queries (filter, sort, page).

What `kfp.Client` sends and reads (see docs/server.md): snake_case keys, enums as strings,
RFC 3339 times, an empty query value meaning unset, and `filter` as URL-encoded JSON with
integer or named operations and camelCase or snake_case value keys.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

__all__ = [
    "ApiError",
    "ListQuery",
    "from_time",
    "list_query",
    "rfc3339",
    "status_body",
]

#: HTTP status -> google.rpc.Code, for the error body.
_GRPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 409: 6, 415: 3, 500: 13, 501: 12}
_EPOCH = "1970-01-01T00:00:00Z"

#: Filter operations by number (`kfp.Client` sends these) and by name (the KFP UI).
OPERATIONS = {
    1: "EQUALS",
    2: "NOT_EQUALS",
    3: "GREATER_THAN",
    5: "GREATER_THAN_EQUALS",
    6: "LESS_THAN",
    7: "LESS_THAN_EQUALS",
    8: "IN",
    9: "IS_SUBSTRING",
}


class ApiError(Exception):
    """An answer other than 2xx, with KFP's error body (`status_body`)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def status_body(status: int, message: str) -> dict[str, Any]:
    """KFP's error body, a `google.rpc.Status` (`details` empty: the client decodes them)."""
    return {"code": _GRPC_CODES.get(status, 2), "message": message, "details": []}


def rfc3339(epoch: float | None) -> str:
    """An epoch time as KFP writes it; unset times are the epoch, as upstream sends them."""
    if epoch is None:
        return _EPOCH
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat().replace("+00:00", "Z")


def from_time(value: Any, what: str) -> float:
    """An RFC 3339 string (or epoch seconds) from a request, as epoch seconds.

    Raises:
        ApiError: 400, it is neither.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=timezone.utc)
            return parsed.timestamp()
    raise ApiError(400, f"{what}: {value!r} is not an RFC 3339 time such as {_EPOCH!r}")


@dataclass(frozen=True)
class Predicate:
    """One `filter` predicate: `key` `op` `value` (a list for IN)."""

    key: str
    op: str
    value: Any


@dataclass(frozen=True)
class ListQuery:
    """A list request's paging, order and filter."""

    offset: int
    page_size: int
    sort_key: str
    descending: bool
    predicates: tuple[Predicate, ...]

    def next_token(self, total: int) -> str:
        """The `next_page_token` after this page ("" on the last page)."""
        end = self.offset + self.page_size
        return str(end) if end < total else ""


def _given(query: Mapping[str, str], name: str) -> str:
    """A query value, "" when absent or empty (`kfp.Client` sends `namespace=` for unset)."""
    return (query.get(name) or "").strip()


def list_query(
    query: Mapping[str, str], *, id_key: str, sort_keys: Sequence[str], filter_keys: Sequence[str]
) -> ListQuery:
    """Read `page_size`, `page_token`, `sort_by` and `filter` from a list request.

    `name` stands for `display_name` and `id` for `id_key`, as in upstream KFP.

    Args:
        query: The request's query parameters.
        id_key: The resource's id field (`run_id`).
        sort_keys: Keys `sort_by` may name (the first is the default, newest first).
        filter_keys: Keys a filter predicate may name.

    Raises:
        ApiError: 400 for a value that cannot be read, naming the valid ones.
    """
    size_text, token = _given(query, "page_size"), _given(query, "page_token")
    try:
        page_size = int(size_text) if size_text else 20
        offset = int(token) if token else 0
    except ValueError as exc:
        raise ApiError(
            400, f"page_size {size_text!r} / page_token {token!r}: expected numbers"
        ) from exc
    if page_size < 1 or offset < 0:
        raise ApiError(400, f"page_size must be at least 1 (got {page_size})")
    page_size = min(page_size, 1000)
    sort = _given(query, "sort_by").split()
    sort_key, descending = sort_keys[0], True
    if sort:
        sort_key = {"name": "display_name", "id": id_key}.get(sort[0], sort[0])
        descending = len(sort) > 1 and sort[1].lower() == "desc"
        if sort_key not in (*sort_keys, id_key) or len(sort) > 2:
            raise ApiError(
                400,
                f"sort_by {' '.join(sort)!r}: sort by one of {', '.join(sort_keys)}, "
                "optionally followed by 'desc'",
            )
    return ListQuery(
        offset, page_size, sort_key, descending, _predicates(query, id_key, filter_keys)
    )


def _predicates(
    query: Mapping[str, str], id_key: str, keys: Sequence[str]
) -> tuple[Predicate, ...]:
    text = _given(query, "filter")
    if not text:
        return ()
    # The KFP UI encodes the JSON once more than the query string does.
    for _ in range(2):
        if text.startswith("%7B") or text.startswith("%7b"):
            text = urllib.parse.unquote(text)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ApiError(400, f"filter is not JSON: {exc.msg} (at {exc.pos})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("predicates", []), list):
        raise ApiError(400, 'filter must be a JSON object {"predicates": [...]}')
    found = []
    for raw in doc.get("predicates", []):
        if not isinstance(raw, dict):
            raise ApiError(400, f"filter predicate {raw!r} is not an object")
        key, op = raw.get("key"), raw.get("operation", raw.get("op"))
        op = OPERATIONS.get(op, op) if isinstance(op, int) else op
        if not isinstance(op, str) or op not in OPERATIONS.values():
            raise ApiError(
                400,
                f"filter operation {op!r}: use one of {', '.join(OPERATIONS.values())} "
                "(or their numbers)",
            )
        if not isinstance(key, str):
            raise ApiError(400, f"filter predicate {raw!r} has no key")
        key = {"name": "display_name", "id": id_key}.get(key, key)
        if key not in (*keys, id_key):
            raise ApiError(
                400, f"filter key {raw.get('key')!r}: filter on one of {', '.join(keys)}"
            )
        found.append(Predicate(key, op, _value(raw)))
    return tuple(found)


def _value(raw: Mapping[str, Any]) -> Any:
    """A predicate's value, from snake_case or camelCase keys."""
    for name in ("string_value", "int_value", "long_value", "bool_value", "timestamp_value"):
        camel = name.split("_")[0] + name.split("_")[1].title()
        for k in (name, camel):
            if k in raw:
                value = raw[k]
                if name == "timestamp_value":
                    return from_time(value, "filter timestamp_value")
                if name in ("int_value", "long_value"):
                    return int(value)
                return value
    for name in ("string_values", "int_values", "long_values"):
        camel = name.split("_")[0] + name.split("_")[1].title()
        for k in (name, camel):
            if k in raw:
                values = raw[k].get("values", []) if isinstance(raw[k], dict) else raw[k]
                return list(values)
    raise ApiError(400, f"filter predicate {dict(raw)!r} has no value (e.g. string_value)")
