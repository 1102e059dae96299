"""KFP's v2beta1 wire conventions: errors, timestamps, states and list queries (filter, sort, page).

What `kfp.Client` sends and reads (see docs/server.md): snake_case keys, enums as strings,
RFC 3339 times, an empty query value meaning unset, and `filter` as URL-encoded JSON with
integer or named operations and camelCase or snake_case value keys. A list query becomes a
`metadata.Page` over the record's own columns; a value that cannot be read is an
`InvalidArgumentError` (a 400 with KFP's error body).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from headwater.errors import InvalidArgumentError
from headwater.metadata.base import Page, Predicate, RunRecord
from headwater.spec.documents import read_json

__all__ = [
    "OPERATIONS",
    "ListSpec",
    "from_time",
    "kfp_state",
    "list_page",
    "next_token",
    "query_value",
    "rfc3339",
    "rpc_status",
    "status_body",
]

#: HTTP status -> google.rpc.Code, for the error body.
_GRPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 409: 6, 413: 3, 415: 3, 500: 13, 501: 12}
_EPOCH = "1970-01-01T00:00:00Z"
#: The latest time a request may name: the start of the year 3000 (epoch seconds).
_MAX_TIME = 32503680000.0

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

#: A run's state -> KFP's RuntimeState. INTERRUPTED depends on the run (`kfp_state`).
_RUN_STATES = {
    "QUEUED": "PENDING",
    "RUNNING": "RUNNING",
    "CANCELING": "CANCELING",
    "SUCCEEDED": "SUCCEEDED",
    "FAILED": "FAILED",
    "CANCELED": "CANCELED",
}
#: KFP's RuntimeState -> the run states it stands for (to filter on).
_FROM_KFP = {
    "PENDING": ["QUEUED"],
    "RUNNING": ["RUNNING"],
    "CANCELING": ["CANCELING"],
    "SUCCEEDED": ["SUCCEEDED"],
    "FAILED": ["FAILED", "INTERRUPTED"],
    "CANCELED": ["CANCELED"],
    "SKIPPED": [],
    "PAUSED": [],
    "RUNTIME_STATE_UNSPECIFIED": [],
}


def rpc_status(message: str, code: int = 2) -> dict[str, Any]:
    """A `google.rpc.Status` (`code` 2 is UNKNOWN; `details` empty: the client decodes them),
    as KFP writes errors: a response's body, a failed run's or task's `error`."""
    return {"code": code, "message": message, "details": []}


def status_body(status: int, message: str) -> dict[str, Any]:
    """KFP's error body for an HTTP `status`."""
    return rpc_status(message, _GRPC_CODES.get(status, 2))


def kfp_state(run: RunRecord, *, resumed_up_to: int) -> str:
    """A run's state as KFP's RuntimeState. An INTERRUPTED run that a server's queue will
    resume (taken fewer than `resumed_up_to` times) is PENDING; any other is FAILED."""
    if run.state == "INTERRUPTED":
        return "PENDING" if 0 < run.starts < resumed_up_to else "FAILED"
    return _RUN_STATES.get(run.state, "RUNTIME_STATE_UNSPECIFIED")


def rfc3339(epoch: float | None) -> str:
    """An epoch time as KFP writes it; unset times are the epoch, as upstream sends them."""
    if epoch is None:
        return _EPOCH
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat().replace("+00:00", "Z")


def from_time(value: Any, what: str) -> float:
    """An RFC 3339 string (or epoch seconds) from a request, as epoch seconds.

    Raises:
        InvalidArgumentError: It is neither.
    """
    found: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        # Bounded before float(), which overflows on an integer past 1e308.
        found = float(value) if -_MAX_TIME <= value <= _MAX_TIME else None
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=timezone.utc)
            found = parsed.timestamp()
    if found is None or not -_MAX_TIME <= found <= _MAX_TIME:
        raise InvalidArgumentError(
            f"{what}: {value!r:.80} is not an RFC 3339 time such as {_EPOCH!r} (before year 3000)"
        )
    return found


@dataclass(frozen=True)
class ListSpec:
    """What a list request of one resource may name.

    Attributes:
        id_key: The resource's id field (`run_id`); `id` stands for it, `name` for
            `display_name`, as upstream.
        sort_keys: Fields `sort_by` may name; the first is the default, newest first.
        filter_keys: Fields a filter predicate may name.
        columns: Field -> the record's column where they differ.
    """

    id_key: str
    sort_keys: Sequence[str]
    filter_keys: Sequence[str]
    columns: Mapping[str, str] = field(default_factory=dict)


def query_value(query: Mapping[str, str], name: str) -> str:
    """A query value, "" when absent or empty (`kfp.Client` sends `namespace=` for unset)."""
    return (query.get(name) or "").strip()


def list_page(query: Mapping[str, str], spec: ListSpec, *where: Predicate) -> Page:
    """Read `page_size`, `page_token`, `sort_by` and `filter` of a list request as a `Page`
    (with `where` added: the namespace, the parent).

    Raises:
        InvalidArgumentError: A value that cannot be read, naming the valid ones.
    """
    size_text, token = query_value(query, "page_size"), query_value(query, "page_token")
    try:
        page_size = int(size_text) if size_text else 20
        offset = int(token) if token else 0
    except ValueError as exc:
        raise InvalidArgumentError(
            f"page_size {size_text!r} / page_token {token!r}: expected numbers"
        ) from exc
    if page_size < 1:
        raise InvalidArgumentError(f"page_size must be at least 1 (got {page_size})")
    if not 0 <= offset <= _MAX_OFFSET:
        raise InvalidArgumentError(
            f"page_token {token!r} is not one this server gave: pass the next_page_token of "
            "the page before"
        )
    sort = query_value(query, "sort_by").split()
    sort_key, descending = spec.sort_keys[0], True
    if sort:
        sort_key = {"name": "display_name", "id": spec.id_key}.get(sort[0], sort[0])
        descending = len(sort) > 1 and sort[1].lower() == "desc"
        if sort_key not in (*spec.sort_keys, spec.id_key) or len(sort) > 2:
            raise InvalidArgumentError(
                f"sort_by {' '.join(sort)!r}: sort by one of {', '.join(spec.sort_keys)}, "
                "optionally followed by 'desc'"
            )
    predicates = (*_predicates(query, spec), *where)
    return Page(
        where=predicates,
        sort=spec.columns.get(sort_key, sort_key),
        descending=descending,
        offset=offset,
        limit=min(page_size, 1000),
    )


#: The deepest page token a list answers (an offset; SQL's OFFSET is at most 2^63 - 1).
_MAX_OFFSET = 2**31
#: Fields whose values are times (epoch seconds in the store): a filter on them takes a number
#: or an RFC 3339 time; any other field takes text.
_TIME_KEYS = frozenset({"created_at", "finished_at", "scheduled_at", "updated_at"})


def next_token(page: Page, total: int) -> str:
    """The `next_page_token` after `page` ("" on the last page)."""
    end = page.offset + page.limit
    return str(end) if end < total else ""


def _predicates(query: Mapping[str, str], spec: ListSpec) -> list[Predicate]:
    text = query_value(query, "filter")
    if not text:
        return []
    # The KFP UI encodes the JSON once more than the query string does.
    for _ in range(2):
        if text.startswith(("%7B", "%7b")):
            text = urllib.parse.unquote(text)
    doc = read_json(text, what="filter")
    if not isinstance(doc, dict) or not isinstance(doc.get("predicates", []), list):
        raise InvalidArgumentError('filter must be a JSON object {"predicates": [...]}')
    found = []
    for raw in doc.get("predicates", []):
        if not isinstance(raw, dict):
            raise InvalidArgumentError(f"filter predicate {raw!r} is not an object")
        key, op = raw.get("key"), raw.get("operation", raw.get("op"))
        op = OPERATIONS.get(op, op) if isinstance(op, int) else op
        if not isinstance(op, str) or op not in OPERATIONS.values():
            raise InvalidArgumentError(
                f"filter operation {op!r}: use one of {', '.join(OPERATIONS.values())} "
                "(or their numbers)"
            )
        if not isinstance(key, str):
            raise InvalidArgumentError(f"filter predicate {raw!r} has no key")
        key = {"name": "display_name", "id": spec.id_key}.get(key, key)
        if key not in (*spec.filter_keys, spec.id_key):
            raise InvalidArgumentError(
                f"filter key {raw.get('key')!r}: filter on one of {', '.join(spec.filter_keys)}"
            )
        value, many = _value(raw, key)
        if many and op != "IN":
            raise InvalidArgumentError(
                f"filter on {key} with {op}: compare with one value (e.g. string_value), or use "
                "IN for a list of them"
            )
        _check_types(key, value if many else [value])
        if op == "IN" and not many:
            value = [value]
        if key == "state":  # KFP's RuntimeState names: the run states they stand for
            op, value = _state_predicate(op, value)
        found.append(Predicate(spec.columns.get(key, key), op, value))
    return found


def _check_types(key: str, values: list[Any]) -> None:
    """Refuse a filter value that is not of the type its field holds: a finite number (or
    RFC 3339 time) for a time, text for the rest."""
    for item in values:
        if key in _TIME_KEYS:
            if (
                isinstance(item, bool)
                or not isinstance(item, int | float)
                or not (-_MAX_TIME <= item <= _MAX_TIME)
            ):
                raise InvalidArgumentError(
                    f"filter on {key}: {item!r:.80} is not a time (an RFC 3339 timestamp_value)"
                )
        elif not isinstance(item, str):
            raise InvalidArgumentError(
                f"filter on {key}: {item!r:.80} is not text (use string_value)"
            )


def _state_predicate(op: str, value: Any) -> tuple[str, Any]:
    names = value if isinstance(value, list) else [value]
    states = [s for name in names for s in _FROM_KFP.get(str(name).upper(), [str(name)])]
    if op in ("EQUALS", "IN"):
        return "IN", states
    if op == "NOT_EQUALS":
        return "NOT_IN", states
    raise InvalidArgumentError(f"filter on state with {op}: use EQUALS, NOT_EQUALS or IN")


#: A predicate's value keys (snake_case; camelCase too): one value, and a list of them.
_ONE_VALUE = ("string_value", "int_value", "long_value", "bool_value", "timestamp_value")
_VALUES = ("string_values", "int_values", "long_values")


def _value(raw: Mapping[str, Any], key: str) -> tuple[Any, bool]:
    """A predicate's value, from snake_case or camelCase keys, and whether it is a list (one of
    the `*_values`, a list or `{"values": [...]}`)."""
    for name in (*_ONE_VALUE, *_VALUES):
        camel = name.split("_")[0] + name.split("_")[1].title()
        for k in (name, camel):
            if k not in raw:
                continue
            if name in _ONE_VALUE:
                return _scalar(name, raw[k]), False
            given = raw[k]
            values = given.get("values", []) if isinstance(given, dict) else given
            if not isinstance(values, list):
                raise InvalidArgumentError(
                    f"filter on {key}: {k} {given!r:.80} is not a list; send "
                    f'{{"{k}": {{"values": [...]}}}}'
                )
            return [_scalar(name[:-1], item) for item in values], True
    raise InvalidArgumentError(f"filter predicate {dict(raw)!r} has no value (e.g. string_value)")


def _scalar(name: str, value: Any) -> Any:
    """One value given under `name` (`int_value`...): a time as epoch seconds, an integer as an
    int64, any other as it came."""
    if name == "timestamp_value":
        return from_time(value, "filter timestamp_value")
    if name in ("int_value", "long_value"):
        try:
            number = int(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidArgumentError(f"filter {name} {value!r:.80} is not an integer") from exc
        if not -(2**63) <= number < 2**63:
            raise InvalidArgumentError(f"filter {name} {value!r:.80} is not an int64")
        return number
    return value
