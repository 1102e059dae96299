"""Inline SVG line charts: metrics over steps (one chart per metric, a line per task or run)
and a tuning's objective by trial with the best so far.

Drawn on the server like `svg.py`, so the pages need no plotting library, network or
script; every label is escaped. What is drawn is bounded: `MAX_LINES` lines a chart,
`DRAWN_POINTS` points a line (cut as `step_metrics.downsample` cuts), markers with their
values on hover only for lines of up to `MARKED_POINTS` points.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Any

from headwater.step_metrics import downsample

__all__ = ["line_chart_svg", "trials_chart_svg"]

#: Lines drawn in one chart; the rest are named as not drawn.
MAX_LINES = 20
#: Points drawn of one line (the store keeps up to `step_metrics.MAX_POINTS`).
DRAWN_POINTS = 500
#: Lines of at most this many points get a marker per point, its value on hover.
MARKED_POINTS = 60

_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf")  # fmt: skip
_W, _H = 440, 220
_LEFT, _RIGHT, _TOP, _BOTTOM = 58, 12, 26, 34
_LEGEND = 230  # at most: a legend takes what its longest label needs


def _legend_width(labels: Sequence[str]) -> int:
    # About 6.5 px a character at the charts' 11 px.
    return min(_LEGEND, max([110, *(16 + round(6.5 * len(_short(x))) for x in labels)]))


Point = tuple[int, float | None]


def line_chart_svg(
    title: str, lines: Sequence[tuple[str, Sequence[Point]]], *, x_label: str = "step"
) -> str:
    """One metric over steps: a line per `(label, points)`, a legend, hover values.

    Each line is a `<g class="series" data-label data-points>` (`data-points`: the points
    drawn) holding its polylines (one per run of finite values) and, when short, markers.
    """
    labels = _without_common_prefix([label for label, _ in lines])
    drawn = [
        (label, downsample(list(p), DRAWN_POINTS))
        for label, (_, p) in zip(labels, lines, strict=True)
    ]
    drawn = [(label, points) for label, points in drawn[:MAX_LINES] if points]
    values = [v for _, points in drawn for _, v in points if v is not None]
    steps = [s for _, points in drawn for s, _ in points]
    if not values:
        return ""
    box = _Box(min(steps), max(steps), min(values), max(values))
    height = max(_H, _TOP + 16 * len(drawn) + 8)
    legend = _legend_width([label for label, _ in drawn] + ["+99 more not drawn"])
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="step-chart" width="{_W + legend}" '
        f'height="{height}" role="img" aria-label="{escape(title)} by {escape(x_label)}" '
        f'data-metric="{escape(title)}">',
        f'<text x="{_LEFT}" y="16" font-weight="bold">{escape(title)}</text>',
        *box.frame(x_label),
    ]
    for k, (label, points) in enumerate(drawn):
        colour = _COLOURS[k % len(_COLOURS)]
        count = sum(1 for _, v in points if v is not None)
        parts.append(
            f'<g class="series" data-label="{escape(label)}" data-points="{count}" '
            f'stroke="{colour}" fill="{colour}">'
        )
        for run in _finite_runs(points):
            xy = " ".join(f"{box.x(s):.1f},{box.y(v):.1f}" for s, v in run)
            parts.append(f'<polyline points="{xy}" fill="none" stroke-width="1.8"/>')
        if len(points) <= MARKED_POINTS:
            for s, v in points:
                if v is not None:
                    parts.append(
                        f'<circle cx="{box.x(s):.1f}" cy="{box.y(v):.1f}" r="2.5">'
                        f"<title>{escape(label)}: {escape(x_label)} {s}, {v:.6g}</title></circle>"
                    )
        parts.append("</g>")
        parts.append(
            f'<text x="{_W + 8}" y="{_TOP + 12 + 16 * k}" fill="{colour}">'
            f"{escape(_short(label))}<title>{escape(label)}</title></text>"
        )
    if len(lines) > len(drawn):
        parts.append(
            f'<text x="{_W + 8}" y="{_TOP + 12 + 16 * len(drawn)}" fill="#666">'
            f"+{len(lines) - len(drawn)} more not drawn</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def trials_chart_svg(view: dict[str, Any]) -> str:
    """A tuning's objective by trial (`ui.trials.trials_view`): a dot per completed trial, a
    cross on the axis per failed one, and the best so far as a step line."""
    trials = view["trials"]
    done = [t for t in trials if t["objective"] is not None]
    if not done:
        return ""
    indices = [t["trial"] for t in trials]
    values = [t["objective"] for t in done]
    box = _Box(min(indices), max(indices), min(values), max(values))
    objective = escape(view["objective"])
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="trials-chart" width="{_W + 170}" '
        f'height="{_H}" role="img" aria-label="{objective} by trial">',
        f'<text x="{_LEFT}" y="16" font-weight="bold">{objective} by trial</text>',
        *box.frame("trial"),
    ]
    best = [(t["trial"], t["best_so_far"]) for t in trials if t["best_so_far"] is not None]
    if best:
        xy, last = [], None
        for trial, value in best:
            if last is not None:
                xy.append(f"{box.x(trial):.1f},{box.y(last):.1f}")
            xy.append(f"{box.x(trial):.1f},{box.y(value):.1f}")
            last = value
        xy.append(f"{box.x(max(indices)):.1f},{box.y(best[-1][1]):.1f}")
        parts.append(
            f'<polyline class="best-so-far" points="{" ".join(xy)}" fill="none" '
            'stroke="#2ca02c" stroke-width="2"/>'
        )
    for t in done:
        marked = ' class="trial best"' if t["trial"] == view["best"] else ' class="trial"'
        params = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(t["parameters"].items()))
        parts.append(
            f'<circle{marked} cx="{box.x(t["trial"]):.1f}" cy="{box.y(t["objective"]):.1f}" '
            f'r="{5 if t["trial"] == view["best"] else 3.5}" fill="#1f77b4">'
            f"<title>trial {t['trial']}: {objective} {t['objective']:.6g} ({escape(params)})"
            "</title></circle>"
        )
    bottom = _TOP + box.plot_h
    for t in trials:
        if t["status"] == "FAILED":
            x = box.x(t["trial"])
            parts.append(
                f'<path class="trial failed" d="M{x - 4:.1f},{bottom - 4} l8,8 m0,-8 l-8,8" '
                f'stroke="#d62728" stroke-width="2"><title>trial {t["trial"]} failed: '
                f"{escape(str(t['error'] or ''))}</title></path>"
            )
    legend = [("#1f77b4", "completed trial")]
    if any(t["status"] == "FAILED" for t in trials):
        legend.append(("#d62728", "failed trial (×)"))
    if best:
        direction = "lowest" if view["minimize"] else "highest"
        legend.append(("#2ca02c", f"best so far ({direction})"))
    for k, (colour, text) in enumerate(legend):
        parts.append(f'<text x="{_W + 8}" y="{_TOP + 12 + 16 * k}" fill="{colour}">{text}</text>')
    parts.append("</svg>")
    return "".join(parts)


class _Box:
    """The plot area and its scales."""

    plot_w = _W - _LEFT - _RIGHT
    plot_h = _H - _TOP - _BOTTOM

    def __init__(self, x0: float, x1: float, y0: float, y1: float) -> None:
        if x1 == x0:
            x0, x1 = x0 - 1, x1 + 1
        # A margin above and below, so that no point lies on the frame.
        pad = (y1 - y0) * 0.06 if y1 != y0 else abs(y0) * 0.05 or 0.5
        y0, y1 = y0 - pad, y1 + pad
        self.x0, self.x1, self.y0, self.y1 = x0, x1, y0, y1

    def x(self, step: float) -> float:
        return _LEFT + self.plot_w * (step - self.x0) / (self.x1 - self.x0)

    def y(self, value: float) -> float:
        return _TOP + self.plot_h * (1 - (value - self.y0) / (self.y1 - self.y0))

    def frame(self, x_label: str) -> list[str]:
        parts = [
            f'<rect x="{_LEFT}" y="{_TOP}" width="{self.plot_w}" height="{self.plot_h}" '
            'fill="none" stroke="#bbb"/>'
        ]
        for value in _ticks(self.y0, self.y1):
            y = self.y(value)
            parts.append(
                f'<line x1="{_LEFT}" x2="{_LEFT + self.plot_w}" y1="{y:.1f}" y2="{y:.1f}" '
                'stroke="#eee"/>'
                f'<text x="{_LEFT - 5}" y="{y + 4:.1f}" text-anchor="end" font-size="10">'
                f"{_tick_label(value)}</text>"
            )
        for step in _ticks(self.x0, self.x1, whole=True):
            parts.append(
                f'<text x="{self.x(step):.1f}" y="{_TOP + self.plot_h + 13}" font-size="10" '
                f'text-anchor="middle">{_tick_label(step)}</text>'
            )
        parts.append(
            f'<text x="{_LEFT + self.plot_w / 2}" y="{_H - 4}" font-size="11" '
            f'text-anchor="middle">{escape(x_label)}</text>'
        )
        return parts


def _ticks(lo: float, hi: float, *, whole: bool = False) -> list[float]:
    """Four to six round values (1, 2, 2.5 or 5 times a power of ten apart), `lo` to `hi`."""
    raw = (hi - lo) / 5
    if raw <= 0:
        return [lo]
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    if whole:
        step = max(1.0, round(step))
    first = math.ceil(lo / step - 1e-9)
    ticks = []
    k = first
    while k * step <= hi + 1e-9 * step:
        value = k * step
        ticks.append(0.0 if abs(value) < step * 1e-9 else value)
        k += 1
    return ticks


def _tick_label(value: float) -> str:
    """A tick's value, short: `0.25`, `12`, `1.5e+05`."""
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))
    if 1e-3 <= abs(value) < 1e5:
        return f"{value:.6g}"
    return f"{value:.2g}"


def _finite_runs(points: Sequence[Point]) -> list[list[tuple[int, float]]]:
    """The points split where a value is missing (a gap in the line)."""
    runs: list[list[tuple[int, float]]] = [[]]
    for step, value in points:
        if value is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append((step, value))
    return [r for r in runs if r]


def _without_common_prefix(labels: list[str]) -> list[str]:
    """The labels without the dotted prefix they all share (a nested pipeline's name):
    `tune.train-trial[0]`, `tune.train-trial[1]` -> `train-trial[0]`, `train-trial[1]`."""
    if len(labels) < 2:
        return labels
    first, last = min(labels), max(labels)  # the shared prefix of all is theirs
    shared = next(
        (first[:i] for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), first
    )
    cut = shared.rfind(".") + 1
    if cut == 0 or any(len(label) == cut for label in labels):
        return labels
    return [label[cut:] for label in labels]


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _short(label: str, limit: int = 32) -> str:
    return label if len(label) <= limit else "…" + label[-(limit - 1) :]
