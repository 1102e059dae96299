"""The training curve page: self-contained HTML with one SVG chart per metric."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from headwater.components.xgboost import curve


def test_the_page_draws_each_metric_and_split_inline() -> None:
    history = {
        "train": {"logloss": [0.6, 0.5, 0.45, 0.41], "auc": [0.7, 0.75, 0.78, 0.8]},
        "validation": {"logloss": [0.62, 0.55, 0.53, 0.54], "auc": [0.69, 0.73, 0.74, 0.74]},
    }
    page = curve.render(history, 2, "curve <1>")
    assert page.startswith("<!DOCTYPE html>") and "curve &lt;1&gt;" in page
    assert "http" not in page.replace("http://www.w3.org/2000/svg", "")  # nothing fetched
    svgs = [page[i : page.index("</svg>", i) + 6] for i in _find_all(page, "<svg")]
    assert len(svgs) == 2
    for svg in svgs:
        root = ET.fromstring(svg)  # well-formed
        lines = root.findall("{http://www.w3.org/2000/svg}polyline")
        assert len(lines) == 2 and all(len(p.get("points", "").split()) == 4 for p in lines)
    assert "<td>validation</td><td>logloss</td><td>0.53</td>" in page


def test_a_flat_metric_still_draws() -> None:
    page = curve.render({"train": {"error": [0.0, 0.0]}}, 1, "flat")
    assert "nan" not in page and "<polyline" in page


def _find_all(text: str, needle: str) -> list[int]:
    found, at = [], text.find(needle)
    while at >= 0:
        found.append(at)
        at = text.find(needle, at + 1)
    return found
