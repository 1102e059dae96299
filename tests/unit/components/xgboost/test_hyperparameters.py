"""Hyperparameters XGBoost rejects or ignores fail before training, naming the parameter."""

from __future__ import annotations

import pytest

from headwater.components.xgboost import hyperparameters
from headwater.errors import InvalidArgumentError

FEATURES = ["a", "b-tag", "c"]


def test_the_defaults_pass_and_a_caller_overrides_them() -> None:
    params = hyperparameters.merged({"max_depth": 4, "max_bin": None})
    assert params["max_depth"] == 4 and params["objective"] == "binary:logistic"
    assert "max_bin" not in params  # None: XGBoost's own default
    hyperparameters.check(params, FEATURES)


def test_the_components_default_is_the_functions() -> None:
    from headwater.components.xgboost.components import train_xgboost

    spec = train_xgboost.component_spec.inputs["params"]
    assert spec.default == hyperparameters.DEFAULTS


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"max_depth": -1}, "hyperparameter 'max_depth'=-1 is rejected by XGBoost: value -1"),
        ({"tree_method": "foo"}, "hyperparameter 'tree_method'='foo' is rejected by XGBoost"),
        ({"objective": "binary:logist"}, "hyperparameter 'objective'='binary:logist' is rej"),
        ({"eval_metric": "aucc"}, "hyperparameter 'eval_metric'='aucc' is rejected by XGB"),
        ({"learning_rate": "fast"}, "hyperparameter 'learning_rate'='fast' is rejected by"),
        ({"max_dept": 3}, "hyperparameter 'max_dept' is not one XGBoost uses with these"),
        ({"device": "tpu"}, "hyperparameter 'device' is 'tpu'; valid values: cpu, cuda, gpu"),
        ({"device": "cuda:1"}, "hyperparameter 'device' is 'cuda:1': on Dask each GPU worker"),
        ({"nthread": 4}, "hyperparameter 'nthread' cannot be set here: each Dask worker"),
    ],
    ids=[
        "out-of-range",
        "bad-choice",
        "unknown-objective",
        "unknown-metric",
        "not-a-number",
        "typo",
        "unknown-device",
        "device-ordinal",
        "reserved",
    ],
)
def test_a_rejected_hyperparameter_is_named(params: dict[str, object], expected: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        hyperparameters.check(hyperparameters.merged(params), FEATURES)
    assert str(caught.value).startswith(expected), str(caught.value)
    assert "Stack trace" not in str(caught.value)


def test_a_typo_suggests_the_parameter_meant() -> None:
    with pytest.raises(InvalidArgumentError, match=r"did you mean 'max_depth'"):
        hyperparameters.check(hyperparameters.merged({"max_dept": 3}), FEATURES)


def test_whole_numbers_from_kfp_become_integers() -> None:
    # KFP passes a dict parameter as a protobuf Struct: every number arrives as a double.
    from google.protobuf import json_format, struct_pb2

    struct = struct_pb2.Struct()
    struct.update(hyperparameters.DEFAULTS)
    through_kfp = json_format.MessageToDict(struct)
    assert through_kfp["max_depth"] == 8.0 and isinstance(through_kfp["max_depth"], float)
    params = hyperparameters.merged(through_kfp)
    assert params == hyperparameters.DEFAULTS and isinstance(params["max_depth"], int)
    hyperparameters.check(params, FEATURES)
