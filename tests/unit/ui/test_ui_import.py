"""The web libraries load only when the UI is built, never with the core or the CLI parser."""

from __future__ import annotations

from collections.abc import Callable


def test_core_and_cli_parser_do_not_import_the_web_stack(
    imported_after: Callable[..., list[str]],
) -> None:
    statement = (
        "import headwater, headwater.cli.main, headwater.ui\nheadwater.cli.main.build_parser()"
    )
    web = ("fastapi", "starlette", "uvicorn", "jinja2", "markdown")
    assert imported_after(statement, web) == []
