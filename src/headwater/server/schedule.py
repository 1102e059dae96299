"""When a recurring run fires: KFP's triggers (a 6-field cron with seconds, or an interval).

A cron has the fields `second minute hour day-of-month month day-of-week` (KFP's, from
robfig/cron), each `*`, `N`, `A-B`, `*/S`, `A-B/S` or a comma list of those; day of week is
0-6 from Sunday (7 is Sunday too). A 5-field cron (no seconds) is read with second 0. Times
are UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from headwater.server.wire import ApiError, from_time

__all__ = ["Trigger", "parse_trigger"]

_RANGES = ((0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_NAMES = ("second", "minute", "hour", "day of month", "month", "day of week")
#: How far ahead a cron is searched for its next time (a Feb 30 never comes).
_HORIZON_DAYS = 366 * 5


def _field(text: str, index: int) -> frozenset[int]:
    low, high = _RANGES[index]
    values: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if body in ("*", "?"):
            start, end = low, high
        elif "-" in body:
            a, b = body.split("-", 1)
            start, end = int(a), int(b)
        else:
            start = int(body)
            end = high if step_text else start
        if not low <= start <= end <= high or step < 1:
            raise ValueError(part)
        values.update(range(start, end + 1, step))
    if index == 5 and 7 in values:
        values = (values - {7}) | {0}
    return frozenset(values)


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
        self._fields: list[frozenset[int]] = []
        if cron is not None:
            parts = cron.split()
            if len(parts) == 5:
                parts = ["0", *parts]
            if len(parts) != 6:
                raise ApiError(
                    400,
                    f"cron {cron!r} has {len(parts)} fields: KFP's cron has 6, "
                    "'second minute hour day-of-month month day-of-week' (e.g. '0 0 * * * *')",
                )
            for i, part in enumerate(parts):
                try:
                    self._fields.append(_field(part, i))
                except ValueError as exc:
                    raise ApiError(
                        400,
                        f"cron {cron!r}: {part!r} is not a valid {_NAMES[i]} "
                        f"({_RANGES[i][0]}-{_RANGES[i][1]}, *, */N, A-B or lists)",
                    ) from exc

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

    def _next_cron(self, after: float) -> float | None:
        sec, minute, hour, dom, month, dow = self._fields
        moment = datetime.fromtimestamp(int(after), timezone.utc) + timedelta(seconds=1)
        day = moment.replace(hour=0, minute=0, second=0)
        for _ in range(_HORIZON_DAYS):
            weekday = (day.weekday() + 1) % 7  # Sunday 0
            if day.month in month and day.day in dom and weekday in dow:
                for h in sorted(hour):
                    for m in sorted(minute):
                        for s in sorted(sec):
                            at = day.replace(hour=h, minute=m, second=s)
                            if at >= moment:
                                return at.timestamp()
            day += timedelta(days=1)
        return None


def parse_trigger(doc: Any) -> tuple[Trigger, dict[str, Any]]:
    """A request's `trigger` as a `Trigger`, and as it is stored and echoed back.

    Raises:
        ApiError: 400, naming what is wrong.
    """
    if not isinstance(doc, Mapping):
        raise ApiError(
            400,
            "trigger is required: {cron_schedule: {cron}} or "
            "{periodic_schedule: {interval_second}}",
        )
    cron_doc, periodic = doc.get("cron_schedule"), doc.get("periodic_schedule")
    if (cron_doc is None) == (periodic is None):
        raise ApiError(400, "trigger needs exactly one of cron_schedule and periodic_schedule")
    given = cron_doc if cron_doc is not None else periodic
    if not isinstance(given, Mapping):
        raise ApiError(400, "the trigger's schedule must be an object")
    start = from_time(given["start_time"], "start_time") if given.get("start_time") else None
    end = from_time(given["end_time"], "end_time") if given.get("end_time") else None
    stored: dict[str, Any] = {}
    if cron_doc is not None:
        cron = given.get("cron")
        if not isinstance(cron, str) or not cron.strip():
            raise ApiError(400, "cron_schedule.cron is required, e.g. '0 0 * * * *'")
        trigger = Trigger(cron=cron, start=start, end=end)
        stored["cron_schedule"] = {"cron": cron}
        key = "cron_schedule"
    else:
        raw: Any = given.get("interval_second")
        try:
            interval = int(raw)  # int64: a number or a string
        except (TypeError, ValueError) as exc:
            raise ApiError(400, f"periodic_schedule.interval_second {raw!r}: a number") from exc
        if interval < 1:
            raise ApiError(400, f"periodic_schedule.interval_second must be at least 1, got {raw}")
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
