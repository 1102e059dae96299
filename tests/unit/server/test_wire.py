"""KFP's list-request conventions as `kfp.Client` and the KFP UI send them."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from headwater.errors import InvalidArgumentError
from headwater.metadata.base import Predicate, RunRecord
from headwater.server.kfp.wire import ListSpec, from_time, kfp_state, list_page, rfc3339

SPEC = ListSpec(
    id_key="run_id",
    sort_keys=("created_at", "display_name"),
    filter_keys=("display_name", "storage_state", "created_at", "state"),
)


def test_empty_values_are_unset() -> None:
    page = list_page({"page_token": "", "page_size": "", "sort_by": "", "filter": ""}, SPEC)
    assert (page.offset, page.limit, page.sort, page.descending) == (0, 20, "created_at", True)
    assert page.where == ()


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
    [predicate] = list_page({"filter": raw}, SPEC).where
    assert predicate == Predicate("display_name", "EQUALS", "x")


def test_sort_aliases_and_order() -> None:
    page = list_page({"sort_by": "name desc"}, SPEC)
    assert (page.sort, page.descending) == ("display_name", True)
    assert list_page({"sort_by": "id"}, SPEC).sort == "run_id"
    assert list_page({"sort_by": "created_at"}, SPEC).descending is False


def test_kfp_states_filter_on_the_run_states_they_stand_for() -> None:
    raw = json.dumps({"predicates": [{"operation": 1, "key": "state", "stringValue": "FAILED"}]})
    [predicate] = list_page({"filter": raw}, SPEC).where
    assert predicate == Predicate("state", "IN", ["FAILED", "INTERRUPTED"])
    raw = json.dumps({"predicates": [{"operation": 2, "key": "state", "stringValue": "PENDING"}]})
    assert list_page({"filter": raw}, SPEC).where == (Predicate("state", "NOT_IN", ["QUEUED"]),)


@pytest.mark.parametrize(
    ("state", "starts", "shown"),
    [
        ("QUEUED", 0, "PENDING"),
        ("CANCELING", 1, "CANCELING"),
        ("INTERRUPTED", 1, "PENDING"),  # the queue resumes it
        ("INTERRUPTED", 3, "FAILED"),  # it will not
        ("INTERRUPTED", 0, "FAILED"),  # `headwater run`'s: no queue resumes it
    ],
)
def test_run_states_as_kfp_shows_them(state: str, starts: int, shown: str) -> None:
    run = RunRecord("r", "p", "d", state, starts=starts)
    assert kfp_state(run, resumed_up_to=3) == shown


def _filter(**predicate: object) -> dict[str, str]:
    return {"filter": json.dumps({"predicates": [{"key": "name", **predicate}]})}


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
        ({"filter": '{"predicates": [], "n": 1' + "0" * 5000 + "}"}, "more than 4300 digits"),
        # Filter values of the wrong shape.
        (_filter(operation="IN", string_values="x"), "display_name: string_values 'x' is not a"),
        (_filter(operation="IN", stringValues=5), "display_name: stringValues 5 is not a list"),
        (_filter(operation="IN", string_values={"values": "x"}), "is not a list"),
        (_filter(operation="IN", string_values={"values": None}), "is not a list"),
        (_filter(operation="EQUALS", string_values=["x"]), "display_name with EQUALS"),
        (_filter(operation="EQUALS", string_value=["x", "y"]), "is not text"),
        (_filter(key="created_at", operation="IN", string_values=["x"]), "'x' is not a time"),
    ],
    ids=["json", "op", "key", "value", "sort", "size", "zero", "long-int",
         "text", "number", "values-text", "values-null", "list-for-equals", "list-as-one",
         "text-for-time"],
)  # fmt: skip
def test_bad_list_queries_are_user_errors_naming_the_problem(
    query: dict[str, str], named: str
) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        list_page(query, SPEC)
    assert named in str(caught.value)


def test_times_round_trip_and_unset_is_the_epoch() -> None:
    assert rfc3339(None) == "1970-01-01T00:00:00Z"
    assert from_time(rfc3339(1700000000.5), "t") == 1700000000.5
    with pytest.raises(InvalidArgumentError):
        from_time("yesterday", "t")


def test_filters_take_lists_as_upstream_writes_them() -> None:
    page = list_page(_filter(operation="IN", stringValues={"values": ["a", "b"]}), SPEC)
    assert page.where == (Predicate("display_name", "IN", ["a", "b"]),)
    page = list_page(_filter(key="created_at", operation="IN", long_values=["1", "2"]), SPEC)
    assert page.where == (Predicate("created_at", "IN", [1, 2]),)
    page = list_page(_filter(operation="IN", string_value="a"), SPEC)  # one value: a list of one
    assert page.where == (Predicate("display_name", "IN", ["a"]),)


@pytest.mark.parametrize(
    "value",
    ["99999999999999999999-01-01T00:00:00Z", 10**30, 10**400, -(10**400), "3000-01-02T00:00:00Z"],
    ids=["year-1e20", "1e30-seconds", "1e400-seconds", "minus-1e400", "year-3000"],
)
def test_times_past_year_3000_are_user_errors(value: object) -> None:
    with pytest.raises(InvalidArgumentError, match="before year 3000"):
        from_time(value, "t")
    query = _filter(key="created_at", operation="GREATER_THAN", timestamp_value=value)
    with pytest.raises(InvalidArgumentError, match="filter timestamp_value"):
        list_page(query, SPEC)
