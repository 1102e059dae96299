"""The tuning functions in this process: search spaces, Ax experiments, trial wrappers, tune().

Ax 1.3 and the libraries under it warn about their own deprecations, which no caller can
avoid (pandas 3's `inplace=`, Ax's moved modules, `torch.jit.script` in linear_operator), so
those, and only those, are ignored here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_AX_WARNINGS = (
    "ignore:The inplace keyword in DataFrame:pandas.errors.Pandas4Warning",
    "ignore:The 'future.infer_string' option is deprecated:pandas.errors.Pandas4Warning",
    "ignore:The 'lsuffix' and 'rsuffix' keywords:pandas.errors.Pandas4Warning",
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning",
    r"ignore:ax\.service\..* has been moved:DeprecationWarning",
    "ignore:add_tracking_metric is deprecated:DeprecationWarning",
    # Ax's own JSON decoder, reading back an outcome constraint it wrote.
    "ignore:Passing `metric` to OutcomeConstraint is deprecated:DeprecationWarning",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The hook sees the whole session's tests: mark this directory's only.
    here = Path(__file__).parent
    for item in items:
        if here not in item.path.parents:
            continue
        for spec in _AX_WARNINGS:
            item.add_marker(pytest.mark.filterwarnings(spec))
