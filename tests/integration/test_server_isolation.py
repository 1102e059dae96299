"""Tasks on a team server see only what is theirs: a real multi-user `headwater server` (on SQLite,
and on PostgreSQL with password authentication) whose team-b component tries, and fails, to
reach the admin token, the database password, team-a's artifacts, logs and secrets, while
team-a's own work (artifacts between tasks, its secret, packages_to_install, a container
component, a run on Dask) still succeeds."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import isolation
import pytest
from postgres_db import NEEDS_POSTGRES, fresh_database
from server_harness import kfp_client, start_server, stop, wait_state

pytestmark = pytest.mark.integration

DONE = ("SUCCEEDED", "FAILED", "CANCELED")
#: Runs a command as an ordinary user (uid 1000) in a user namespace of its own: the path a
#: server that is not root takes (a user namespace per sandbox, no uid to drop to).
AS_A_USER = ("unshare", "--user", "--map-user=1000", "--map-group=1000", "--")


@dataclass
class TeamServer:
    """A running multi-user server: its home, URL, process, principals and secrets."""

    base: str
    home: Path
    proc: subprocess.Popen[Any]
    tokens: dict[str, str]
    #: Strings no task of team-b may find anywhere (the admin token, the store's password...).
    secrets: list[str] = field(default_factory=list)
    token_file: Path | None = None

    def client(self, who: str, namespace: str) -> Any:
        return kfp_client(self.base, existing_token=self.tokens[who], namespace=namespace)

    def run(self, who: str, namespace: str, pipeline: Any, **arguments: Any) -> Any:
        client = self.client(who, namespace)
        run = client.create_run_from_pipeline_func(
            pipeline, arguments=arguments, namespace=namespace
        )
        return wait_state(client, run.run_id, DONE, timeout=120)


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=NEEDS_POSTGRES)])
def team(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TeamServer]:
    with _team_server(request.param, tmp_path_factory) as server:
        yield server


@contextlib.contextmanager
def _team_server(
    store: str, tmp_path_factory: pytest.TempPathFactory, *args: str, prefix: tuple[str, ...] = ()
) -> Iterator[TeamServer]:
    from headwater.api.principals import add_principal

    home = tmp_path_factory.mktemp(f"team-{store}") / "home"
    home.mkdir()
    with contextlib.ExitStack() as stack:
        if store == "postgres":
            url = stack.enter_context(fresh_database())
        else:
            url = f"sqlite:///{home / 'metadata.db'}"
        tokens = {
            name: str(
                add_principal("token", name, "editor", [ns], created_by="t", metadata=url).token
            )
            for name, ns in (("alice", "team-a"), ("bob", "team-b"))
        }
        admin = f"hwt_admin_{secrets.token_hex(16)}"
        token_file = home.parent / "admin.token"
        token_file.write_text(admin + "\n")
        token_file.chmod(0o600)
        api_key = f"apikey-{secrets.token_hex(12)}"
        set_secret = subprocess.run(
            [sys.executable, "-m", "headwater", "secrets", "set", "--namespace", "team-a", "api",
             f"key={api_key}"],
            env={**os.environ, "HEADWATER_HOME": str(home)}, capture_output=True, text=True,
        )  # fmt: skip
        assert set_secret.returncode == 0, set_secret.stderr
        # The store's URL only in the server's environment, as an operator gives it.
        env = {"HEADWATER_METADATA_URL": url}
        proc, base = start_server(
            home, "--token-file", str(token_file), *args, env=env, prefix=prefix
        )
        hidden = [admin, api_key]
        if store == "postgres":
            hidden.append(url.split("//", 1)[1].split("@", 1)[0])  # user:password
        try:
            yield TeamServer(base, home, proc, {**tokens, "admin": admin}, hidden, token_file)
        finally:
            stop(proc)


def _fork_servers(root: int) -> list[int]:
    """The task fork servers among the descendants of process `root`."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
                parents[int(entry)] = int(fields[1])
    found, frontier = [], [root]
    while frontier:
        frontier = [p for p, parent in parents.items() if parent in frontier]
        found += frontier
    return [
        p for p in found
        if b"headwater.executors.forkserver" in _read(f"/proc/{p}/cmdline")
    ]  # fmt: skip


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError:
        return b""


def _memory_has(pid: int, needles: list[bytes]) -> list[bytes]:
    """Which of `needles` are anywhere in process `pid`'s readable memory."""
    found: set[bytes] = set()
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            match = re.match(r"([0-9a-f]+)-([0-9a-f]+) r", line)
            if not match:
                continue
            start, end = int(match.group(1), 16), int(match.group(2), 16)
            try:
                mem.seek(start)
                chunk = mem.read(end - start)
            except (OSError, OverflowError, ValueError):
                continue
            found.update(n for n in needles if n in chunk)
    return sorted(found)


def test_a_component_of_one_namespace_reaches_nothing_of_the_server_or_another(
    team: TeamServer,
) -> None:
    owned = team.run("alice", "team-a", isolation.owned, text="team-a data")
    assert owned.state == "SUCCEEDED", owned.error
    runs = team.home / "runs" / owned.run_id / "tasks"
    artifact = _output(team, owned.run_id, "produce")
    log = runs / "produce" / "log.txt"
    assert Path(artifact).read_text() == "team-a data"
    assert _output(team, owned.run_id, "consume") == "team-a data|OSError"  # read-only
    assert _output(team, owned.run_id, "with-key") == str(len(team.secrets[1]))  # its secret

    paths = [
        str(team.home / "metadata.db"), str(team.token_file), artifact,
        str(log), str(team.home / "namespaces" / "team-a" / "secrets"),
        str(team.home / "server-logs"), str(team.home / "runs" / owned.run_id),
    ]  # fmt: skip
    writes = [artifact, str(log), str(team.home / "metadata.db")]
    hostile = team.run(
        "bob",
        "team-b",
        isolation.hostile,
        secrets=team.secrets,
        home=str(team.home),
        paths=paths,
        writes=writes,
    )
    assert hostile.state == "SUCCEEDED", hostile.error
    report = json.loads(_output(team, hostile.run_id, "snoop"))
    assert report.pop("pids") <= [1, 2, 3], report
    # Of the server's home it sees its own task's folder and nothing else.
    own = str(team.home / "runs" / hostile.run_id / "tasks" / "snoop")
    assert [p for p in report.pop("home") if not p.startswith(own)] == []
    assert report == {"env": [], "proc": [], "files": [], "read": [], "written": []}
    # team-a's artifact and log are as its run left them.
    assert Path(artifact).read_text() == "team-a data"
    assert "tampered" not in log.read_text() and "producing team-a data" in log.read_text()
    # What every task is a copy of holds none of the secrets either.
    servers = _fork_servers(team.proc.pid)
    assert servers, "no fork server is running"
    for pid in servers:
        assert _memory_has(pid, [s.encode() for s in team.secrets]) == []


def _output(team: TeamServer, run_id: str, task: str) -> str:
    """The `Output` parameter of `task` in run `run_id`."""
    written = team.home / "runs" / run_id / "tasks" / task / "executor_output.json"
    return str(json.loads(written.read_text())["parameterValues"]["Output"])
