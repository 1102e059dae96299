"""The CLI registers `serve` without importing the server, and serving one framework imports
no other framework."""

from __future__ import annotations

import json
import subprocess
import sys

SERVER = ("fastapi", "uvicorn", "starlette", "anyio", "numpy")
FRAMEWORKS = ("torch", "xgboost", "sklearn", "captum", "lightning")


def imported_after(statement: str, watched: tuple[str, ...]) -> list[str]:
    script = (
        "import json, sys\n"
        f"{statement}\n"
        f"print(json.dumps(sorted(w for w in {list(watched)!r} if w in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_cli_parser_imports_no_server_and_no_framework() -> None:
    statement = "import headwater.cli.main as m; m.build_parser().parse_args(['serve', 'x'])"
    assert imported_after(statement, SERVER + FRAMEWORKS) == []


def test_the_server_imports_no_framework_until_a_model_needs_it() -> None:
    statement = "import headwater.serving.app, headwater.serving.server, headwater.cli.serve"
    assert imported_after(statement, FRAMEWORKS) == []
