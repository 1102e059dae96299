"""`deploy_model` and `headwater endpoints`: a pipeline deploys a registered model into a
server that outlives the run, a second run updates it in place without dropping a request,
and `headwater endpoints stop` ends it. Real runs, real servers on loopback."""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli, process_gone, run_ok, wait_for

pytest.importorskip("fastapi")
pytest.importorskip("xgboost")
httpx = pytest.importorskip("httpx")

pytestmark = pytest.mark.integration
VERSION = "x-headwater-model-version"
ROWS = {"inputs": [{"name": "input-0", "datatype": "FP32", "shape": [2, 4],
                    "data": [0.5, 1, 2, 3, -1, 0, 1, 2]}]}  # fmt: skip


def endpoints(cli: Cli) -> dict[str, dict[str, Any]]:
    listed = cli("endpoints", "list", "--json")
    assert listed.returncode == 0, listed.describe()
    return {e["name"]: e for e in json.loads(listed.stdout)}


@contextlib.contextmanager
def stopping_every_endpoint(cli: Cli) -> Iterator[None]:
    """Stop what the test deployed, whatever happens (a server must not outlive a test)."""
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            for endpoint in endpoints(cli).values():
                if endpoint["state"] == "running":
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(endpoint["pid"], 9)


def infer(url: str) -> httpx.Response:
    return httpx.post(f"{url}/v2/models/churn/infer", json=ROWS, timeout=10)


def test_a_deployed_model_outlives_its_run_and_a_second_run_updates_it(headwater: Cli) -> None:
    with stopping_every_endpoint(headwater):
        first = run_ok(headwater.run("deploy_model", params={"seed": 1}))
        url = first["outputs"]["Output"]
        # The run has ended; its server still answers, with the version it registered.
        answer = infer(url)
        assert answer.status_code == 200, answer.text
        assert answer.headers[VERSION] == "1"
        recorded = endpoints(headwater)["churn"]
        assert (recorded["state"], recorded["url"], recorded["run_id"]) == (
            "running",
            url,
            first["run_id"],
        )
        assert recorded["models"][0]["registered"] == "churn:1"
        assert Path(recorded["log_path"]).is_file()

        # A second run registers version 2 and deploys it to the same name while clients keep
        # calling: the same server swaps the version in, and no request fails.
        failures: list[str] = []
        versions: set[str] = set()
        done = threading.Event()

        def call() -> None:
            with httpx.Client(timeout=10) as client:
                while not done.is_set():
                    try:
                        got = client.post(f"{url}/v2/models/churn/infer", json=ROWS)
                    except httpx.TransportError as exc:
                        failures.append(repr(exc))
                        continue
                    if got.status_code != 200:
                        failures.append(f"{got.status_code} {got.text}")
                    versions.add(got.headers.get(VERSION, "?"))

        callers = [threading.Thread(target=call) for _ in range(3)]
        for caller in callers:
            caller.start()
        try:
            second = run_ok(headwater.run("deploy_model", params={"seed": 2}))
            time.sleep(0.3)
        finally:
            done.set()
            for caller in callers:
                caller.join(timeout=30)
        assert failures == []
        assert second["outputs"]["Output"] == url
        assert versions >= {"2"}
        assert infer(url).headers[VERSION] == "2"
        updated = endpoints(headwater)["churn"]
        assert updated["pid"] == recorded["pid"], "an update must not restart the server"
        assert (updated["models"][0]["version"], updated["run_id"]) == ("2", second["run_id"])
        metadata = httpx.get(f"{url}/admin/models/churn/traffic", timeout=10).json()
        assert metadata["versions"] == ["2"], "the old version stays loaded"

        stopped = headwater("endpoints", "stop", "churn")
        assert stopped.returncode == 0, stopped.describe()
        assert "endpoint 'churn' stopped" in stopped.stderr
        wait_for(lambda: process_gone(recorded["pid"]), 10, "the server to end")
        assert endpoints(headwater)["churn"]["state"] == "stopped"
        again = headwater("endpoints", "stop", "churn")
        assert again.returncode == 0 and "was not running" in again.stderr


def test_redeploying_with_other_settings_restarts_on_the_same_port(
    headwater: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_serve_cli import save_booster

    import headwater as api

    monkeypatch.setenv("HEADWATER_HOME", str(headwater.home))
    model = save_booster(headwater.home / "model")
    with stopping_every_endpoint(headwater):
        # Two deploys of one name at once start one server: the second finds it running.
        with ThreadPoolExecutor(2) as pool:
            both = list(pool.map(lambda _: api.deploy_model(f"churn={model}"), range(2)))
        assert sorted(d.action for d in both) == ["started", "unchanged"]
        assert both[0].endpoint.pid == both[1].endpoint.pid
        first = next(d for d in both if d.action == "started")
        assert first.endpoint.state == "running"
        assert infer(first.endpoint.url).status_code == 200
        same = api.deploy_model(f"churn={model}")
        assert (same.action, same.endpoint.pid) == ("unchanged", first.endpoint.pid)
        # An endpoint recorded before a setting existed has that setting's default: the same
        # deployment leaves its server alone.
        from dataclasses import replace

        from headwater.metadata import open_store

        with open_store(f"sqlite:///{headwater.home / 'metadata.db'}") as store:
            record = store.get_endpoint("churn")
            assert record is not None and "grpc_port" in record.config
            older = {k: v for k, v in record.config.items() if k != "grpc_port"}
            store.save_endpoint(replace(record, config=older))
        again = api.deploy_model(f"churn={model}")
        assert (again.action, again.endpoint.pid) == ("unchanged", first.endpoint.pid)
        wider = api.deploy_model(f"churn={model}", workers=2)
        assert wider.action == "restarted"
        assert wider.endpoint.url == first.endpoint.url
        assert wider.endpoint.pid != first.endpoint.pid
        assert process_gone(first.endpoint.pid)
        assert infer(wider.endpoint.url).status_code == 200
        # Another model into the 2-worker server: updated in place, in both workers.
        other = save_booster(headwater.home / "model-b")
        updated = api.deploy_model(f"churn={other}", workers=2)
        assert (updated.action, updated.endpoint.pid) == ("updated", wider.endpoint.pid)
        assert updated.endpoint.models[0]["version"] == "2"

        def everywhere() -> bool:  # fresh connections land on either worker
            return {infer(wider.endpoint.url).headers[VERSION] for _ in range(30)} == {"2"}

        wait_for(everywhere, 20, "every worker to serve version 2")
        assert [e.name for e in api.list_endpoints()] == ["churn"]
        _, stopped = api.stop_endpoint("churn")
        assert stopped and process_gone(wider.endpoint.pid)


def test_bad_deployments_are_one_line(headwater: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    import headwater as api
    from headwater.errors import UserError

    monkeypatch.setenv("HEADWATER_HOME", str(headwater.home))
    monkeypatch.delenv("HEADWATER_TOKEN", raising=False)
    unknown = headwater("endpoints", "stop", "nope")
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        "headwater: error: no endpoint named 'nope': nothing was deployed yet"
    ]
    with pytest.raises(UserError, match="no model named 'nope'"):
        api.deploy_model("nope")
    with pytest.raises(UserError, match="HEADWATER_TOKEN"):
        api.deploy_model("nope", name="x", host="0.0.0.0")
    with pytest.raises(UserError, match="endpoint name 'a b'"):
        api.deploy_model("nope", name="a b")
    for bad, said in [
        ({"port": "8080"}, "port must be an integer, got '8080'"),
        ({"port": 70000}, "port must be from 0 to 65535"),
        ({"workers": 0}, "workers must be between 1"),
        ({"max_batch_size": 2.5}, "max_batch_size must be an integer"),
        ({"max_latency_ms": -1}, "max_latency_ms must be 0 or more"),
        ({"grpc_port": 0}, "grpc_port must be"),
        ({"grpc_port": 9000, "port": 9000}, "grpc_port 9000 is port too"),
    ]:
        with pytest.raises(UserError, match=re.escape(said)):
            api.deploy_model("nope", name="x", **bad)  # type: ignore[arg-type]
    unknown = headwater("endpoints", "stop", "nope")
    assert unknown.returncode == 2
    assert unknown.stderr.strip().splitlines() == [
        "headwater: error: no endpoint named 'nope' (endpoints: none); see headwater endpoints list"
    ]
    broken = headwater.home / "broken.joblib"
    broken.write_bytes(b"not a pickle")
    with pytest.raises(UserError, match=r"the model server exited: .*broken.*full log: "):
        api.deploy_model(str(broken), name="broken")
    (failed,) = api.list_endpoints()
    assert (failed.name, failed.state) == ("broken", "stopped")
    assert process_gone(failed.pid)
    both = headwater("endpoints", "stop")
    assert both.returncode == 2 and "give endpoint names to stop, or --all" in both.stderr
    listed = headwater("endpoints", "list")
    assert listed.returncode == 0 and listed.stdout.splitlines()[1].split()[:2] == [
        "broken",
        "stopped",
    ]
