"""Fixtures shared by the unit tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from headwater.executors import local, prestart


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen[bytes]]:
    """Every task fork server started from here on (ahead of its executor by `headwater run`,
    or by a `LocalExecutor` itself), for checks on what became of it."""
    servers: list[subprocess.Popen[bytes]] = []
    start = prestart.start_server

    def start_server(base_env: dict[str, str]) -> subprocess.Popen[bytes]:
        servers.append(start(base_env))
        return servers[-1]

    monkeypatch.setattr(prestart, "start_server", start_server)
    monkeypatch.setattr(local, "start_server", start_server)
    return servers


#: `imported_after(statement, watched, env=None)`: see the fixture.
ImportedAfter = Callable[..., list[str]]


def _imported_after(
    statement: str, watched: tuple[str, ...], env: dict[str, str] | None = None
) -> list[str]:
    script = (
        "import json, sys\n"
        f"{statement}\n"
        f"watched = {list(watched)!r}\n"
        "print(json.dumps(sorted(w for w in watched if any("
        "m == w or m.startswith(w + '.') for m in sys.modules))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env if env is not None else dict(os.environ),
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.fixture
def imported_after() -> ImportedAfter:
    """Which of `watched` (packages or dotted modules) a fresh interpreter has imported after
    running `statement` (in `env`, default this environment): lazy imports stay lazy."""
    return _imported_after
