"""`headwater server` takes bounded, validated input: every malformed request is a 400 (or 413)
with KFP's error body, checked before anything is stored, and never quotes SQL; what it holds
in memory for a request is bounded.

Real parts only: a `headwater server` subprocess (on SQLite, and on PostgreSQL) with a token
and a 1 MiB body limit, httpx sending what a careless or hostile client sends, the server's
memory read from /proc.
"""

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kfp import compiler
from postgres_db import BASE_URL, fresh_database
from server_harness import adder, kfp_client, running_server

pytestmark = pytest.mark.integration

TOKEN = "input-t0ken"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A server on SQLite, and one on PostgreSQL (where NULs and out-of-range numbers that
    reached the database failed differently)."""
    home = tmp_path_factory.mktemp("input") / "home"
    args = ("--token", TOKEN, "--max-request-mb", "1")
    if request.param == "sqlite":
        with running_server(home, *args) as base:
            yield base
        return
    if not BASE_URL:
        pytest.skip("set HEADWATER_TEST_POSTGRES_URL for the PostgreSQL runs of these tests")
    with fresh_database() as url, running_server(home, *args, "--metadata-url", url) as base:
        yield base


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("spec") / "adder.yaml"
    compiler.Compiler().compile(adder, str(path))
    return dict(yaml.safe_load(path.read_text()))


def rss_kb(server: str) -> int:
    """The server process's resident memory (it listens on the URL's port)."""
    import subprocess

    port = server.rsplit(":", 1)[1]
    pid = subprocess.run(
        ["sh", "-c", f"ss -Htlnp 'sport = :{port}' | sed -n 's/.*pid=\\([0-9]*\\).*/\\1/p'"],
        capture_output=True,
        text=True,
    ).stdout.split()[0]
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def runs_total(server: str) -> int:
    answer = httpx.get(f"{server}/apis/v2beta1/runs", headers=AUTH)
    assert answer.status_code == 200, answer.text
    return int(answer.json()["total_size"])


def refused(answer: httpx.Response, status: int, *named: str) -> None:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"code", "message", "details"}, body
    for word in named:
        assert word in body["message"], body["message"]
    for sql in ("SELECT", "INSERT", "UPDATE ", "sqlite3", "psycopg"):
        assert sql not in body["message"], body["message"]


def test_healthz_needs_no_token_and_the_rest_does(server: str) -> None:
    assert httpx.get(f"{server}/apis/v2beta1/healthz").status_code == 200
    assert httpx.get(f"{server}/apis/v2beta1/runs").status_code == 401
    client = kfp_client(server, existing_token="wrong")
    with pytest.raises(Exception, match="401"):
        client.list_runs()


def test_a_yaml_alias_bomb_is_refused_before_anything_is_stored(server: str) -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 9):
        refs = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{refs}]")
    lines.append("root: {dag: {tasks: {}}}\npipelineInfo: {name: boom}\ncomponents: *a8")
    bomb = "\n".join(lines).encode()
    assert len(bomb) < 4096
    before = rss_kb(server)
    answer = httpx.post(
        f"{server}/apis/v2beta1/pipelines/upload",
        files={"uploadfile": ("bomb.yaml", bomb)},
        headers=AUTH,
    )
    refused(answer, 400, "bomb.yaml", "anchors and aliases")
    assert rss_kb(server) - before < 50_000  # KiB: the 10^8 strings were never built
    listed = httpx.get(f"{server}/apis/v2beta1/pipelines", headers=AUTH).json()
    assert listed["total_size"] == 0


def test_bodies_over_the_limit_are_refused_as_they_arrive(server: str) -> None:
    declared = httpx.post(
        f"{server}/apis/v2beta1/runs",
        content=b"x" * (2 * 2**20),
        headers={**AUTH, "Content-Type": "application/json"},
    )
    refused(declared, 413, "over the limit")
    before = rss_kb(server)

    def chunks() -> Iterator[bytes]:  # a 200 MB display_name, streamed without a length
        yield b'{"display_name": "'
        block = b"n" * 2**20
        for _ in range(200):
            yield block
        yield b'"}'

    began = time.monotonic()
    try:
        streamed = httpx.post(
            f"{server}/apis/v2beta1/runs",
            content=chunks(),
            headers={**AUTH, "Content-Type": "application/json"},
            timeout=60,
        )
        refused(streamed, 413, "over the limit")
    except httpx.TransportError:
        pass  # the server answered and closed while the client was still sending
    assert time.monotonic() - began < 30
    assert rss_kb(server) - before < 50_000
    assert runs_total(server) == 0


MALFORMED = {
    "a lone surrogate": '{"display_name": "s", "pipeline_spec": SPEC, '
    '"runtime_config": {"parameters": {"x": "\\ud800"}}}',
    "NaN": '{"display_name": "n", "pipeline_spec": SPEC, '
    '"runtime_config": {"parameters": {"x": NaN}}}',
    "a NUL": '{"display_name": "nul\\u0000", "pipeline_spec": SPEC}',
    "deep JSON": '{"display_name": "d", "description": ' + "[" * 5000 + "]" * 5000 + "}",
    "a huge number": '{"display_name": "h", "pipeline_spec": SPEC, '
    '"runtime_config": {"parameters": {"x": 1' + "0" * 400 + "}}}",
    "a number Python cannot read": '{"display_name": "l", "pipeline_spec": SPEC, '
    '"runtime_config": {"parameters": {"x": 1' + "0" * 5000 + "}}}",
}


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (MALFORMED["a lone surrogate"], "lone surrogate"),
        (MALFORMED["NaN"], "NaN is not a JSON value"),
        (MALFORMED["a NUL"], "NUL"),
        (MALFORMED["deep JSON"], "deeper than"),
        (MALFORMED["a huge number"], "runtime_config.parameters"),
        (MALFORMED["a number Python cannot read"], "more than 4300 digits"),
    ],
    ids=list(MALFORMED),
)
def test_malformed_runs_are_400_and_nothing_is_queued(
    server: str, spec: dict[str, Any], body: str, named: str
) -> None:
    answer = httpx.post(
        f"{server}/apis/v2beta1/runs",
        content=body.replace("SPEC", json.dumps(spec)).encode(),
        headers={**AUTH, "Content-Type": "application/json"},
    )
    refused(answer, 400, named)
    assert runs_total(server) == 0
    assert httpx.get(f"{server}/api/v1/runs", headers=AUTH).status_code == 200


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"filter": json.dumps({"predicates": [
            {"operation": 1, "key": "created_at", "stringValue": "yesterday"}]})}, "not a time"),
        ({"filter": json.dumps({"predicates": [
            {"operation": 1, "key": "display_name", "intValue": 3}]})}, "not text"),
        ({"filter": json.dumps({"predicates": [
            {"operation": 1, "key": "display_name", "longValue": "9" * 30}]})}, "int64"),
        ({"filter": '{"predicates": [{"operation": 1, "key": "display_name", '
                    '"stringValue": "a\\u0000"}]}'}, "NUL"),
        ({"filter": json.dumps({"predicates": [
            {"operation": 8, "key": "display_name", "stringValues": "x"}]})}, "display_name"),
        ({"filter": json.dumps({"predicates": [
            {"operation": 8, "key": "display_name", "stringValues": {"values": 5}}]})},
         "is not a list"),
        ({"filter": json.dumps({"predicates": [
            {"operation": 3, "key": "created_at", "timestampValue": 10**400}]})}, "year 3000"),
        ({"filter": json.dumps({"predicates": [
            {"operation": 3, "key": "created_at",
             "timestampValue": "99999999999999999999-01-01T00:00:00Z"}]})}, "year 3000"),
        ({"filter": '{"predicates": [], "n": 1' + "0" * 5000 + "}"}, "4300 digits"),
        ({"page_token": str(2**64)}, "page_token"),
        ({"page_size": "ten"}, "page_size"),
        ({"sort_by": "run_id; DROP TABLE runs"}, "sort_by"),
    ],
    ids=["time-as-text", "int-for-text", "huge-int", "nul", "values-text", "values-number",
         "time-1e400", "year-1e20", "filter-int-5000-digits", "token", "size", "sort"],
)  # fmt: skip
def test_malformed_list_queries_are_400(server: str, params: dict[str, str], named: str) -> None:
    refused(httpx.get(f"{server}/apis/v2beta1/runs", params=params, headers=AUTH), 400, named)


@pytest.mark.parametrize(
    ("trigger", "extra", "named"),
    [
        ({"periodic_schedule": {"interval_second": int("1" + "0" * 400)}}, {}, "interval_second"),
        ({"periodic_schedule": {"interval_second": 60, "start_time": "Infinity"}}, {},
         "start_time"),
        ({"periodic_schedule": {"interval_second": 60, "start_time": "9999-12-31T00:00:00Z"}}, {},
         "year 3000"),
        ({"periodic_schedule": {"interval_second": 60, "start_time": 10**400}}, {}, "start_time"),
        ({"periodic_schedule": {"interval_second": 60, "start_time": "2030-01-02T00:00:00Z",
                                "end_time": "2030-01-01T00:00:00Z"}}, {}, "before start_time"),
        ({"periodic_schedule": {"interval_second": 60}}, {"max_concurrency": "11"}, "1 to 10"),
        ({"periodic_schedule": {"interval_second": 60}}, {"max_concurrency": 0}, "1 to 10"),
    ],
    ids=["interval-overflow", "infinity", "year-9999", "start-1e400", "end-before-start",
         "concurrency-11", "concurrency-0"],
)  # fmt: skip
def test_malformed_recurring_runs_are_400_and_nothing_is_stored(
    server: str, spec: dict[str, Any], trigger: dict[str, Any], extra: dict[str, Any], named: str
) -> None:
    body = {"display_name": "r", "pipeline_spec": spec, "trigger": trigger, **extra}
    answer = httpx.post(f"{server}/apis/v2beta1/recurringruns", json=body, headers=AUTH)
    refused(answer, 400, named)
    listed = httpx.get(f"{server}/apis/v2beta1/recurringruns", headers=AUTH).json()
    assert listed["total_size"] == 0
