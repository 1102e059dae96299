"""`headwater ui` as a real process on a loopback port, and its refusal of an open host."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest
from cli_harness import Cli, run_ok

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def ui_server(headwater: Cli, *args: str) -> Iterator[str]:
    """`headwater ui` on any free loopback port (`--port 0`: the one it says it took) until the
    block ends; yields its base URL."""
    proc = headwater.popen(
        "ui", "--port", "0", *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        said = proc.stderr.readline() if proc.stderr else ""
        assert said.startswith("headwater: UI at http://127.0.0.1:"), said
        base = said.split(" at ", 1)[1].strip().rstrip("/")
        assert not base.endswith(":0"), said
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, proc.communicate()
            with contextlib.suppress(httpx.TransportError):
                httpx.get(f"{base}/static/style.css", timeout=2)
                break
            assert time.monotonic() < deadline, "headwater ui did not answer in 30 s"
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.communicate(timeout=15)


def test_ui_serves_pages_and_the_api(headwater: Cli) -> None:
    done = run_ok(headwater.run("params_chain"))
    with ui_server(headwater) as base:
        page = httpx.get(f"{base}/", timeout=10)
        assert page.status_code == 200 and done["run_id"] in page.text
        runs = httpx.get(f"{base}/api/v1/runs", timeout=10).json()
        assert [r["run_id"] for r in runs["runs"]] == [done["run_id"]]
        run = httpx.get(f"{base}/runs/{done['run_id']}", timeout=10)
        assert run.status_code == 200 and '<svg id="dag"' in run.text


def test_ui_with_a_token_refuses_requests_without_it(headwater: Cli) -> None:
    token = headwater.cwd / "token"
    token.write_text("s3cret\n")
    with ui_server(headwater, "--token-file", str(token)) as base:
        assert httpx.get(f"{base}/api/v1/runs", timeout=10).status_code == 401
        authorised = httpx.get(
            f"{base}/api/v1/runs", headers={"Authorization": "Bearer s3cret"}, timeout=10
        )
        assert authorised.status_code == 200 and authorised.json()["runs"] == []


def test_a_token_on_the_command_line_is_warned_about(headwater: Cli) -> None:
    proc = headwater.popen(
        "ui", "--port", "0", "--token", "s3cret", stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        said = proc.stderr.readline() if proc.stderr else ""
    finally:
        proc.terminate()
        proc.communicate(timeout=15)
    assert said.startswith("headwater: warning: --token on the command line can be read by every")
    assert "--token-file" in said


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.1", "::"], ids=["any", "ip", "any6"])
def test_non_loopback_host_needs_a_token(headwater: Cli, host: str) -> None:
    refused = headwater("ui", "--host", host, "--port", "1", timeout=30)
    assert refused.returncode == 2
    [line] = refused.stderr.strip().splitlines()
    assert "--token" in line and host in line


def test_a_blank_token_is_no_token(headwater: Cli) -> None:
    headwater.env["HEADWATER_TOKEN"] = "  "
    refused = headwater("ui", "--host", "192.0.2.1", "--port", "1", timeout=30)
    assert refused.returncode == 2, refused.describe()
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith("headwater: error: refusing to serve on '192.0.2.1' without a token")
