"""Optional dependencies: import one, or raise an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from headwater.errors import MissingDependencyError

__all__ = ["require"]


def require(module: str, extra: str, what: str) -> ModuleType:
    """Import `module`, which the extra `extra` installs, for `what`.

    Call it inside the function that needs the library, never at import time::

        xgb = require("xgboost", "xgboost", "XGBoost training")

    Args:
        module: The import name, dotted if need be (`"xgboost.dask"`).
        extra: The extra of `headwater` that installs it (`"xgboost"`, or `"dask,xgboost"`).
        what: What needs it, as the start of a sentence ("XGBoost training").

    Returns:
        The imported module.

    Raises:
        MissingDependencyError: It is not installed (or fails to import); the message names
            the module and the `pip install` line that brings it.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise MissingDependencyError(
            f"{what} needs {top!r}. Install it with: pip install 'headwater[{extra}]'"
        ) from exc
