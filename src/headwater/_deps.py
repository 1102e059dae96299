"""Optional dependencies: import one, or raise an error that names the extra to install."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from types import ModuleType

from headwater.errors import MissingDependencyError

__all__ = ["require", "require_installed"]


def require(
    module: str,
    extra: str,
    what: str,
    *,
    package: str | None = None,
    install: str | None = None,
) -> ModuleType:
    """Import `module`, which the extra `extra` installs, for `what`.

    Call it inside the function that needs the library, never at import time::

        xgb = require("xgboost", "xgboost", "XGBoost training")

    A missing one reads "XGBoost training needs 'xgboost'. Install it with: pip install
    'headwater[xgboost]'".

    Args:
        module: The import name, dotted if need be (`"xgboost.dask"`).
        extra: The extra of `headwater` that installs it (`"xgboost"`, or `"dask,xgboost"`).
        what: What needs it, as the subject of a sentence ("XGBoost training").
        package: The name the message gives it, when not the top of `module` (the
            distribution, "ax-platform" for `ax`).
        install: The install command, when more than `pip install 'headwater[EXTRA]'` (a
            pinned torch first).

    Returns:
        The imported module.

    Raises:
        MissingDependencyError: It is not installed (or fails to import); the message names
            it and the `pip install` line that brings it.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        name = package or module.split(".")[0]
        raise MissingDependencyError(_message(what, [name], extra, install)) from exc


def require_installed(
    modules: Sequence[str], extra: str, what: str, *, install: str | None = None
) -> None:
    """Check that `modules` are installed, without importing them (for libraries that are
    slow to import, or that run in another process).

    Args:
        modules: Top-level import names.
        extra: The extra of `headwater` that installs them.
        what: What needs them, as the subject of a sentence ("The model server").
        install: The install command, when more than `pip install 'headwater[EXTRA]'`.

    Raises:
        MissingDependencyError: Some are not installed; the message names every one of them.
    """
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingDependencyError(_message(what, missing, extra, install))


def _message(what: str, names: Sequence[str], extra: str, install: str | None) -> str:
    command = install or f"pip install 'headwater[{extra}]'"
    return f"{what} needs {', '.join(repr(n) for n in names)}. Install it with: {command}"
