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
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import isolation
import pytest
from container_images import needs_podman
from postgres_db import NEEDS_POSTGRES, fresh_database
from server_harness import kfp_client, start_server, stop, wait_state
from team_server import cli
from test_package_envs import private_index, wheel

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


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TeamServer]:
    """A team server on SQLite, shared by this module's tests."""
    with _team_server("sqlite", tmp_path_factory) as server:
        yield server


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=NEEDS_POSTGRES)])
def any_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TeamServer]:
    """The team server on SQLite, then one on PostgreSQL with password authentication (for
    the tests where the store's password is a secret to look for)."""
    if request.param == "sqlite":
        yield request.getfixturevalue("team")
        return
    with _team_server(request.param, tmp_path_factory) as server:
        yield server


@contextlib.contextmanager
def _team_server(
    store: str,
    tmp_path_factory: pytest.TempPathFactory,
    *args: str,
    prefix: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
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
        environ = {"HEADWATER_METADATA_URL": url, "HEADWATER_CONTAINERS": "auto", **(env or {})}
        proc, base = start_server(
            home, "--token-file", str(token_file), *args, env=environ, prefix=prefix
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
    any_store: TeamServer,
) -> None:
    team = any_store
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
    assert team.home.stat().st_mode & 0o777 == 0o700  # no other user of the machine reads it
    # team-a's artifact and log are as its run left them.
    assert Path(artifact).read_text() == "team-a data"
    assert "tampered" not in log.read_text() and "producing team-a data" in log.read_text()
    # What every task is a copy of holds none of the secrets either.
    servers = _fork_servers(team.proc.pid)
    assert servers, "no fork server is running"
    for pid in servers:
        assert _memory_has(pid, [s.encode() for s in team.secrets]) == []


def _output(team: TeamServer, run_id: str, task: str, name: str = "Output") -> str:
    """Output parameter `name` of `task` in run `run_id`, as the run recorded it."""
    (execution,) = [e for e in _executions(team, run_id) if e.task == task]
    return str(execution.outputs[name])


def _scan_command_lines(stop: threading.Event, seen: set[bytes]) -> None:
    """Collect every command line on the machine until `stop` is set."""
    while not stop.is_set():
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                seen.add(_read(f"/proc/{entry}/cmdline"))
        time.sleep(0.05)


def test_no_secret_is_on_any_command_line_while_the_server_runs_tasks(
    any_store: TeamServer, tmp_path: Path
) -> None:
    team = any_store
    wheel(tmp_path / "index", "hwtestpkg", "private")
    password = f"pw{secrets.token_hex(8)}"
    with private_index(tmp_path / "index") as url:
        index = url.replace("http://", f"http://reader:{password}@")
        stop, seen = threading.Event(), set[bytes]()
        scanner = threading.Thread(target=_scan_command_lines, args=(stop, seen), daemon=True)
        scanner.start()
        try:
            run = team.run("bob", "team-b", isolation.installing(index))
        finally:
            stop.set()
            scanner.join()
    assert run.state == "SUCCEEDED", run.error
    # pip ran, sandboxed, into team-b's own environment, and the task imported it from there.
    value, _, module = _output(team, run.run_id, "installed").partition("@")
    assert value == "private" and str(team.home / "envs") in module
    lines = b"\n".join(seen)
    assert b"bwrap" in lines and b"headwater.executors.forkserver" in lines  # it saw them
    for secret in [*team.secrets, password]:
        assert secret.encode() not in lines, secret


def test_a_package_entry_that_is_a_pip_option_fails_the_run_naming_it(team: TeamServer) -> None:
    run = team.run("bob", "team-b", isolation.option_as_package("http://127.0.0.1:9/simple"))
    assert run.state == "FAILED"
    said = run.error.message
    assert "'--extra-index-url http://127.0.0.1:9/simple' is a pip option" in said
    assert "\n" not in said


def test_a_task_registers_its_own_model_through_the_engine_and_nothing_else(
    team: TeamServer,
) -> None:
    from headwater.metadata import open_reader

    registered = team.run("alice", "team-a", isolation.registering)
    assert registered.state == "SUCCEEDED", registered.error
    recorded = {e.task: e.outputs for e in _executions(team, registered.run_id)}
    assert recorded["register-model"]["version"] == 1  # the engine's answer, not the task's 0
    stolen = team.run("bob", "team-b", isolation.stealing, path="/etc/hostname")
    assert stolen.state == "FAILED"
    assert "may register only a model the task was given as an input" in stolen.error.message
    # Nor a version of a model another namespace registered (it could demote theirs).
    theirs = team.run("bob", "team-b", isolation.registering)
    assert theirs.state == "FAILED"
    assert "model 'toy' was made outside namespace 'team-b'" in theirs.error.message
    url = _store_url(team)
    store = open_reader(url)
    assert store is not None
    try:
        (model,) = store.list_models(name="toy")
        assert model.run_id == registered.run_id and store.list_models(name="stolen") == []
    finally:
        store.close()


def _executions(team: TeamServer, run_id: str) -> list[Any]:
    from headwater.metadata import open_reader

    store = open_reader(_store_url(team))
    assert store is not None
    try:
        return list(store.list_executions(run_id))
    finally:
        store.close()


def _store_url(team: TeamServer) -> str:
    environ = _read(f"/proc/{team.proc.pid}/environ").split(b"\0")
    found = [v for v in environ if v.startswith(b"HEADWATER_METADATA_URL=")]
    return found[0].split(b"=", 1)[1].decode()


@needs_podman
def test_a_container_task_sees_only_its_own_mounts(team: TeamServer, busybox_image: str) -> None:
    owned = team.run("alice", "team-a", isolation.owned, text="for the container")
    assert owned.state == "SUCCEEDED", owned.error
    artifact = _output(team, owned.run_id, "produce")
    peeked = team.run("bob", "team-b", isolation.peeking(busybox_image), path=artifact)
    assert peeked.state == "SUCCEEDED", peeked.error
    seen, count = _output_file(team, peeked.run_id, "peek", "seen").split()
    assert seen == "hidden" and int(count) < 10  # its own PID namespace (the host has hundreds)


def _output_file(team: TeamServer, run_id: str, task: str, name: str) -> str:
    return (team.home / "runs" / run_id / "tasks" / task / "outputs" / name).read_text()


def test_a_server_that_is_not_root_sandboxes_its_tasks_too(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    if not _can_be_a_user():
        pytest.skip("runs as uid 1000 in a user namespace (needs root and `unshare --user`)")
    with _team_server("sqlite", tmp_path_factory, prefix=AS_A_USER) as team:
        owned = team.run("alice", "team-a", isolation.owned, text="team-a data")
        assert owned.state == "SUCCEEDED", owned.error
        artifact = _output(team, owned.run_id, "produce")
        writes = [artifact, str(team.home / "metadata.db")]
        hostile = team.run(
            "bob", "team-b", isolation.hostile, secrets=team.secrets, home=str(team.home),
            paths=[*writes, str(team.token_file)], writes=writes,
        )  # fmt: skip
        assert hostile.state == "SUCCEEDED", hostile.error
        report = json.loads(_output(team, hostile.run_id, "snoop"))
        assert report["read"] == report["written"] == report["files"] == report["proc"] == []
        record = json.loads(
            (team.home / "runs" / hostile.run_id / "tasks" / "snoop" / "sandbox.json").read_text()
        )
        assert record["user_namespace"] is True and record["uid"] == 1000


def test_a_machine_that_cannot_sandbox_refuses_a_team_server_in_one_line(tmp_path: Path) -> None:
    from headwater.api.principals import add_principal

    home = tmp_path / "home"
    home.mkdir()
    add_principal("token", "alice", "editor", ["team-a"], created_by="t",
                  metadata=f"sqlite:///{home / 'metadata.db'}")  # fmt: skip
    env = {**os.environ, "HEADWATER_HOME": str(home), "PATH": str(Path(sys.executable).parent)}
    env.pop("HEADWATER_METADATA_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "headwater", "server", "--port", "0"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert "bubblewrap (bwrap) is not installed" in done.stderr
    assert "--no-sandbox" in done.stderr
    proc, base = start_server(home, "--no-sandbox", env={"PATH": env["PATH"]})
    try:
        health = httpx.get(f"{base}/apis/v2beta1/healthz", timeout=10).json()
    finally:
        stop(proc)
    assert health["multi_user"] is True and health["tasks_sandboxed"] is False
    assert "not isolated" in health["warning"]
    assert (
        "tasks of this multi-user server are not isolated" in (tmp_path / "server.log").read_text()
    )


def test_on_dask_a_namespace_stores_with_its_own_credentials_and_cannot_reach_the_cluster(
    tmp_path_factory: pytest.TempPathFactory, s3_env: Any
) -> None:
    """A team server on `--executor dask` (its own cluster): tasks are sandboxed on the
    workers, team-b's artifacts go to its own S3 root with its own key, and a task cannot
    hand code to the cluster's workers (which run outside any sandbox)."""
    pytest.importorskip("distributed")
    bucket = s3_env.make_bucket()
    server_secret = f"server-{secrets.token_hex(8)}"
    environ = {"AWS_ACCESS_KEY_ID": "server-key", "AWS_SECRET_ACCESS_KEY": server_secret,
               "HEADWATER_DASK_WORKERS": "1"}  # fmt: skip
    with _team_server("sqlite", tmp_path_factory, "--executor", "dask", env=environ) as team:
        owned = team.run("alice", "team-a", isolation.owned, text="on dask")
        assert owned.state == "SUCCEEDED", owned.error
        assert _output(team, owned.run_id, "consume") == "on dask|OSError"
        executions = _executions(team, owned.run_id)
        assert {e.executor for e in executions} == {"dask"}
        assert all(e.sandbox and e.sandbox["pid_namespace"] for e in executions)
        log = (team.home.parent / "server.log").read_text()
        (address,) = re.findall(r"started a local Dask cluster at (tls://\S+)", log)
        reached = team.run("bob", "team-b", isolation.reaching, address=address)
        assert reached.state == "SUCCEEDED", reached.error
        assert _output(team, reached.run_id, "reach").startswith("refused")
        values = [
            "AWS_ACCESS_KEY_ID=team-b-key", "AWS_SECRET_ACCESS_KEY=team-b-secret",
            f"AWS_ENDPOINT_URL={s3_env.endpoint}", "AWS_DEFAULT_REGION=us-east-1",
        ]  # fmt: skip
        made = subprocess.run(
            [sys.executable, "-m", "headwater", "secrets", "set", "--namespace", "team-b",
             "storage", *values],
            env={**os.environ, "HEADWATER_HOME": str(team.home)}, capture_output=True, text=True,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        root = f"s3://{bucket}/teams/team-b"
        given = cli(team.home, "namespaces", "set", "team-b", "--pipeline-root", root,
                    "--secret", "storage")  # fmt: skip
        assert given.returncode == 0, given.stderr
        run = team.run("bob", "team-b", isolation.stored, secret=server_secret)
        assert run.state == "SUCCEEDED", run.error
        assert _output(team, run.run_id, "credentials") == "team-b-key|False"
        with contextlib.closing(s3_env.client()) as client:
            keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]]
            assert keys and all(k.startswith("teams/team-b/stored/") for k in keys), keys
            (data,) = [k for k in keys if k.endswith("/produce/data")]
            # `consume` read it (and changed only its own local copy of it).
            stored = client.get_object(Bucket=bucket, Key=data)["Body"].read()
        assert _output(team, run.run_id, "consume").startswith("in the bucket|")
        assert stored == b"in the bucket"
        # A run of team-b may not write under another root than its own.
        client = team.client("bob", "team-b")
        with pytest.raises(Exception, match="is outside namespace 'team-b'"):
            client.create_run_from_pipeline_func(
                isolation.stored, arguments={"secret": "x"}, namespace="team-b",
                pipeline_root=f"s3://{bucket}/teams/team-a",
            )  # fmt: skip
        assert all(e.sandbox for e in _executions(team, run.run_id))


def test_the_ui_runs_no_code_of_an_editor_in_the_server(team: TeamServer, tmp_path: Path) -> None:
    marker = tmp_path / "ran-in-the-server"
    source = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
    headers = {"Authorization": f"Bearer {team.tokens['alice']}"}
    bodies = [
        {"content": source, "filename": "p.py"},
        {"path": str(team.token_file)},
    ]
    for route in ("/api/v1/pipelines", "/api/v1/runs"):
        for body in bodies:
            answer = httpx.post(team.base + route, json=body, headers=headers, timeout=30)
            assert answer.status_code == 403, answer.text
            assert "reads only an uploaded compiled pipeline" in answer.json()["error"]
    assert not marker.exists()


def _can_be_a_user() -> bool:
    """True if this machine runs a command as uid 1000 in a user namespace (`AS_A_USER`)."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    return subprocess.run([*AS_A_USER, "true"], capture_output=True).returncode == 0


def test_links_a_task_leaves_lead_the_server_nowhere(team: TeamServer) -> None:
    assert team.token_file is not None
    run = team.run("bob", "team-b", isolation.planting, target=str(team.token_file))
    task = team.home / "runs" / run.run_id / "tasks" / "plant"
    assert [p for p in task.rglob("*") if p.is_symlink()] == []
    headers = {"Authorization": f"Bearer {team.tokens['bob']}"}
    log = httpx.get(f"{team.base}/api/v1/runs/{run.run_id}/tasks/plant/log", headers=headers)
    admin = team.secrets[0]
    assert admin not in log.text
    (execution,) = _executions(team, run.run_id)
    for artifact in (execution.outputs or {}).values():
        assert admin not in json.dumps(artifact)
    data = [e for e in Path(team.home / "artifacts").rglob("data") if "planting" in str(e)]
    assert all(not p.is_symlink() for p in data)
    assert admin not in (task / "sandbox.json").read_text()  # written after, by the supervisor
