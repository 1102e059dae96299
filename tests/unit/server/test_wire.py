"""KFP's list-request conventions as `kfp.Client` and the KFP UI send them."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from headwater.server.wire import ApiError, from_time, list_query, rfc3339

KEYS = {
    "id_key": "run_id",
    "sort_keys": ("created_at", "display_name"),
    "filter_keys": ("display_name", "storage_state", "created_at"),
}


def test_empty_values_are_unset() -> None:
    query = list_query({"page_token": "", "page_size": "", "sort_by": "", "filter": ""}, **KEYS)
    assert (query.offset, query.page_size, query.sort_key, query.descending) == (
        0,
        20,
        "created_at",
        True,
    )
    assert query.predicates == ()


@pytest.mark.parametrize(
    "raw",
    [
        # kfp.Client: integer operation, camelCase value.
        json.dumps({"predicates": [{"operation": 1, "key": "display_name", "stringValue": "x"}]}),
        # The KFP UI: named operation, snake_case value, encoded once more.
        urllib.parse.quote(
            json.dumps(
                {"predicates": [{"operation": "EQUALS", "key": "name", "string_value": "x"}]}
            )
        ),
    ],
    ids=["client", "ui"],
)
def test_filters_from_the_client_and_the_ui(raw: str) -> None:
    [predicate] = list_query({"filter": raw}, **KEYS).predicates
    assert (predicate.key, predicate.op, predicate.value) == ("display_name", "EQUALS", "x")


def test_sort_aliases_and_order() -> None:
    query = list_query({"sort_by": "name desc"}, **KEYS)
    assert (query.sort_key, query.descending) == ("display_name", True)
    assert list_query({"sort_by": "id"}, **KEYS).sort_key == "run_id"
    assert list_query({"sort_by": "created_at"}, **KEYS).descending is False


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"filter": "{nope"}, "filter is not JSON"),
        (
            {
                "filter": json.dumps(
                    {"predicates": [{"operation": 4, "key": "name", "stringValue": "x"}]}
                )
            },
            "filter operation",
        ),
        (
            {
                "filter": json.dumps(
                    {"predicates": [{"operation": 1, "key": "secret", "stringValue": "x"}]}
                )
            },
            "filter key 'secret'",
        ),
        ({"filter": json.dumps({"predicates": [{"operation": 1, "key": "name"}]})}, "has no value"),
        ({"sort_by": "colour"}, "sort_by 'colour'"),
        ({"page_size": "ten"}, "page_size"),
        ({"page_size": "0"}, "at least 1"),
    ],
    ids=["json", "op", "key", "value", "sort", "size", "zero"],
)
def test_bad_list_queries_are_400_naming_the_problem(query: dict[str, str], named: str) -> None:
    with pytest.raises(ApiError) as caught:
        list_query(query, **KEYS)
    assert caught.value.status == 400 and named in caught.value.message


def test_times_round_trip_and_unset_is_the_epoch() -> None:
    assert rfc3339(None) == "1970-01-01T00:00:00Z"
    assert from_time(rfc3339(1700000000.5), "t") == 1700000000.5
    with pytest.raises(ApiError):
        from_time("yesterday", "t")
