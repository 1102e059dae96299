"""Inline SVG plots for ClassificationMetrics: a confusion-matrix heatmap and ROC curves.

Generated here so the pages need no plotting library or network; every label is escaped.
"""

from __future__ import annotations

from html import escape
from typing import Any

__all__ = ["confusion_matrix_svg", "roc_svg"]

_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf")  # fmt: skip


def confusion_matrix_svg(labels: list[str], rows: list[list[float]]) -> str:
    """A heatmap: rows are actual classes, columns predicted, darker is more."""
    n = len(rows)
    if not n:
        return ""
    cell, pad = 48, 90
    top = max((max(r, default=0) for r in rows), default=0) or 1
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="confusion" width="{pad + n * cell + 10}" '
        f'height="{pad + n * cell + 10}" role="img" aria-label="confusion matrix">'
    ]
    for i, row in enumerate(rows):
        label = escape(labels[i] if i < len(labels) else str(i))
        parts.append(f'<text x="{pad - 6}" y="{pad + i * cell + cell / 2 + 4}" '
                     f'text-anchor="end">{label}</text>')  # fmt: skip
        for j, value in enumerate(row):
            share = float(value) / top
            fill = f"rgba(31,119,180,{0.08 + 0.92 * share:.3f})"
            ink = "#fff" if share > 0.55 else "#000"
            x, y = float(pad + j * cell), float(pad + i * cell)
            parts.append(
                f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{fill}" '
                f'stroke="#fff"><title>actual {label}, predicted '
                f"{escape(labels[j] if j < len(labels) else str(j))}: {value}</title></rect>"
                f'<text x="{x + cell / 2}" y="{y + cell / 2 + 4}" text-anchor="middle" '
                f'fill="{ink}">{escape(str(value))}</text>'
            )
    for j in range(n):
        label = escape(labels[j] if j < len(labels) else str(j))
        x = float(pad + j * cell + cell / 2)
        parts.append(f'<text x="{x}" y="{pad - 8}" text-anchor="middle">{label}</text>')
    parts.append(f'<text x="{pad}" y="14">predicted →</text>')
    parts.append(f'<text x="4" y="{pad - 8}">actual ↓</text></svg>')
    return "".join(parts)


def roc_svg(curves: list[tuple[str, list[dict[str, Any]]]]) -> str:
    """ROC curves (false positive rate vs true positive rate), overlaid, with a legend."""
    size, pad = 260, 40
    # The legend's column fits its longest name (about 7 px a character at the page's 12 px).
    legend = max([160, *(20 + 7 * len(name) for name, _ in curves)])
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="roc" width="{size + pad + legend}" '
        f'height="{size + pad + 10}" role="img" aria-label="ROC curve">',
        f'<rect x="{pad}" y="10" width="{size}" height="{size}" fill="none" stroke="#999"/>',
        f'<line x1="{pad}" y1="{10 + size}" x2="{pad + size}" y2="10" stroke="#ccc" '
        'stroke-dasharray="4"/>',
        f'<text x="{pad + size / 2}" y="{size + pad + 4}" text-anchor="middle">'
        "false positive rate</text>",
        f'<text x="12" y="{10 + size / 2}" transform="rotate(-90 12 {10 + size / 2})" '
        'text-anchor="middle">true positive rate</text>',
    ]
    for k, (name, points) in enumerate(curves):
        colour = _COLOURS[k % len(_COLOURS)]
        xy = " ".join(
            f"{pad + p['fpr'] * size:.1f},{10 + (1 - p['tpr']) * size:.1f}" for p in points
        )
        parts.append(f'<polyline class="roc-curve" points="{xy}" fill="none" '
                     f'stroke="{colour}" stroke-width="2"/>')  # fmt: skip
        for p in points:
            parts.append(
                f'<circle cx="{pad + p["fpr"] * size:.1f}" cy="{10 + (1 - p["tpr"]) * size:.1f}" '
                f'r="3" fill="{colour}"><title>threshold {escape(str(p["threshold"]))}: '
                f"fpr {p['fpr']:.3f}, tpr {p['tpr']:.3f}</title></circle>"
            )
        parts.append(f'<text x="{pad + size + 10}" y="{24 + 16 * k}" fill="{colour}">'
                     f"{escape(name)}</text>")  # fmt: skip
    parts.append("</svg>")
    return "".join(parts)
