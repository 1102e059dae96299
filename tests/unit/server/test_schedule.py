"""Recurring runs' triggers: KFP's 6-field cron (seconds first) and intervals, start and end."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from headwater.errors import InvalidArgumentError
from headwater.server.schedule import parse_trigger


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize(
    ("cron", "after", "expected"),
    [
        ("0 0 * * * *", "2026-12-05 12:30:10", "2026-12-05 13:00:00"),
        ("*/15 * * * * *", "2026-12-05 12:30:10", "2026-12-05 12:30:15"),
        ("0 30 9 * * 1-5", "2026-12-05 12:00:00", "2026-12-07 09:30:00"),  # Sat -> Mon
        ("0 0 0 1 1 *", "2026-12-05 00:00:00", "2027-01-01 00:00:00"),
        ("0 0 * * *", "2026-12-05 12:00:00", "2026-12-06 00:00:00"),  # 5 fields: second 0
        ("0 0 12 * * 7", "2026-12-05 12:00:00", "2026-12-06 12:00:00"),  # 7 is Sunday
        ("0 0 9 ? * MON-FRI", "2026-12-05 12:00:00", "2026-12-07 09:00:00"),  # names, ?
        ("0 0 0 1 * 1", "2026-12-02 00:00:00", "2026-12-07 00:00:00"),  # 1st OR Monday
        ("0 0 0 30 2 *", "2026-12-05 12:00:00", None),  # February 30 never comes
    ],
    ids=[
        "hourly",
        "every-15s",
        "weekdays",
        "yearly",
        "five-fields",
        "sunday-7",
        "names",
        "day-or",
        "never",
    ],
)
def test_cron_next_time(cron: str, after: str, expected: str | None) -> None:
    trigger, stored = parse_trigger({"cron_schedule": {"cron": cron}})
    assert trigger.next_after(at(after)) == (None if expected is None else at(expected))
    assert stored == {"cron_schedule": {"cron": cron}}


@pytest.mark.parametrize(
    ("cron", "since", "now", "expected"),
    [
        # Four days down under a cron each second: the latest is a moment ago, found at once.
        ("* * * * * *", "2026-12-01 00:00:00", "2026-12-05 12:00:00.5", "2026-12-05 12:00:00"),
        ("0 0 * * * *", "2026-12-05 09:00:00", "2026-12-05 12:59:59", "2026-12-05 12:00:00"),
        ("0 0 * * * *", "2026-12-05 09:00:00", "2026-12-05 13:00:00", "2026-12-05 13:00:00"),
        ("0 0 * * * *", "2026-12-05 12:00:00", "2026-12-05 12:30:00", "2026-12-05 12:00:00"),
    ],
    ids=["every-second-days-down", "hourly", "hourly-at-a-time", "none-since"],
)
def test_the_latest_time_a_no_catchup_run_stands_for(
    cron: str, since: str, now: str, expected: str
) -> None:
    trigger, _ = parse_trigger({"cron_schedule": {"cron": cron}})
    assert trigger.latest(at(since), at(now)) == at(expected)


def test_the_latest_time_is_not_past_the_end() -> None:
    trigger, _ = parse_trigger(
        {"cron_schedule": {"cron": "0 0 * * * *", "end_time": "2026-12-05T10:30:00Z"}}
    )
    assert trigger.latest(at("2026-12-05 09:00:00"), at("2026-12-05 12:30:00")) == at(
        "2026-12-05 10:00:00"
    )


def test_interval_start_and_end() -> None:
    trigger, stored = parse_trigger(
        {
            "periodic_schedule": {
                "interval_second": "60",
                "start_time": "2026-12-05T12:00:00Z",
                "end_time": "2026-12-05T12:02:00Z",
            }
        }
    )
    assert stored["periodic_schedule"]["interval_second"] == "60"
    assert trigger.next_after(at("2026-12-05 11:00:00")) == at("2026-12-05 12:00:00")
    assert trigger.next_after(at("2026-12-05 12:00:00")) == at("2026-12-05 12:01:00")
    assert trigger.next_after(at("2026-12-05 12:01:30")) == at("2026-12-05 12:02:00")
    assert trigger.next_after(at("2026-12-05 12:02:00")) is None  # past the end


def test_interval_without_start_counts_from_the_last_time() -> None:
    trigger, _ = parse_trigger({"periodic_schedule": {"interval_second": 5}})
    assert trigger.next_after(100.0) == 105.0


@pytest.mark.parametrize(
    ("trigger", "named"),
    [
        (None, "trigger is required"),
        ({"cron_schedule": {"cron": "* * *"}}, "has 3 fields"),
        ({"cron_schedule": {"cron": "0 61 * * * *"}}, "'0 61 * * * *' is not valid"),
        ({"cron_schedule": {"cron": "0 0 9 * * XYZ"}}, "is not valid: KFP's cron has 6"),
        ({"periodic_schedule": {"interval_second": 0}}, "from 1 to"),
        ({"periodic_schedule": {"interval_second": "x"}}, "'x'"),
        ({"cron_schedule": {"cron": "0 * * * * *"}, "periodic_schedule": {}}, "exactly one"),
    ],
    ids=["none", "fields", "minute", "day-name", "zero", "nan", "both"],
)
def test_bad_triggers_are_user_errors_naming_the_problem(trigger: object, named: str) -> None:
    with pytest.raises(InvalidArgumentError, match=named.replace("*", r"\*")):
        parse_trigger(trigger)
