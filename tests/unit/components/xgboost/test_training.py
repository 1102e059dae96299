"""What train_xgboost decides before it trains: threads per worker, and argument checks."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.components.xgboost import training
from headwater.errors import InvalidArgumentError


@pytest.mark.parametrize(
    ("workers", "expected"),
    [
        ({"a": {"nthreads": 4, "resources": {"CPU": 2.0}}}, 2),
        (
            {
                "a": {"nthreads": 4, "resources": {"CPU": 2.0}},
                "b": {"nthreads": 4, "resources": {"CPU": 3.0}},
            },
            2,
        ),
        ({"a": {"nthreads": 1, "resources": {"CPU": 2.0}}}, None),
        ({"a": {"nthreads": 4, "resources": {}}}, None),
        ({"a": {"nthreads": 4, "resources": {"CPU": 0.5}}}, 1),
        ({}, None),
    ],
    ids=[
        "headwater-cluster",
        "smallest-share",
        "fewer-threads",
        "no-cpu-resource",
        "part-core",
        "none",
    ],
)
def test_xgboost_threads_follow_the_cores_a_worker_advertises(
    workers: dict[str, Any], expected: int | None
) -> None:
    assert training._threads(workers) == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rounds": 0}, "rounds must be a positive integer, got 0"),
        ({"early_stopping_rounds": -1}, "early_stopping_rounds must be a whole number"),
    ],
    ids=["rounds", "early-stopping"],
)
def test_bad_arguments_fail_before_any_work(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        training.train_xgboost("/nowhere/train", "/nowhere/validation", **kwargs)
