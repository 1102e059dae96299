"""Model runtimes, one module per framework, imported only when a model of theirs is served.

`create_runtime(source)` picks the runtime for `source.framework`; `RUNTIMES` maps each
framework to the class that serves it, as `"module:Class"`, so serving an XGBoost model never
imports torch.
"""

from __future__ import annotations

import importlib

from headwater.errors import InvalidArgumentError
from headwater.serving.runtimes.base import Explanation, ModelMetadata, ModelRuntime
from headwater.serving.source import ModelSource

__all__ = ["RUNTIMES", "Explanation", "ModelMetadata", "ModelRuntime", "create_runtime"]

#: Framework -> the runtime class serving it.
RUNTIMES = {
    "xgboost": "headwater.serving.runtimes.xgboost:XGBoostRuntime",
    "sklearn": "headwater.serving.runtimes.sklearn:SklearnRuntime",
    "pytorch": "headwater.serving.runtimes.torch:TorchRuntime",
    "custom": "headwater.serving.runtimes.custom:CustomRuntime",
}


def create_runtime(source: ModelSource) -> ModelRuntime:
    """A runtime for `source`, not yet loaded.

    Raises:
        InvalidArgumentError: No runtime serves `source.framework`.
    """
    target = RUNTIMES.get(source.framework)
    if target is None:
        raise InvalidArgumentError(
            f"no model runtime for framework {source.framework!r} of {source.spec!r} "
            f"(runtimes: {', '.join(RUNTIMES)})"
        )
    module, _, name = target.partition(":")
    cls: type[ModelRuntime] = getattr(importlib.import_module(module), name)
    return cls(source)
