"""Importing Headwater's core must not import heavy optional libraries or the KFP API client.

Each check runs in a fresh interpreter, since this test process has already imported kfp.
"""

from collections.abc import Callable

import pytest

HEAVY = ("torch", "xgboost", "dask", "distributed", "ax", "kfp.client", "kfp_server_api")


@pytest.mark.parametrize(
    "statement",
    [
        "import headwater",
        "import headwater, headwater.engine.runner, headwater.cli.main",
    ],
    ids=["package", "runner-and-cli"],
)
def test_core_imports_no_heavy_dependencies(
    statement: str, imported_after: Callable[..., list[str]]
) -> None:
    assert imported_after(statement, HEAVY) == []


def test_importing_headwater_does_not_import_kfp(imported_after: Callable[..., list[str]]) -> None:
    assert imported_after("import headwater", ("kfp", "google.protobuf", "celpy")) == []


def test_the_check_sees_imports(imported_after: Callable[..., list[str]]) -> None:
    # Guard against a check that can never fail: json is certainly imported by the script.
    assert imported_after("import headwater, email.mime", ("email", "json")) == ["email", "json"]


def test_run_imports_no_sqlalchemy_or_yaml_before_its_first_task(
    imported_after: Callable[..., list[str]],
) -> None:
    # What `headwater run` imports before its first task: SQLAlchemy (ADR 8), YAML (read only
    # for a .yaml file), fsspec and asyncio (remote stores) and logging come later if at all.
    statement = (
        "import headwater.cli.main, headwater.cli.progress, headwater.engine.runner, "
        "headwater.executors.local, headwater.spec.loader, headwater.metadata.recorder, "
        "headwater.metadata.lite"
    )
    lazy = ("sqlalchemy", "alembic", "yaml", "fsspec", "asyncio", "logging", "kfp")
    assert imported_after(statement, lazy) == []
