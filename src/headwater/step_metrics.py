"""Metrics over steps (boosting rounds, epochs): logged beside a KFP Metrics artifact, read back.

KFP's `Metrics` artifact holds one value per name, in its metadata. A series of values goes
into the artifact's own file, one JSON object a line::

    {"name": "validation_logloss", "step": 3, "value": 0.4123}

and its last value into the metadata as KFP's `log_metric` puts it, so a pipeline that logs
steps still shows its final metrics on Kubeflow and Vertex AI (which ignore the file).
Headwater's recorder reads the file when it records the artifact and keeps each series,
cut to at most `MAX_POINTS` points, in the metadata store (ADR 45).

In a component::

    from headwater import log_step

    for epoch in range(10):
        log_step(metrics, "val_loss", loss, step=epoch)

Standard library only: this runs inside tasks, and in the engine's recorder thread.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_BYTES",
    "MAX_POINTS",
    "MAX_SERIES",
    "Series",
    "downsample",
    "log_series",
    "log_step",
    "read_steps",
]

#: Points kept per series; a longer one is cut to this many (each bucket's lowest and
#: highest point, and always the first and the last).
MAX_POINTS = 1000
#: Series kept per Metrics artifact (the first this many names logged).
MAX_SERIES = 100
#: Bytes of a step file read; lines past this are not read (the series says so).
MAX_BYTES = 32 * 1024 * 1024
#: Characters of a metric name kept.
MAX_NAME = 200

Point = tuple[int, float | None]

# The last step logged per (file, metric name) by this process, for `step=None`.
_last_step: dict[tuple[str, str], int] = {}


@dataclass(frozen=True)
class Series:
    """One metric over steps.

    Attributes:
        name: The metric's name.
        points: `(step, value)` in step order, at most `MAX_POINTS`; a value that is not a
            finite number is None.
        logged: How many points were logged (more than `len(points)` when cut).
    """

    name: str
    points: list[Point]
    logged: int

    @property
    def last(self) -> float | None:
        """The value at the highest step."""
        return self.points[-1][1] if self.points else None


def log_step(metrics: Any, name: str, value: float, step: int | None = None) -> None:
    """Log `value` of the metric `name` at `step`, and make it the metric's final value.

    Args:
        metrics: A KFP `Output[Metrics]` (anything with `path` and `log_metric`).
        name: The metric's name (`val_loss`).
        value: A number (NaN and infinities are kept as gaps).
        step: A whole number (a round, an epoch, a global step); None: one more than this
            metric's last step in this artifact (0 for the first).

    Raises:
        ValueError: `name` is empty, `value` is not a number, `step` is not a whole number.
    """
    log_series(metrics, name, [value], steps=None if step is None else [step])


def log_series(
    metrics: Any,
    name: str,
    values: Sequence[float],
    steps: Sequence[int] | None = None,
) -> None:
    """Log a whole series at once (XGBoost's evaluation history, say); the last value becomes
    the metric's final value.

    Args:
        metrics: A KFP `Output[Metrics]`.
        name: The metric's name.
        values: The values in step order.
        steps: The step of each value; None: consecutive steps after this metric's last one
            (from 0).

    Raises:
        ValueError: As `log_step`, or `steps` and `values` differ in length.
    """
    name = _checked_name(name)
    numbers = [_number(name, v) for v in values]
    if steps is None:
        start = _next_step(metrics.path, name)
        steps = range(start, start + len(numbers))
    elif len(steps) != len(numbers):
        raise ValueError(
            f"log_series({name!r}): {len(steps)} steps for {len(numbers)} values; give one "
            "step per value, or none"
        )
    whole = [_whole(name, s) for s in steps]
    if not numbers:
        return
    directory = os.path.dirname(metrics.path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(metrics.path, "a", encoding="utf-8") as fh:
        for step, number in zip(whole, numbers, strict=True):
            fh.write(json.dumps({"name": name, "step": step, "value": number}) + "\n")
    key = (os.path.abspath(metrics.path), name)
    if key in _last_step:  # else the next `step=None` reads the file
        _last_step[key] = max(_last_step[key], *whole)
    metrics.log_metric(name, numbers[-1])


def read_steps(path: str, *, max_bytes: int = MAX_BYTES) -> list[Series]:
    """The series in a Metrics artifact's file, each cut to `MAX_POINTS`, by name.

    A file that is missing, a directory, or not step lines (its first line is not one)
    has no series; later lines that are not step lines are skipped. At most `max_bytes` are
    read and `MAX_SERIES` names kept.
    """
    found: dict[str, list[Point]] = {}
    try:
        with open(path, "rb") as fh:
            text = fh.read(max_bytes)
    except OSError:  # missing, a folder, unreadable: no steps were logged there
        return []
    if len(text) == max_bytes:
        text = text[: text.rfind(b"\n") + 1]  # a cut line is not read
    for number, line in enumerate(text.splitlines()):
        point = _parse(line)
        if point is None:
            if number == 0:
                return []  # not a step file: someone else's use of the file
            continue
        name, step, value = point
        series = found.get(name)
        if series is None:
            if len(found) >= MAX_SERIES:
                continue
            series = found[name] = []
        series.append((step, value))
    out = []
    for name in sorted(found):
        points = sorted(found[name], key=lambda p: p[0])  # stable: a repeated step keeps order
        out.append(Series(name, downsample(points), len(points)))
    return out


def downsample(points: Sequence[Point], limit: int = MAX_POINTS) -> list[Point]:
    """At most `limit` of `points` (in step order): the first and last, and from each of
    `limit // 2 - 1` equal runs of the rest its lowest and highest, so spikes stay visible."""
    if len(points) <= limit:
        return list(points)
    if limit < 4:
        return [points[0], points[-1]][:limit]
    inner = points[1:-1]
    buckets = limit // 2 - 1
    kept: list[Point] = [points[0]]
    for b in range(buckets):
        chunk = inner[b * len(inner) // buckets : (b + 1) * len(inner) // buckets]
        if not chunk:
            continue
        valued = [(i, p) for i, p in enumerate(chunk) if p[1] is not None]
        if not valued:
            kept.append(chunk[0])
            continue
        low = min(valued, key=lambda ip: ip[1][1])  # type: ignore[arg-type,return-value]
        high = max(valued, key=lambda ip: ip[1][1])  # type: ignore[arg-type,return-value]
        kept += [p for _, p in sorted({low, high})]
    kept.append(points[-1])
    return kept


def _parse(line: bytes) -> tuple[str, int, float | None] | None:
    try:
        item = json.loads(line)
    except ValueError:
        return None
    if not isinstance(item, dict):
        return None
    name, step, value = item.get("name"), item.get("step"), item.get("value", None)
    if not isinstance(name, str) or not name or isinstance(step, bool):
        return None
    if not isinstance(step, int):
        return None
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        return None
    number = None if value is None or not math.isfinite(value) else float(value)
    return name[:MAX_NAME], step, number


def _next_step(path: str, name: str) -> int:
    """One more than the last step of `name` in the file (read once per file and name)."""
    key = (os.path.abspath(path), name)
    if key not in _last_step:
        _last_step[key] = max(
            (p[0] for s in read_steps(path) if s.name == name for p in s.points), default=-1
        )
    return _last_step[key] + 1


def _checked_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"a step metric needs a name (a non-empty string), got {name!r}")
    return name


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        try:
            value = float(value.item() if hasattr(value, "item") else value)
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(
                f"step metric {name!r}: {value!r} is not a number; log a float"
            ) from exc
    return float(value)


def _whole(name: str, step: Any) -> int:
    if isinstance(step, bool) or not isinstance(step, int):
        if isinstance(step, float) and step.is_integer():
            return int(step)
        try:
            return int(step.__index__())
        except (AttributeError, TypeError) as exc:
            raise ValueError(f"step metric {name!r}: step {step!r} is not a whole number") from exc
    return step
