"""The training curve as one self-contained HTML page: an inline SVG chart per metric.

No plotting library and nothing fetched: the page opens from the artifact store, in KFP's UI
(an HTML artifact) or in Headwater's, as it is.
"""

from __future__ import annotations

import html

_W, _H = 560, 260
_LEFT, _RIGHT, _TOP, _BOTTOM = 60, 20, 30, 40
_COLOURS = {"train": "#1f77b4", "validation": "#d62728"}
_OTHER = ("#2ca02c", "#9467bd", "#8c564b")


def render(history: dict[str, dict[str, list[float]]], best_iteration: int, title: str) -> str:
    """The page: one chart per metric, a line per split, the best iteration marked.

    Args:
        history: `{split: {metric: [value per round]}}`, as `xgboost.train` records it.
        best_iteration: The round the saved model stops at (drawn as a dashed line).
        title: The page's heading.
    """
    metrics = sorted({m for per_split in history.values() for m in per_split})
    charts = "\n".join(_chart(metric, history, best_iteration) for metric in metrics)
    rows = "".join(
        f"<tr><td>{html.escape(split)}</td><td>{html.escape(metric)}</td>"
        f"<td>{values[min(best_iteration, len(values) - 1)]:.6g}</td></tr>"
        for split, per_split in history.items()
        for metric, values in per_split.items()
        if values
    )
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em}"
        "svg{display:block;margin:1em 0}</style></head><body>"
        f"<h2>{html.escape(title)}</h2>"
        f"<p>Best iteration: {best_iteration} (the saved model stops there).</p>"
        f"<table><tr><th>split</th><th>metric</th><th>at best iteration</th></tr>{rows}</table>"
        f"{charts}</body></html>\n"
    )


def _chart(metric: str, history: dict[str, dict[str, list[float]]], best: int) -> str:
    series = {s: v[metric] for s, v in history.items() if v.get(metric)}
    rounds = max(len(v) for v in series.values())
    lo = min(min(v) for v in series.values())
    hi = max(max(v) for v in series.values())
    if hi == lo:
        lo, hi = lo - 0.5, hi + 0.5
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def x(i: float) -> float:
        return _LEFT + plot_w * (i / max(rounds - 1, 1))

    def y(v: float) -> float:
        return _TOP + plot_h * (1 - (v - lo) / (hi - lo))

    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{_W}' height='{_H}' "
        f"role='img' aria-label='{html.escape(metric)} per round'>",
        f"<text x='{_LEFT}' y='18' font-size='14' font-weight='bold'>{html.escape(metric)}</text>",
        f"<rect x='{_LEFT}' y='{_TOP}' width='{plot_w}' height='{plot_h}' fill='none' "
        "stroke='#999'/>",
    ]
    for k in range(5):
        value = lo + (hi - lo) * k / 4
        parts.append(
            f"<text x='{_LEFT - 6}' y='{y(value) + 4:.1f}' font-size='10' "
            f"text-anchor='end'>{value:.4g}</text>"
        )
    for k in range(5):
        i = round((rounds - 1) * k / 4)
        parts.append(
            f"<text x='{x(i):.1f}' y='{_TOP + plot_h + 14}' font-size='10' "
            f"text-anchor='middle'>{i}</text>"
        )
    parts.append(
        f"<text x='{_LEFT + plot_w / 2}' y='{_H - 6}' font-size='11' "
        "text-anchor='middle'>boosting round</text>"
    )
    if 0 <= best < rounds:
        parts.append(
            f"<line x1='{x(best):.1f}' x2='{x(best):.1f}' y1='{_TOP}' y2='{_TOP + plot_h}' "
            "stroke='#555' stroke-dasharray='4 3'/>"
        )
    others = iter(_OTHER)
    for n, (split, values) in enumerate(series.items()):
        colour = _COLOURS.get(split) or next(others, "#7f7f7f")
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values))
        parts.append(
            f"<polyline points='{points}' fill='none' stroke='{colour}' stroke-width='1.8'/>"
        )
        parts.append(
            f"<text x='{_LEFT + plot_w - 4}' y='{_TOP + 14 + 14 * n}' font-size='11' "
            f"text-anchor='end' fill='{colour}'>{html.escape(split)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
