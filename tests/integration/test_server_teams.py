"""A team server: personal tokens, namespaces that isolate, roles, a trusted proxy's user and
the audit log, driven through the real `kfp.Client` and raw HTTP against a real server."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import test_ui_browser
import yaml
from kfp import compiler
from kfp_server_api.exceptions import ApiException
from server_harness import kfp_client, made, running_server, wait_state
from team_server import PROXY, Team, add_token, cli

pytestmark = pytest.mark.integration

P = "/apis/v2beta1"
DONE = ("SUCCEEDED", "FAILED", "CANCELED")


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    from headwater.api.principals import add_principal

    home = tmp_path_factory.mktemp("team") / "home"
    home.mkdir()
    url = f"sqlite:///{home / 'metadata.db'}"
    # Made in process (the CLI's own tests are below; one user is added through it here).
    held = {
        "alice": ("editor", ["team-a"]),
        "bob": ("editor", ["team-b"]),
        "vera": ("viewer", ["team-a"]),
        "root": ("admin", []),
        "mia": ("editor", ["team-a", "team-b"]),
    }
    tokens = {
        name: str(add_principal("token", name, role, ns, created_by="test", metadata=url).token)
        for name, (role, ns) in held.items()
    }
    added = cli(
        home, "users", "add", "dana@example.com", "--role", "editor", "--namespace", "team-a"
    )
    assert added.returncode == 0, added.stderr
    with running_server(home, "--trusted-proxy", PROXY) as base:
        yield Team(base, home, tokens)


@pytest.fixture(scope="module")
def made_a(team: Team, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What alice made in team-a through kfp.Client: an experiment, a pipeline with a version,
    a finished run of it with artifacts, and a disabled recurring run; and bob's run of the
    same pipeline in team-b."""
    folder = tmp_path_factory.mktemp("specs")
    spec = folder / "made.yaml"
    compiler.Compiler().compile(made, str(spec))
    alice = kfp_client(team.base, existing_token=team.tokens["alice"], namespace="team-a")
    experiment = alice.create_experiment("work", namespace="team-a")
    pipeline = alice.upload_pipeline(str(spec), pipeline_name="made-a", namespace="team-a")
    version = alice.list_pipeline_versions(pipeline.pipeline_id).pipeline_versions[0]
    run = alice.run_pipeline(
        experiment.experiment_id,
        "made-run",
        pipeline_id=pipeline.pipeline_id,
        version_id=version.pipeline_version_id,
    )
    recurring = alice.create_recurring_run(
        experiment.experiment_id,
        "nightly",
        pipeline_id=pipeline.pipeline_id,
        version_id=version.pipeline_version_id,
        interval_second=3600,
        enabled=False,
    )
    bob = kfp_client(team.base, existing_token=team.tokens["bob"], namespace="team-b")
    bob_run = bob.create_run_from_pipeline_package(str(spec), arguments={}, namespace="team-b")
    assert wait_state(alice, run.run_id, DONE).state == "SUCCEEDED"
    assert wait_state(bob, bob_run.run_id, DONE).state == "SUCCEEDED"
    return {
        "spec": str(spec),
        "exp": experiment.experiment_id,
        "pid": pipeline.pipeline_id,
        "vid": version.pipeline_version_id,
        "run": run.run_id,
        "rr": recurring.recurring_run_id,
        "bob_run": bob_run.run_id,
    }


def _denied(call: Any) -> ApiException:
    with pytest.raises(ApiException) as caught:
        call()
    return caught.value


def test_kfp_clients_in_two_namespaces_see_only_their_own(
    team: Team, made_a: dict[str, str]
) -> None:
    alice = kfp_client(team.base, existing_token=team.tokens["alice"], namespace="team-a")
    bob = kfp_client(team.base, existing_token=team.tokens["bob"], namespace="team-b")
    root = kfp_client(team.base, existing_token=team.tokens["root"])
    # Each lists its own namespace's runs; the admin sees both.
    assert {r.run_id for r in alice.list_runs(namespace="team-a").runs} >= {made_a["run"]}
    assert made_a["bob_run"] not in {r.run_id for r in alice.list_runs(namespace="team-a").runs}
    bobs = {r.run_id for r in bob.list_runs(namespace="team-b").runs}
    assert made_a["bob_run"] in bobs and made_a["run"] not in bobs
    everyone = {r.run_id for r in root.list_runs(page_size=100).runs}
    assert {made_a["run"], made_a["bob_run"]} <= everyone
    # Another namespace's run, experiment and list: 403 as KFP, naming the namespace.
    denied = _denied(lambda: bob.get_run(made_a["run"]))
    assert denied.status == 403 and "team-a" in json.loads(denied.body)["message"]
    assert _denied(lambda: bob.get_experiment(made_a["exp"])).status == 403
    assert _denied(lambda: bob.list_runs(namespace="team-a")).status == 403
    assert _denied(lambda: bob.terminate_run(made_a["run"])).status == 403
    # An unknown id is 404, as KFP (the record is read before the check).
    assert _denied(lambda: bob.get_run("no-such-run")).status == 404
    # The same pipeline in two namespaces: the cache does not cross them (KFP's is per
    # namespace), so bob's tasks ran rather than reuse alice's outputs.
    details = bob.get_run(made_a["bob_run"]).run_details.task_details
    assert details and all(t.state != "SKIPPED" for t in details if t.display_name == "make")
    from headwater.api.runs import get_run

    url = f"sqlite:///{team.home / 'metadata.db'}"
    assert all(t.cached_from is None for t in get_run(made_a["bob_run"], metadata=url).tasks)
    # Who made what is recorded and shown.
    run = team.call("alice", "GET", f"{P}/runs/{made_a['run']}").json()
    assert run["created_by"] == "alice"
    assert (
        team.call("alice", "GET", f"{P}/experiments/{made_a['exp']}").json()["created_by"]
        == "alice"
    )
    assert team.call("bob", "GET", f"{P}/runs/{made_a['bob_run']}").json()["created_by"] == "bob"
    assert get_run(made_a["run"], metadata=url).created_by == "alice"


def test_a_viewer_reads_and_changes_nothing(team: Team, made_a: dict[str, str]) -> None:
    vera = kfp_client(team.base, existing_token=team.tokens["vera"], namespace="team-a")
    assert vera.get_run(made_a["run"]).state == "SUCCEEDED"
    denied = _denied(lambda: vera.archive_run(made_a["run"]))
    assert denied.status == 403 and "viewer" in json.loads(denied.body)["message"]
    assert _denied(lambda: vera.create_experiment("mine", namespace="team-a")).status == 403


def test_no_principal_is_401_even_on_loopback(team: Team) -> None:
    health = team.call(None, "GET", f"{P}/healthz").json()
    assert health["multi_user"] is True
    refused = team.call(None, "GET", f"{P}/runs")
    assert refused.status_code == 401 and "Authorization" in refused.json()["message"]
    wrong = team.call(None, "GET", f"{P}/runs", headers={"Authorization": "Bearer hwt_nope"})
    assert wrong.status_code == 401
    assert team.call(None, "GET", "/").status_code == 401


# (method, path, body, kind): kind "read" needs a namespace held, "write" an editor's too.
ROUTES: list[tuple[str, str, Any, str]] = [
    ("GET", "/experiments?namespace=team-a", None, "read"),
    ("GET", "/experiments/{exp}", None, "read"),
    ("GET", "/pipelines?namespace=team-a", None, "read"),
    ("GET", "/pipelines/{pid}", None, "read"),
    ("GET", "/pipelines/names/made-a?namespace=team-a", None, "read"),
    ("GET", "/pipelines/{pid}/versions", None, "read"),
    ("GET", "/pipelines/{pid}/versions/{vid}", None, "read"),
    ("GET", "/runs?namespace=team-a", None, "read"),
    ("GET", "/runs/{run}", None, "read"),
    ("GET", "/runs/{run}/nodes/make/artifacts/data:read", None, "read"),
    ("GET", "/recurringruns?namespace=team-a", None, "read"),
    ("GET", "/recurringruns/{rr}", None, "read"),
    ("POST", "/experiments", {"display_name": "more", "namespace": "team-a"}, "write"),
    ("POST", "/experiments/{exp2}:archive", None, "write"),
    ("POST", "/experiments/{exp2}:unarchive", None, "write"),
    ("DELETE", "/experiments/{exp2}", None, "write"),
    ("POST", "/pipelines/upload?namespace=team-a&name=up", "upload", "write"),
    ("POST", "/pipelines/upload_version?pipelineid={pid}&name=v2", "upload", "write"),
    ("POST", "/pipelines", {"display_name": "bare", "namespace": "team-a"}, "write"),
    ("POST", "/pipelines/create", "create", "write"),
    ("POST", "/pipelines/{pid}/versions", "version", "write"),
    ("DELETE", "/pipelines/{pid}/versions/{vid2}", None, "write"),
    ("DELETE", "/pipelines/{pid2}", None, "write"),
    ("POST", "/runs", "run", "write"),
    ("POST", "/runs/{run2}:terminate", None, "write"),
    ("POST", "/runs/{run2}:retry", None, "write"),
    ("POST", "/runs/{run2}:archive", None, "write"),
    ("POST", "/runs/{run2}:unarchive", None, "write"),
    ("DELETE", "/runs/{run2}", None, "write"),
    ("POST", "/recurringruns", "recurring", "write"),
    ("POST", "/recurringruns/{rr}:enable", None, "write"),
    ("POST", "/recurringruns/{rr}:disable", None, "write"),
    ("DELETE", "/recurringruns/{rr2}", None, "write"),
]


def _body(kind: Any, ids: dict[str, str]) -> dict[str, Any]:
    spec = yaml.safe_load(Path(ids["spec"]).read_text())
    ref = {"pipeline_id": ids["pid"], "pipeline_version_id": ids["vid"]}
    if kind == "upload":
        return {"files": {"uploadfile": ("made.yaml", Path(ids["spec"]).read_bytes())}}
    if kind == "create":
        doc = {"pipeline": {"display_name": "made-c", "namespace": "team-a"},
               "pipeline_version": {"pipeline_spec": spec}}  # fmt: skip
        return {"json": doc}
    if kind == "version":
        return {"json": {"display_name": "v3", "pipeline_spec": spec}}
    if kind == "run":
        return {"json": {"display_name": "m", "experiment_id": ids["exp"],
                         "pipeline_version_reference": ref}}  # fmt: skip
    if kind == "recurring":
        hourly = {"periodic_schedule": {"interval_second": "3600"}}
        return {"json": {"display_name": "r", "experiment_id": ids["exp"], "mode": "DISABLE",
                         "pipeline_version_reference": ref, "trigger": hourly}}  # fmt: skip
    return {} if kind is None else {"json": kind}


def test_every_route_under_each_role(team: Team, made_a: dict[str, str]) -> None:
    from headwater.server import resources, run_routes  # noqa: F401 - they register routes
    from headwater.server.router import _ROUTES

    # The table is every route the server has (bar the open health check).
    patterns = {(m, r.pattern) for m, r, _ in _ROUTES}
    covered = {
        (m, r.pattern)
        for m, r, _ in _ROUTES
        for method, path, _, _ in ROUTES
        if m == method and r.match(path.split("?")[0].format(**_ids_for_match()))
    }
    assert patterns - covered == {("GET", "^/healthz$")}

    ids = dict(made_a)

    def make(path: str, key: str, **body: Any) -> str:
        answer = team.call("alice", "POST", P + path, **body)
        assert answer.status_code == 200, answer.text
        return str(answer.json()[key])

    # What the writes remove, made for them by alice.
    gone = {"display_name": "gone", "namespace": "team-a"}
    ids["exp2"] = make("/experiments", "experiment_id", json=gone)
    ids["pid2"] = make("/pipelines", "pipeline_id", json=gone)
    version = {**_body("version", ids)["json"], "display_name": "v-gone"}
    ids["vid2"] = make(f"/pipelines/{ids['pid']}/versions", "pipeline_version_id", json=version)
    ids["run2"] = make("/runs", "run_id", **_body("run", ids))
    ids["rr2"] = make("/recurringruns", "recurring_run_id", **_body("recurring", ids))
    wait_state(kfp_client(team.base, existing_token=team.tokens["alice"]), ids["run2"], DONE)
    for method, template, body, kind in ROUTES:
        path = P + template.format(**ids)
        extra = _body(body, ids)
        anyone = team.call(None, method, path, **extra)
        assert anyone.status_code == 401, (method, path, anyone.text)
        other = team.call("bob", method, path, **extra)
        assert other.status_code == 403, (method, path, other.status_code, other.text)
        viewer = team.call("vera", method, path, **extra)
        if kind == "read":
            assert viewer.status_code == 200, (method, path, viewer.text)
        else:
            assert viewer.status_code == 403, (method, path, viewer.text)
        owner = team.call("alice", method, path, **extra)
        # Allowed: done, or refused by the resource's state (a finished run terminates 409).
        assert owner.status_code in (200, 409), (method, path, owner.status_code, owner.text)
        if kind == "read":
            assert team.call("root", method, path, **extra).status_code == 200, (method, path)


def _ids_for_match() -> dict[str, str]:
    keys = ("exp", "exp2", "pid", "pid2", "vid", "vid2", "run", "run2", "rr", "rr2")
    return {k: f"id-{k}" for k in keys}


def test_shared_pipelines_are_read_by_all_and_changed_by_their_maker(
    team: Team, made_a: dict[str, str]
) -> None:
    shared = team.call("alice", "POST", f"{P}/pipelines", json={"display_name": "shared-one"})
    assert shared.status_code == 200 and shared.json()["namespace"] == ""
    pid = shared.json()["pipeline_id"]
    assert team.call("bob", "GET", f"{P}/pipelines/{pid}").status_code == 200
    listed = team.call("bob", "GET", f"{P}/pipelines").json()["pipelines"]
    assert pid in {p["pipeline_id"] for p in listed}
    assert made_a["pid"] not in {p["pipeline_id"] for p in listed}
    assert team.call("bob", "DELETE", f"{P}/pipelines/{pid}").status_code == 403
    assert team.call("alice", "DELETE", f"{P}/pipelines/{pid}").status_code == 200


def test_a_trusted_proxy_names_the_user_and_no_one_else_can(
    team: Team, made_a: dict[str, str]
) -> None:
    path = f"{P}/runs/{made_a['run']}"
    # From the proxy's address the header is the principal.
    assert (
        team.call(None, "GET", path, proxy_user="dana@example.com", source=PROXY).status_code == 200
    )
    made = team.call(None, "POST", f"{P}/experiments", source=PROXY, proxy_user="dana@example.com",
                     json={"display_name": "danas", "namespace": "team-a"})  # fmt: skip
    assert made.status_code == 200 and made.json()["created_by"] == "dana@example.com"
    # A user the proxy names but no one added is refused, naming the fix.
    stranger = team.call(None, "GET", path, proxy_user="eve@example.com", source=PROXY)
    assert stranger.status_code == 403 and "users add" in stranger.json()["message"]
    # From anywhere else the header is ignored: no principal, or the token's own.
    assert team.call(None, "GET", path, proxy_user="dana@example.com").status_code == 401
    forged = team.call("bob", "GET", path, proxy_user="dana@example.com")
    assert forged.status_code == 403 and "bob" in forged.json()["message"]


def test_the_audit_log_records_who_changed_what(team: Team, made_a: dict[str, str]) -> None:
    team.call("vera", "POST", f"{P}/runs/{made_a['run']}:archive")
    team.call("alice", "POST", f"{P}/runs/{made_a['run']}:unarchive")
    shown = cli(team.home, "audit", "--json")
    assert shown.returncode == 0, shown.stderr
    records = [json.loads(line) for line in shown.stdout.splitlines()]
    mine = [r for r in records if r["route"].endswith(f"{made_a['run']}:unarchive")]
    assert mine[-1]["principal"] == "alice" and mine[-1]["namespace"] == "team-a"
    assert mine[-1]["status"] == 200 and mine[-1]["result"] == "ok"
    assert mine[-1]["resource"] == made_a["run"]
    denied = [
        r
        for r in records
        if r["route"].endswith(f"{made_a['run']}:archive") and r["principal"] == "vera"
    ]
    assert denied and denied[-1]["status"] == 403 and denied[-1]["result"] == "denied"
    made = [r for r in records if r["route"] == f"{P}/runs" and r["principal"] == "alice"]
    assert made and made[0]["resource"] and made[0]["namespace"] == "team-a"
    cli_made = [r for r in records if r["principal"].startswith("cli:")]
    assert "dana@example.com" in {r["resource"] for r in cli_made}
    # Reads are not recorded; filters narrow the log.
    assert not any(r["method"] == "GET" for r in records)
    only = cli(team.home, "audit", "--principal", "vera")
    assert (
        only.returncode == 0
        and only.stdout
        and all("vera" in line for line in only.stdout.splitlines())
    )


def test_a_revoked_token_is_refused_at_once_by_every_server_on_the_database(
    database_url: str, tmp_path: Path
) -> None:
    from server_harness import start_server, stop

    home = tmp_path / "home"
    token = add_token(home, "carol", "editor", "team-c", url=database_url)
    first, base1 = start_server(home, "--metadata-url", database_url)
    try:
        second, base2 = start_server(home, "--metadata-url", database_url)
        try:
            answers = [
                Team(base, home, {"carol": token}).call("carol", "GET", f"{P}/runs")
                for base in (base1, base2)
            ]
            assert [a.status_code for a in answers] == [200, 200]
            revoked = cli(home, "tokens", "revoke", "carol", url=database_url)
            assert revoked.returncode == 0, revoked.stderr
            for base in (base2, base1):  # the next request, on either server
                refused = Team(base, home, {"carol": token}).call("carol", "GET", f"{P}/runs")
                assert refused.status_code == 401 and "revoked" in refused.json()["message"]
            listed = cli(home, "tokens", "list", "--json", url=database_url)
            assert json.loads(listed.stdout) == []
        finally:
            stop(second)
    finally:
        stop(first)


def test_principals_are_managed_in_one_line_each(tmp_path: Path) -> None:
    home = tmp_path / "home"
    add_token(home, "erin", "viewer", "team-e")
    listed = cli(home, "tokens", "list", "--json")
    [erin] = json.loads(listed.stdout)
    assert erin["name"] == "erin" and erin["namespaces"] == ["team-e"] and "token" not in erin
    # The secret is never stored: only its SHA-256.
    import sqlite3

    with sqlite3.connect(home / "metadata.db") as db:
        (stored,) = db.execute("SELECT token_hash FROM principals WHERE name = 'erin'").fetchone()
    assert len(stored) == 64 and not stored.startswith("hwt_")
    # The store named after `server`, as the server itself takes it, is the one changed.
    import subprocess
    import sys

    from server_harness import server_env

    other = f"sqlite:///{tmp_path / 'other.db'}"
    added = subprocess.run(
        [sys.executable, "-m", "headwater", "server", "--metadata-url", other,
         "tokens", "add", "gus", "--role", "admin"],
        env=server_env(home), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert [
        p["name"] for p in json.loads(cli(home, "tokens", "list", "--json", url=other).stdout)
    ] == ["gus"]
    assert "gus" not in cli(home, "tokens", "list").stdout
    for args, says in (
        (("tokens", "add", "erin", "--role", "viewer", "--namespace", "team-e"), "exists already"),
        (("tokens", "add", "fay", "--role", "editor"), "needs a namespace"),
        (("tokens", "add", "fay", "--role", "editor", "--namespace", "Team_A"), "namespace name"),
        (("tokens", "add", "fay bar", "--role", "viewer", "--namespace", "a"), "token name"),
        (("tokens", "revoke", "nobody"), "no token named 'nobody'"),
        (("users", "remove", "nobody@example.com"), "no user named"),
        (("audit", "--since", "yesterday"), "ISO 8601"),
        (("--trusted-proxy", "proxy.example.com"), "--trusted-proxy takes an IP address"),
        (("namespaces", "set", "Team_A"), "namespace name"),
        (("namespaces", "set", "team-e", "--secret", "nope"), "has no secret 'nope'"),
        (("namespaces", "set", "team-e", "--pipeline-root", "memory://x"), "every task reaches"),
        (("namespaces", "unset", "team-z"), "has no settings of its own"),
        (("--token-file", str(tmp_path / "missing")), "cannot read the token file"),
        (("--sandbox-uid", "0"), "--sandbox-uid must be a user id above 0"),
    ):
        done = cli(home, *args)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0], (args, done.stderr)
        assert "Traceback" not in done.stderr
    set_root = cli(home, "namespaces", "set", "team-e", "--pipeline-root", str(tmp_path / "e"))
    assert set_root.returncode == 0, set_root.stderr
    [settings] = json.loads(cli(home, "namespaces", "list", "--json").stdout)
    assert (settings["name"], settings["pipeline_root"]) == ("team-e", str(tmp_path / "e"))


# -- the web UI in a real Chromium, as alice and as bob ------------------------------------------

browser = test_ui_browser.browser
page = test_ui_browser.page


@pytest.fixture(scope="module")
def base_url(team: Team) -> str:
    """Where `page` (test_ui_browser's) opens its pages: the team server's UI."""
    return team.base


def test_the_ui_shows_who_you_are_and_only_your_namespaces(
    team: Team, made_a: dict[str, str], page: Any
) -> None:
    from test_ui_browser import expect

    # Alice logs in once with her token (a cookie from then on) and sees her namespace's run.
    page.goto(f"/?token={team.tokens['alice']}")
    expect(page.locator("#whoami")).to_contain_text("alice · editor")
    rows = page.locator("table.runs tbody tr")
    expect(rows.first).to_be_visible()
    shown = page.locator("table.runs").inner_text()
    assert made_a["run"][:8] in shown and made_a["bob_run"][:8] not in shown
    # She picks her namespace from the header.
    page.select_option("#namespace-pick", "team-a")
    page.wait_for_url(re.compile(r"namespace=team-a"))
    # Her run's page names who started it; bob's is refused.
    page.goto(f"/runs/{made_a['run']}")
    expect(page.locator("#run-created-by")).to_have_text("alice")
    refused = page.goto(f"/runs/{made_a['bob_run']}")
    assert refused is not None and refused.status == 403
    expect(page.locator("body")).to_contain_text("team-b")
    # The UI's API keeps to the same rules: bob's runs, logs and artifacts are not hers.
    assert page.request.get("/api/v1/runs?namespace=team-b").status == 403
    listed = page.request.get("/api/v1/runs").json()["runs"]
    assert made_a["bob_run"] not in {r["run_id"] for r in listed}
    bobs = team.call("root", "GET", f"/api/v1/runs/{made_a['bob_run']}").json()
    [make_task] = [t for t in bobs["tasks"] if t["name"] == "make"]
    artifact = make_task["artifact_ids"]["outputs"]["data"][0]
    for path in (
        f"/api/v1/artifacts/{artifact}",
        f"/api/v1/artifacts/{artifact}/download",
        f"/api/v1/lineage/{artifact}",
        f"/api/v1/runs/{made_a['bob_run']}/tasks/make/log?tail=5",
        f"/api/v1/compare?runs={made_a['run']},{made_a['bob_run']}",
    ):
        assert page.request.get(path).status == 403, path
    mine = team.call("root", "GET", f"/api/v1/runs/{made_a['run']}").json()
    [own] = [t for t in mine["tasks"] if t["name"] == "make"]
    own_artifact = own["artifact_ids"]["outputs"]["data"][0]
    assert page.request.get(f"/api/v1/artifacts/{own_artifact}/download").status == 200
    lineage = page.request.get(f"/api/v1/lineage/{own_artifact}").json()
    assert all(made_a["bob_run"] not in json.dumps(n) for n in lineage["nodes"])
    # A viewer's browser may not change anything.
    page.goto(f"/?token={team.tokens['vera']}")
    expect(page.locator("#whoami")).to_contain_text("vera · viewer")
    archive = page.request.post(
        f"/api/v1/experiments/{made_a['exp']}/archive", headers={"Content-Type": "application/json"}
    )
    assert archive.status == 403


# (method, path under /api/v1, JSON body, kind, alice's status). Kinds: "read" and "write" are
# of team-a's records; "change" is a change outside any namespace (editors); "list" and
# "shared" everyone reads; "admin" only an admin.
UI_ROUTES: list[tuple[str, str, Any, str, int]] = [
    ("GET", "/whoami", None, "shared", 200),
    ("GET", "/runs", None, "list", 200),
    ("GET", "/runs/{run}", None, "read", 200),
    ("GET", "/runs/{run}/graph", None, "read", 200),
    ("GET", "/runs/{run}/steps", None, "read", 200),
    ("GET", "/runs/{run}/trials", None, "read", 200),
    ("GET", "/runs/{run}/tasks/make/log", None, "read", 200),
    ("GET", "/artifacts/{ref}", None, "read", 200),
    ("GET", "/artifacts/{artifact}/download", None, "read", 200),
    ("GET", "/artifacts/{artifact}/traces/none.json", None, "read", 404),
    ("GET", "/lineage/{ref}", None, "read", 200),
    ("GET", "/compare?runs={run},{run3}", None, "read", 200),
    ("GET", "/experiments", None, "list", 200),
    ("GET", "/experiments/{exp}", None, "read", 200),
    ("GET", "/pipelines", None, "list", 200),
    ("GET", "/pipelines/{pid}", None, "read", 200),
    ("GET", "/pipelines/{pid}/versions/{vid}", None, "read", 200),
    ("GET", "/recurring-runs", None, "list", 200),
    ("GET", "/recurring-runs/{rr}", None, "read", 200),
    ("GET", "/models", None, "shared", 200),
    ("GET", "/endpoints", None, "shared", 200),
    # A team's server reads uploads of compiled pipelines only (test_server_isolation.py).
    ("POST", "/pipelines", {"content": "{spec_text}", "filename": "made.yaml"}, "change", 200),
    ("POST", "/models/nothing/versions/1/stage", {"stage": "staging"}, "change", 404),
    ("POST", "/runs", {"pipeline_version_id": "{vid}", "experiment_id": "{exp}"}, "write", 200),
    ("POST", "/runs/{run3}/terminate", None, "write", 409),
    ("POST", "/runs/{run3}/retry", None, "write", 409),
    ("POST", "/experiments/{exp}/archive", None, "write", 200),
    ("POST", "/experiments/{exp}/unarchive", None, "write", 200),
    ("POST", "/recurring-runs/{rr}/enable", None, "write", 200),
    ("POST", "/recurring-runs/{rr}/disable", None, "write", 200),
    ("DELETE", "/runs/{run3}", None, "write", 200),
    ("GET", "/principals", None, "admin", 403),
    ("POST", "/principals", {"name": "zed", "role": "viewer", "namespaces": ["z"]}, "admin", 403),
    ("DELETE", "/principals/token/zed", None, "admin", 403),
]


def test_every_ui_api_route_under_each_role(team: Team, made_a: dict[str, str]) -> None:
    from headwater.ui import create_app

    # The table is every route of the UI's API (bar its schema).
    schema = create_app().openapi()["paths"]
    served = {
        (method.upper(), path[len("/api/v1") :])
        for path, methods in schema.items()
        if path.startswith("/api/v1/")
        for method in methods
    }
    tabled = {(m, _template(p)) for m, p, _, _, _ in UI_ROUTES}
    assert served == tabled, served ^ tabled

    ids = dict(made_a)
    ids["spec_text"] = Path(made_a["spec"]).read_text()
    alice = kfp_client(team.base, existing_token=team.tokens["alice"])
    ids["run3"] = alice.run_pipeline(
        made_a["exp"], "for-the-ui", pipeline_id=made_a["pid"], version_id=made_a["vid"]
    ).run_id
    wait_state(alice, ids["run3"], DONE)
    mine = team.call("alice", "GET", f"/api/v1/runs/{made_a['run']}").json()
    [make_task] = [t for t in mine["tasks"] if t["name"] == "make"]
    ids["artifact"] = ids["ref"] = str(make_task["artifact_ids"]["outputs"]["data"][0])
    for method, template, body, kind, owner_status in UI_ROUTES:
        path = "/api/v1" + template.format(**ids)
        sent = {} if body is None else {"json": _filled(body, ids)}
        assert team.call(None, method, path, **sent).status_code == 401, path
        vera = team.call("vera", method, path, **sent).status_code
        bob = team.call("bob", method, path, **sent).status_code
        expected = {
            "read": (200 if owner_status == 200 else owner_status, 403),
            "write": (403, 403),
            "change": (403, owner_status),
            "list": (200, 200),
            "shared": (200, 200),
            "admin": (403, 403),
        }[kind]
        assert (vera, bob) == expected, (method, path, vera, bob)
        owner = team.call("alice", method, path, **sent)
        assert owner.status_code == owner_status, (method, path, owner.status_code, owner.text)
        if kind == "list":
            listed = json.dumps(team.call("bob", method, path).json())
            assert made_a["run"] not in listed and made_a["exp"] not in listed, path
            assert made_a["pid"] not in listed and made_a["rr"] not in listed, path
    # An admin manages principals over HTTP: a token answered once, then revoked.
    added = team.call("root", "POST", "/api/v1/principals",
                      json={"name": "zed", "role": "viewer", "namespaces": ["team-a"]})  # fmt: skip
    assert added.status_code == 200, added.text
    zed = added.json()["token"]
    team.tokens["zed"] = zed
    assert team.call("zed", "GET", f"{P}/runs/{made_a['run']}").status_code == 200
    listed = team.call("root", "GET", "/api/v1/principals").json()["principals"]
    assert "zed" in {p["name"] for p in listed} and all("token" not in p for p in listed)
    assert team.call("root", "DELETE", "/api/v1/principals/token/zed").status_code == 200
    assert team.call("zed", "GET", f"{P}/runs/{made_a['run']}").status_code == 401


def _filled(body: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """`body` with its "{key}" values replaced by the ids of `ids`."""
    return {k: v.format(**ids) if isinstance(v, str) else v for k, v in body.items()}


def _template(path: str) -> str:
    """A table path as the app names the route (`/runs/{run}` -> `/runs/{run_id}`)."""
    import re

    names = {"run": "run_id", "run3": "run_id", "exp": "experiment_id", "pid": "pipeline_id",
             "vid": "version_id", "rr": "recurring_run_id", "artifact": "artifact_id"}  # fmt: skip
    path = path.split("?")[0]
    path = re.sub(r"\{(\w+)\}", lambda m: "{" + names.get(m.group(1), m.group(1)) + "}", path)
    path = path.replace("/tasks/make/", "/tasks/{task}/").replace(
        "/traces/none.json", "/traces/{name}"
    )
    path = path.replace("/models/nothing/versions/1/", "/models/{name}/versions/{version}/")
    path = path.replace("/principals/token/zed", "/principals/{kind}/{name}")
    return path


def test_one_of_two_namespaces_is_chosen_to_start_a_run_from_the_ui(
    team: Team, made_a: dict[str, str], page: Any
) -> None:
    from test_ui_browser import expect

    page.goto(f"/runs/new?version={made_a['vid']}&token={team.tokens['mia']}")
    expect(page.locator("#launch-form")).to_be_visible()
    expect(page.locator("#whoami")).to_contain_text("mia · editor")
    page.fill("#run-name", "mia's")
    page.select_option("#run-experiment", label="Default (team-b)")
    page.locator("#launch").click()
    expect(page).to_have_url(re.compile(r"/runs/[0-9a-f-]+$"))
    expect(page.locator("#run-created-by")).to_have_text("mia")
    run_id = page.url.rsplit("/", 1)[-1]
    run = team.call("mia", "GET", f"/api/v1/runs/{run_id}").json()
    assert run["namespace"] == "team-b" and run["created_by"] == "mia"
    # Without a namespace chosen, one who holds two is asked to name one (400).
    answer = team.call("mia", "POST", "/api/v1/runs", json={"pipeline_version_id": made_a["vid"]})
    assert answer.status_code == 400 and "team-a, team-b" in answer.json()["error"]


def test_headwater_ui_over_the_teams_store_keeps_the_same_rules(
    team: Team, made_a: dict[str, str], tmp_path: Path
) -> None:
    from cli_harness import Cli
    from server_harness import server_env
    from test_ui_cli import ui_server

    headwater = Cli(team.home, tmp_path, server_env(team.home))
    with ui_server(headwater) as base:
        ui = Team(base, team.home, team.tokens)
        assert ui.call(None, "GET", "/api/v1/runs").status_code == 401
        assert ui.call("bob", "GET", f"/api/v1/runs/{made_a['run']}").status_code == 403
        listed = ui.call("alice", "GET", "/api/v1/runs").json()["runs"]
        ids = {r["run_id"] for r in listed}
        assert made_a["run"] in ids and made_a["bob_run"] not in ids
