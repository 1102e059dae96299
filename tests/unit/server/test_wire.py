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
