"""The web libraries load only when the UI is built, never with the core or the CLI parser."""

from __future__ import annotations

import subprocess
import sys


def test_core_and_cli_parser_do_not_import_the_web_stack() -> None:
    script = (
        "import sys, headwater, headwater.cli.main, headwater.ui\n"
        "headwater.cli.main.build_parser()\n"
        "web = ('fastapi', 'starlette', 'uvicorn', 'jinja2', 'markdown')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in web))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
