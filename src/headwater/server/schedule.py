"""When a recurring run fires: KFP's triggers (a 6-field cron with seconds, or an interval).

A cron has the fields `second minute hour day-of-month month day-of-week`, as KFP's backend
reads them (robfig/cron with seconds): `*`, `?`, `N`, `A-B`, `*/S`, lists, and month and day
names (`MON-FRI`, `JAN`); when both day fields are restricted, either one matching is enough.
`croniter` steps it (ADR 29). A 5-field cron (no seconds) is read with second 0. Times are UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from headwater.errors import InvalidArgumentError
from headwater.server.kfp.wire import from_time

__all__ = ["Trigger", "parse_trigger"]

#: The longest interval a periodic schedule may have: ten years, in seconds.
_MAX_INTERVAL = 10 * 366 * 86400
_FORM = (
    "KFP's cron has 6 fields, 'second minute hour day-of-month month day-of-week', each *, ?, "
    "N, A-B, */N, a list or names (e.g. '0 0 9 ? * MON-FRI')"
)


class Trigger:
    """A recurring run's trigger: its times from `start` to `end` (epoch seconds)."""

    def __init__(
        self,
        *,
        interval: float | None = None,
        cron: str | None = None,
        start: float | None = None,
        end: float | None = None,
    ) -> None:
        self.interval, self.cron, self.start, self.end = interval, cron, start, end
        self._cron = ""
        if cron is not None:
            from croniter import croniter

            parts = cron.split()
            if len(parts) == 5:
                parts = ["0", *parts]
            if len(parts) != 6:
                raise InvalidArgumentError(f"cron {cron!r} has {len(parts)} fields: {_FORM}")
            self._cron = " ".join(parts)
            if not croniter.is_valid(self._cron, second_at_beginning=True):
                raise InvalidArgumentError(f"cron {cron!r} is not valid: {_FORM}")

    def next_after(self, after: float) -> float | None:
        """The first time strictly after `after` (and not before the start); None past the end."""
        floor = after if self.start is None else max(after, self.start - 1e-6)
        if self.interval is not None:
            # Times are start + k * interval (from the first call's time if no start).
            base = self.start if self.start is not None else floor
            k = max(0, int((floor - base) // self.interval) + 1)
            found: float | None = base + k * self.interval
            if self.start is not None and floor < self.start:
                found = self.start
        else:
            found = self._next_cron(floor)
        if found is None or (self.end is not None and found > self.end):
            return None
        return found

    def latest(self, since: float, now: float) -> float:
        """The last time at or before `now` (and the end), from `since` (a time of this
        trigger's) on: the time a `no_catchup` schedule's one catch-up run was due."""
        if self.interval is not None:
            return (
                since + ((now - since) // self.interval) * self.interval if now > since else since
            )
        from croniter import CroniterBadDateError, croniter

        until = now if self.end is None else min(now, self.end)
        # Times are whole seconds: those before the next second are those at or before `until`.
        moment = datetime.fromtimestamp(int(until) + 1, timezone.utc)
        try:
            found: datetime = croniter(self._cron, moment, second_at_beginning=True).get_prev(
                datetime
            )
        except CroniterBadDateError:
            return since
        return max(since, found.timestamp())

    def _next_cron(self, after: float) -> float | None:
        from croniter import CroniterBadDateError, croniter

        moment = datetime.fromtimestamp(int(after), timezone.utc)
        try:
            found: datetime = croniter(self._cron, moment, second_at_beginning=True).get_next(
                datetime
            )
        except CroniterBadDateError:  # a date that never comes, such as February 30
            return None
        return found.timestamp()


def parse_trigger(doc: Any) -> tuple[Trigger, dict[str, Any]]:
    """A request's `trigger` as a `Trigger`, and as it is stored and echoed back.

    Raises:
        InvalidArgumentError: Naming what is wrong.
    """
    if not isinstance(doc, Mapping):
        raise InvalidArgumentError(
            "trigger is required: {cron_schedule: {cron}} or "
            "{periodic_schedule: {interval_second}}",
        )
    cron_doc, periodic = doc.get("cron_schedule"), doc.get("periodic_schedule")
    if (cron_doc is None) == (periodic is None):
        raise InvalidArgumentError(
            "trigger needs exactly one of cron_schedule and periodic_schedule"
        )
    given = cron_doc if cron_doc is not None else periodic
    if not isinstance(given, Mapping):
        raise InvalidArgumentError("the trigger's schedule must be an object")
    start = from_time(given["start_time"], "start_time") if given.get("start_time") else None
    end = from_time(given["end_time"], "end_time") if given.get("end_time") else None
    if start is not None and end is not None and end < start:
        raise InvalidArgumentError(
            f"end_time {given['end_time']!r} is before start_time {given['start_time']!r}"
        )
    stored: dict[str, Any] = {}
    if cron_doc is not None:
        cron = given.get("cron")
        if not isinstance(cron, str) or not cron.strip():
            raise InvalidArgumentError("cron_schedule.cron is required, e.g. '0 0 * * * *'")
        trigger = Trigger(cron=cron, start=start, end=end)
        stored["cron_schedule"] = {"cron": cron}
        key = "cron_schedule"
    else:
        raw: Any = given.get("interval_second")
        try:
            interval = int(raw)  # int64: a number or a string
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(
                f"periodic_schedule.interval_second {raw!r}: a number"
            ) from exc
        if not 1 <= interval <= _MAX_INTERVAL:
            shown = raw if len(str(raw)) < 40 else f"{str(raw)[:20]}... ({len(str(raw))} digits)"
            raise InvalidArgumentError(
                f"periodic_schedule.interval_second must be from 1 to {_MAX_INTERVAL} (ten "
                f"years), got {shown}"
            )
        trigger = Trigger(interval=interval, start=start, end=end)
        stored["periodic_schedule"] = {"interval_second": str(interval)}
        key = "periodic_schedule"
    if start is not None:
        stored[key]["start_time"] = given["start_time"]
    if end is not None:
        stored[key]["end_time"] = given["end_time"]
    return trigger, stored


def trigger_of(stored: Mapping[str, Any]) -> Trigger:
    """The `Trigger` of a stored trigger (as `parse_trigger` returned it)."""
    return parse_trigger(stored)[0]
