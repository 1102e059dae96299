"""Search spaces checked without Ax: each bad parameter is named, legacy keys are translated."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.components.hpo import search_space
from headwater.errors import InvalidArgumentError


def test_ax_terms_pass_and_kfp_doubles_become_ints_again() -> None:
    space = search_space.normalize(
        [
            {"name": "lr", "bounds": [1e-4, 0.1], "parameter_type": "float", "scaling": "log"},
            # Through KFP a dict's numbers are doubles: [4, 64] arrives as [4.0, 64.0].
            {"name": "width", "bounds": [4.0, 64.0], "parameter_type": "int"},
            {"name": "layers", "values": [1.0, 2.0], "parameter_type": "int", "is_ordered": True},
            {"name": "optimizer", "values": ["adam", "sgd"]},
        ]
    )
    assert space[1]["bounds"] == [4, 64] and all(type(b) is int for b in space[1]["bounds"])
    assert space[2]["values"] == [1, 2] and all(type(v) is int for v in space[2]["values"])
    assert space[3]["parameter_type"] == "str"
    assert search_space.types(space) == {
        "lr": "float",
        "width": "int",
        "layers": "int",
        "optimizer": "str",
    }


def test_the_legacy_axclient_spelling_is_translated() -> None:
    legacy = {
        "name": "lr",
        "type": "range",
        "bounds": [1e-4, 0.2],
        "value_type": "float",
        "log_scale": True,
    }
    assert search_space.normalize([legacy]) == [
        {"name": "lr", "bounds": [1e-4, 0.2], "parameter_type": "float", "scaling": "log"}
    ]


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ([], "the search space is empty"),
        ({"name": "lr"}, "must be a list of parameter dicts, not dict"),
        ([{"bounds": [0, 1]}], "item 0 has no 'name'"),
        (
            [{"name": "lr", "bounds": [0.1, 0.01], "parameter_type": "float"}],
            "parameter 'lr' has bounds [0.1, 0.01]; the lower bound must be below the upper",
        ),
        (
            [{"name": "lr", "bounds": [0, 1], "parameter_type": "float", "scaling": "log"}],
            "parameter 'lr' has a log scale but bounds [0, 1]",
        ),
        (
            [{"name": "width", "bounds": [0.5, 8], "parameter_type": "int"}],
            "int parameter 'width' has bounds [0.5, 8]; give whole numbers",
        ),
        ([{"name": "lr", "bounds": [0, 1]}], "range parameter 'lr' has parameter_type None"),
        (
            [{"name": "lr", "bounds": [0, 1], "values": [1, 2], "parameter_type": "float"}],
            "parameter 'lr' needs either 'bounds' (a range) or 'values' (a choice), not both",
        ),
        (
            [{"name": "lr", "bounds": [0, 1], "parameter_type": "float", "log": True}],
            "parameter 'lr' has unknown key(s) 'log'",
        ),
        ([{"name": "act", "values": ["relu"]}], "choice parameter 'act' has values ['relu']"),
        ([{"name": "k", "values": [1, 2]}], "choice parameter 'k' needs a parameter_type"),
        (
            [{"name": "k", "values": [1, 2.5], "parameter_type": "int"}],
            "choice parameter 'k' of type 'int' has value(s) [2.5]",
        ),
        ([{"name": "k", "type": "fixed", "value": 3}], "parameter 'k' has type 'fixed'"),
        (
            [
                {"name": "lr", "bounds": [0, 1], "parameter_type": "float"},
                {"name": "lr", "bounds": [0, 2], "parameter_type": "float"},
            ],
            "parameter 'lr' appears twice",
        ),
    ],
    ids=[
        "empty",
        "not-a-list",
        "no-name",
        "bounds-reversed",
        "log-of-zero",
        "int-with-fractions",
        "no-type",
        "range-and-choice",
        "unknown-key",
        "one-choice",
        "untyped-numbers",
        "choice-type-mismatch",
        "fixed",
        "duplicate",
    ],
)
def test_a_bad_search_space_is_refused_naming_the_parameter(space: Any, message: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        search_space.normalize(space)
    assert message in str(caught.value)
