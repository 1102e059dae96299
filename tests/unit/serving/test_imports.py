"""The CLI registers `serve` without importing the server, and serving one framework imports
no other framework."""

from __future__ import annotations

from collections.abc import Callable

SERVER = ("fastapi", "uvicorn", "starlette", "anyio", "numpy")
FRAMEWORKS = ("torch", "xgboost", "sklearn", "captum", "lightning")


def test_the_cli_parser_imports_no_server_and_no_framework(
    imported_after: Callable[..., list[str]],
) -> None:
    statement = "import headwater.cli.main as m; m.build_parser().parse_args(['serve', 'x'])"
    assert imported_after(statement, SERVER + FRAMEWORKS) == []


def test_the_server_imports_no_framework_until_a_model_needs_it(
    imported_after: Callable[..., list[str]],
) -> None:
    statement = "import headwater.serving.app, headwater.serving.server, headwater.cli.serve"
    assert imported_after(statement, FRAMEWORKS) == []
