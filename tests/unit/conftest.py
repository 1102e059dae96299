"""Fixtures shared by the unit tests."""

from __future__ import annotations

import subprocess

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
