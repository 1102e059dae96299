"""The tuning modules import neither Ax nor KFP until a function needs them."""

from __future__ import annotations

from collections.abc import Callable


def test_importing_the_functions_imports_no_heavy_library(
    imported_after: Callable[..., list[str]],
) -> None:
    statement = (
        "import headwater.components.hpo\n"
        "import headwater.components.hpo.experiment, headwater.components.hpo.search_space"
    )
    assert imported_after(statement, ("ax", "botorch", "torch", "kfp", "pandas")) == []


def test_a_pipeline_of_tuning_rounds_is_built_without_importing_ax(
    imported_after: Callable[..., list[str]],
) -> None:
    # `headwater run` loads the pipeline file in the engine's process: Ax loads in tasks only.
    statement = (
        "from headwater.hpo import tune\nfrom headwater.components.hpo import create_experiment"
    )
    assert imported_after(statement, ("ax", "botorch", "torch")) == []
