"""`headwater serve` as a real process on loopback: a registered model answered over V1 and
V2, by httpx and by a third-party V2 client (tritonclient), several workers behind one
token, and the refusals that are one line with exit code 2."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_harness import Cli

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
xgb = pytest.importorskip("xgboost")
httpx = pytest.importorskip("httpx")

import numpy as np  # noqa: E402

pytestmark = pytest.mark.integration
FEATURES = ["age", "income", "tenure", "visits"]
VERSION = "x-headwater-model-version"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def save_booster(where: Path) -> Path:
    """A small binary classifier as train_xgboost's Model artifact."""
    from headwater.models import xgboost_file

    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 4)).astype(np.float32)
    matrix = xgb.DMatrix(x, label=(x[:, 0] > 0).astype(int), feature_names=FEATURES)
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 2}, matrix, 5)
    xgboost_file.save(booster, str(where), {"framework": "xgboost", "feature_names": FEATURES})
    return where


@contextlib.contextmanager
def serving(cli: Cli, *args: str, timeout: float = 90) -> Iterator[tuple[str, Path]]:
    """`headwater serve ARGS...` until its /v2/health/ready says 200; stopped with SIGINT
    after the block, which must end it cleanly. Yields its base URL and its stderr file."""
    port = free_port()
    log = cli.cwd / f"serve-{port}.log"
    with log.open("w") as stderr:
        proc = cli.popen("serve", *args, "--port", str(port), stdout=stderr, stderr=stderr)
    url = f"http://127.0.0.1:{port}"
    stopped = False
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                pytest.fail(f"headwater serve exited {proc.returncode}:\n{log.read_text()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/v2/health/ready", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(f"headwater serve not ready after {timeout}s:\n{log.read_text()}")
            time.sleep(0.1)
        yield url, log
        stopped = True
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0, log.read_text()
    finally:
        if not stopped and proc.poll() is None:
            # A failed test must not leave the server, or its worker processes, behind:
            # SIGINT ends it and its workers as a user's Ctrl-C does.
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_a_registered_model_is_served_over_v1_and_v2(headwater: Cli, tmp_path: Path) -> None:
    from headwater.api.models import register_model

    headwater.home.mkdir(parents=True, exist_ok=True)
    model = save_booster(tmp_path / "artifact")
    registered = register_model(
        "churn", str(model), metadata=f"sqlite:///{headwater.home / 'metadata.db'}"
    )
    assert registered.version == 1
    x = np.random.default_rng(1).normal(size=(2, 4)).astype(np.float32)
    booster = xgb.Booster(model_file=str(model / "model.ubj"))
    expected = booster.predict(xgb.DMatrix(x, feature_names=FEATURES))
    with serving(headwater, "churn") as (url, log):
        v1 = httpx.post(f"{url}/v1/models/churn:predict", json={"instances": x.tolist()})
        tensor = {"name": "input-0", "datatype": "FP32", "shape": [2, 4], "data": x.tolist()}
        v2 = httpx.post(f"{url}/v2/models/churn/infer", json={"id": "a", "inputs": [tensor]})
        found = _tritonclient_infer(url, x)
    assert v1.status_code == 200 and v1.headers[VERSION] == "1", v1.text
    np.testing.assert_allclose(v1.json()["predictions"], expected, rtol=1e-6)
    assert v2.status_code == 200 and v2.json()["id"] == "a", v2.text
    np.testing.assert_allclose(v2.json()["outputs"][0]["data"], expected, rtol=1e-6)
    if found is not None:
        np.testing.assert_allclose(found, expected, rtol=1e-6)
    said = log.read_text()
    assert "model 'churn' version 1 (xgboost, registry churn:1" in said
    assert f"serving on {url}" in said


def _tritonclient_infer(url: str, x: np.ndarray) -> np.ndarray | None:
    """The prediction through tritonclient's V2 HTTP client, or None if it is not installed."""
    try:
        import tritonclient.http as triton
    except ImportError:
        return None
    client = triton.InferenceServerClient(url=url.removeprefix("http://"))
    try:
        assert client.is_server_live() and client.is_server_ready()
        assert client.is_model_ready("churn")
        metadata = client.get_model_metadata("churn")
        assert metadata["inputs"] == [{"name": "input-0", "datatype": "FP32", "shape": [-1, 4]}]
        assert "explain" in client.get_server_metadata()["extensions"]
        tensor = triton.InferInput("input-0", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x, binary_data=False)
        wanted = triton.InferRequestedOutput("predict", binary_data=False)
        result = client.infer("churn", [tensor], outputs=[wanted], request_id="t1")
        assert result.get_response()["id"] == "t1"
        found: np.ndarray = result.as_numpy("predict")
        return found
    finally:
        client.close()


def test_workers_share_the_port_behind_a_token(headwater: Cli, tmp_path: Path) -> None:
    model = save_booster(tmp_path / "artifact")
    headwater.env["HEADWATER_TOKEN"] = "s3cret"
    body = {"instances": [[0.5, 0.1, 0.2, 0.3]]}
    with serving(headwater, f"churn={model}", "--workers", "2") as (url, log):
        refused = httpx.post(f"{url}/v1/models/churn:predict", json=body)
        token = {"authorization": "Bearer s3cret"}
        answers = [
            httpx.post(f"{url}/v1/models/churn:predict", json=body, headers=token)
            for _ in range(10)
        ]
    assert refused.status_code == 401 and "token" in refused.json()["error"]
    assert {a.status_code for a in answers} == {200}
    assert "with 2 workers" in log.read_text()


def test_failed_loads_and_a_name_loaded_again_keep_metrics_and_versions_honest(
    headwater: Cli, tmp_path: Path
) -> None:
    first = save_booster(tmp_path / "first")
    second, third = save_booster(tmp_path / "second"), save_booster(tmp_path / "third")
    body = {"instances": [[0.5, 0.1, 0.2, 0.3]]}
    with serving(headwater, f"churn={first}") as (url, _), httpx.Client(base_url=url) as c:
        c.post("/admin/models/made-up-0/load", json={"model": str(tmp_path / "none-0")})
        c.get("/metrics")  # the scrape counts itself from its first time on
        before = c.get("/metrics").text
        failed = [
            c.post(f"/admin/models/made-up-{i}/load", json={"model": str(tmp_path / f"none-{i}")})
            for i in range(1, 200)
        ]
        after = c.get("/metrics").text
        loads = [c.post("/admin/models/churn/load", json={"model": str(second)})]
        loads.append(c.post("/admin/models/churn/unload", json={"version": "2"}))
        loads.append(c.post("/admin/models/churn/load", json={"model": str(third)}))
        answer = c.post("/v1/models/churn:predict", json=body)
    assert {a.status_code for a in failed} == {400}
    assert len(after.splitlines()) == len(before.splitlines()) and "made-up" not in after
    assert [a.status_code for a in loads] == [200, 200, 200]
    assert [loads[0].json()["loaded"], loads[2].json()["loaded"]] == ["2", "3"]
    assert answer.status_code == 200 and answer.headers[VERSION] == "3"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["m.ubj", "--host", "0.0.0.0"], "refusing to serve on '0.0.0.0' without a token"),
        (["nowhere/model.ubj"], "model 'nowhere/model.ubj' does not exist"),
        (["churn"], "'churn' is neither a file nor a registered model"),
        (["m.ubj", "--workers", "0"], "--workers must be at least 1"),
        (["m.ubj", "--max-body-mb", "inf"], "--max-body-mb must be a positive number of MiB"),
        (
            ["m.ubj", "--allow-host", "models.example:80"],
            "--allow-host takes a host name or address without a port",
        ),
    ],
    ids=[
        "non-loopback-without-token",
        "missing-file",
        "unregistered",
        "zero-workers",
        "inf",
        "port",
    ],
)
def test_bad_invocations_are_one_line_and_exit_2(
    headwater: Cli, args: list[str], message: str
) -> None:
    headwater.env.pop("HEADWATER_TOKEN", None)
    done = headwater("serve", *args)
    assert done.returncode == 2, done.describe()
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("headwater: error: "), done.describe()
    assert message in lines[0]


def test_a_blank_token_is_no_token(headwater: Cli) -> None:
    headwater.env["HEADWATER_TOKEN"] = " \t"
    done = headwater("serve", "m.ubj", "--host", "192.0.2.1", "--port", "1")
    assert done.returncode == 2, done.describe()
    assert done.stderr.startswith(
        "headwater: error: refusing to serve on '192.0.2.1' without a token"
    ), done.describe()


def test_a_busy_port_is_one_line(headwater: Cli, tmp_path: Path) -> None:
    model = save_booster(tmp_path / "artifact")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = headwater("serve", str(model), "--port", str(port))
    assert done.returncode == 2, done.describe()
    assert done.stderr.strip().splitlines() == [
        f"headwater: error: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(another server is there: choose another --port)"
    ]


def test_serve_stops_on_sigterm_too(headwater: Cli, tmp_path: Path) -> None:
    model = save_booster(tmp_path / "artifact")
    port = free_port()
    proc = headwater.popen("serve", str(model), "--port", str(port), stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"http://127.0.0.1:{port}/v2/health/live", timeout=2).is_success:
                    break
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
