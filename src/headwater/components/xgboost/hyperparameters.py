"""XGBoost hyperparameters: the defaults, and a check that names the one XGBoost rejects.

XGBoost only looks at its parameters once training starts, on the workers, and then says
"Invalid Input: 'foo', valid values are: ..." without saying which parameter held 'foo'; a
misspelt name ("max_dept") is not an error at all, only a warning in a worker's log, and the
model trains with the default. `check` trains one round on a few rows in this process first,
so a bad parameter fails in a second, by name, before the cluster reads any data.
"""

from __future__ import annotations

import difflib
import json
import warnings
from collections.abc import Mapping
from typing import Any

from headwater.components.xgboost import _library
from headwater.errors import InvalidArgumentError

#: What `train_xgboost` uses for a parameter the caller does not give.
DEFAULTS: dict[str, Any] = {
    "objective": "binary:logistic",
    "eval_metric": "logloss",
    "tree_method": "hist",
    "max_depth": 8,
    "learning_rate": 0.1,
    "max_bin": 256,
}
#: Set by the component from the cluster, not by the caller.
_RESERVED = {
    "nthread": "each Dask worker trains with its own thread count",
    "n_jobs": "each Dask worker trains with its own thread count",
}
_DEVICES = ("cpu", "cuda", "gpu")
_UNUSED = 'Parameters: { "'


def merged(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """DEFAULTS updated with `params` (a parameter set to None takes XGBoost's own default).

    Whole floats become ints: KFP carries a dict parameter as a protobuf Struct, whose numbers
    are all doubles, so `max_depth: 8` arrives as 8.0, which XGBoost refuses for an integer
    parameter ("expect int but value='8.0'"); a float parameter takes 1 as well as 1.0.
    """
    out = {**DEFAULTS, **(params or {})}
    return {k: _whole(v) for k, v in out.items() if v is not None}


def _whole(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def check(params: Mapping[str, Any], features: list[str]) -> None:
    """Raise, naming the parameter, if XGBoost rejects `params` or ignores one of them.

    Args:
        params: The full parameter set (after `merged`), `device` included.
        features: The feature names, for parameters sized to them (monotone constraints).

    Raises:
        InvalidArgumentError: A parameter XGBoost rejects or does not know (the message names
            it, shows its value and XGBoost's reason, and suggests a known name for a typo).
    """
    for name, why in _RESERVED.items():
        if name in params:
            raise InvalidArgumentError(f"hyperparameter {name!r} cannot be set here: {why}")
    device = str(params.get("device", "cpu"))
    if device.split(":")[0] not in _DEVICES:
        raise InvalidArgumentError(
            f"hyperparameter 'device' is {device!r}; valid values: {', '.join(_DEVICES)}"
        )
    if ":" in device:
        raise InvalidArgumentError(
            f"hyperparameter 'device' is {device!r}: on Dask each GPU worker is given its own "
            "GPU, so name no ordinal; use 'cuda'"
        )
    # The probe runs here, where there may be no GPU: the device is checked above.
    probe = {k: v for k, v in params.items() if k != "device"}
    error, unused, known = _try(probe, features)
    if error is None and not unused:
        return
    if unused:
        name = unused[0]
        close = difflib.get_close_matches(name, known, n=3)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        raise InvalidArgumentError(
            f"hyperparameter {name!r} is not one XGBoost uses with these settings{hint}; "
            "see https://xgboost.readthedocs.io/en/stable/parameter.html"
        )
    for name, value in probe.items():
        alone, _, _ = _try({"objective": probe.get("objective"), name: value}, features)
        if alone is not None:
            raise InvalidArgumentError(
                f"hyperparameter {name!r}={value!r} is rejected by XGBoost: {alone}"
            )
    raise InvalidArgumentError(
        f"XGBoost rejects these hyperparameters together ({_show(probe)}): {error}"
    )


def _try(params: dict[str, Any], features: list[str]) -> tuple[str | None, list[str], list[str]]:
    """Train one round on a few rows: (XGBoost's error or None, unused names, known names)."""
    xgb = _library.xgboost()
    import numpy as np

    n = len(features)
    data = np.tile(np.linspace(0, 1, 8, dtype=np.float32)[:, None], (1, n))
    dtrain = xgb.DMatrix(data, label=np.tile([0.0, 1.0], 4), feature_names=features)
    params = {k: v for k, v in params.items() if v is not None}
    with warnings.catch_warnings(record=True) as seen:
        # XGBoost reports unused parameters as a warning from its C++ logger.
        warnings.simplefilter("always")
        try:
            booster = xgb.train(
                {**params, "nthread": 1}, dtrain, 1, evals=[(dtrain, "probe")], verbose_eval=False
            )
        except xgb.core.XGBoostError as exc:
            return reason(str(exc)), [], []
        except (TypeError, ValueError) as exc:
            return str(exc), [], []
    unused: list[str] = []
    for warning in seen:
        text = str(warning.message)
        if _UNUSED in text:
            names = text.split(_UNUSED, 1)[1].split('" }', 1)[0]
            unused.extend(n.strip(' "') for n in names.split(","))
    return None, unused, sorted(_config_names(json.loads(booster.save_config())))


def _config_names(config: Any) -> set[str]:
    """Every parameter name in a booster's JSON configuration."""
    if isinstance(config, dict):
        names = {k for k, v in config.items() if not isinstance(v, dict | list)}
        for v in config.values():
            names |= _config_names(v)
        return names
    if isinstance(config, list):
        return set().union(*(_config_names(v) for v in config)) if config else set()
    return set()


def reason(message: str) -> str:
    """XGBoost's message without its timestamp, source location and stack trace."""
    lines = [ln for ln in message.splitlines() if ln.strip()]
    lines = lines[: next((i for i, ln in enumerate(lines) if "Stack trace" in ln), len(lines))]
    text = " ".join(lines)
    if "]" in text and text.startswith("["):
        text = text.split("]", 1)[1]
        text = text.split(": ", 1)[1] if text.strip().startswith("/") else text
    return text.strip()[:500]


def _show(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items())
