"""A team server for the multi-user tests: principals made with the real CLI, and a server that
trusts a proxy at 127.0.0.2 (a client of this machine can send from any 127/8 address)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from server_harness import server_env

#: The trusted proxy's address: requests from 127.0.0.1 that name a user are forged.
PROXY = "127.0.0.2"


def cli(home: Path, *args: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
    """`headwater server ARGS...` against the store in `home` (or `url`)."""
    store = ["--metadata-url", url] if url else []
    return subprocess.run(
        [sys.executable, "-m", "headwater", *store, "server", *args],
        env=server_env(home),
        capture_output=True,
        text=True,
        timeout=60,
    )


def add_token(home: Path, name: str, role: str, *namespaces: str, url: str | None = None) -> str:
    """A new personal token's secret (`headwater server tokens add --json`)."""
    held = [a for ns in namespaces for a in ("--namespace", ns)]
    done = cli(home, "tokens", "add", name, "--role", role, *held, "--json", url=url)
    assert done.returncode == 0, done.stderr
    token: str = json.loads(done.stdout)["token"]
    return token


@dataclass
class Team:
    """The server's base URL and each principal's token."""

    base: str
    home: Path
    tokens: dict[str, str] = field(default_factory=dict)

    def call(
        self,
        who: str | None,
        method: str,
        path: str,
        *,
        proxy_user: str | None = None,
        source: str = "127.0.0.1",
        **kwargs: Any,
    ) -> httpx.Response:
        """One request as `who` (a token's name; None: no token), from `source`."""
        headers = dict(kwargs.pop("headers", {}) or {})
        if who is not None:
            headers["Authorization"] = f"Bearer {self.tokens[who]}"
        if proxy_user is not None:
            headers["kubeflow-userid"] = proxy_user
        transport = httpx.HTTPTransport(local_address=source)
        with httpx.Client(transport=transport, timeout=30) as client:
            return client.request(method, self.base + path, headers=headers, **kwargs)
