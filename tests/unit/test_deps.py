"""`require` and `require_installed`: an optional library, or an error naming its extra."""

from __future__ import annotations

import sys

import pytest

from headwater._deps import require, require_installed
from headwater.errors import MissingDependencyError

ABSENT = "headwater_no_such_module_7f3a"


def test_a_present_module_is_imported() -> None:
    assert require("json.decoder", "none", "Reading JSON") is sys.modules["json.decoder"]


def test_a_missing_module_names_the_extra() -> None:
    with pytest.raises(MissingDependencyError) as info:
        require(ABSENT, "xgboost", "XGBoost training")
    assert str(info.value) == (
        f"XGBoost training needs {ABSENT!r}. Install it with: pip install 'headwater[xgboost]'"
    )
    assert isinstance(info.value, ImportError)
    assert isinstance(info.value.__cause__, ImportError)


def test_a_dotted_module_names_its_top_or_the_package_given() -> None:
    with pytest.raises(MissingDependencyError, match=rf"needs '{ABSENT}'\."):
        require(f"{ABSENT}.sub", "dask", "X")
    with pytest.raises(MissingDependencyError, match=r"^X needs 'ax-platform'\. Install"):
        require(ABSENT, "hpo", "X", package="ax-platform")


def test_an_install_line_replaces_the_extra_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "json", None)  # as if not installed
    with pytest.raises(MissingDependencyError) as info:
        require("json", "torch", "X", install="pip install torch==2 'headwater[torch]'")
    assert (
        str(info.value)
        == "X needs 'json'. Install it with: pip install torch==2 'headwater[torch]'"
    )


def test_require_installed_checks_without_importing() -> None:
    require_installed(["json"], "none", "X")
    with pytest.raises(MissingDependencyError) as info:
        require_installed(["json", ABSENT, f"{ABSENT}_2"], "serve", "The model server")
    assert str(info.value) == (
        f"The model server needs {ABSENT!r}, '{ABSENT}_2'. Install it with: "
        "pip install 'headwater[serve]'"
    )
    assert ABSENT not in sys.modules
