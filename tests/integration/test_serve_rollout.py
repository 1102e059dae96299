"""A canary rollout under load on a real `headwater serve`: 8 concurrent clients for ~5 s
while the canary's share is raised and both versions are reloaded, through the admin API;
not one request may fail."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from cli_harness import Cli

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("xgboost")
pytest.importorskip("httpx")

import httpx
import numpy as np
from test_serve_cli import save_booster, serving

pytestmark = pytest.mark.integration
VERSION = "x-headwater-model-version"
CLIENTS = 8
SECONDS = 5.0


def test_a_canary_shift_and_reloads_under_load_fail_no_request(
    headwater: Cli, tmp_path: Path
) -> None:
    from headwater.api.models import register_model

    headwater.home.mkdir(parents=True, exist_ok=True)
    metadata = f"sqlite:///{headwater.home / 'metadata.db'}"
    for version in (1, 2):
        model = save_booster(tmp_path / f"artifact-{version}")
        assert register_model("churn", str(model), metadata=metadata).version == version
    x = np.random.default_rng(3).normal(size=(2, 4)).astype(np.float32)
    v1_body = {"instances": x.tolist()}
    tensor = {"name": "input-0", "datatype": "FP32", "shape": [2, 4], "data": x.ravel().tolist()}
    v2_body = {"inputs": [tensor]}
    calls = [("/v1/models/churn:predict", v1_body), ("/v2/models/churn/infer", v2_body)]
    args = ("churn:1", "--canary", "churn:2=0", "--max-batch-size", "8", "--max-latency-ms", "2")
    with serving(headwater, *args) as (url, log):
        # A request answered before the shift was asked for is "before"; one sent after the
        # shift was confirmed is "after"; one that overlaps it may have gone either way.
        shifting, shifted = threading.Event(), threading.Event()
        stop = threading.Event()
        lock = threading.Lock()
        served: dict[str, Counter[str]] = {p: Counter() for p in ("before", "during", "after")}
        failures: list[str] = []

        def load(i: int) -> None:
            with httpx.Client(base_url=url, timeout=10) as client:
                n = 0
                while not stop.is_set():
                    after = shifted.is_set()
                    headers = {"x-request-id": uuid.uuid4().hex}
                    path, body = calls[n % 2]
                    try:
                        answer = client.post(path, json=body, headers=headers)
                    except httpx.HTTPError as exc:
                        with lock:
                            failures.append(f"client {i}: {type(exc).__name__}: {exc}")
                        continue
                    n += 1
                    phase = "after" if after else "during" if shifting.is_set() else "before"
                    with lock:
                        if answer.status_code != 200:
                            failures.append(f"client {i}: {answer.status_code} {answer.text}")
                        else:
                            served[phase][answer.headers[VERSION]] += 1

        def wait_served(phase: str, count: int) -> None:
            """Poll until `count` requests of `phase` were answered (slow starts vary)."""
            deadline = time.monotonic() + 30
            while sum(served[phase].values()) < count and not failures:
                assert time.monotonic() < deadline, f"only {served} served in 30 s"
                time.sleep(0.05)

        threads = [threading.Thread(target=load, args=(i,)) for i in range(CLIENTS)]
        for thread in threads:
            thread.start()
        started = time.monotonic()
        admin: list[httpx.Response] = []
        try:
            wait_served("before", 50)
            time.sleep(max(0.0, SECONDS * 0.3 - (time.monotonic() - started)))
            change = {"canary": {"version": "2", "percent": 50}}
            shifting.set()
            admin.append(httpx.post(f"{url}/admin/models/churn/traffic", json=change))
            shifted.set()
            wait_served("after", 20)
            time.sleep(SECONDS * 0.2)
            admin.append(httpx.post(f"{url}/admin/models/churn/reload", timeout=30))
            time.sleep(SECONDS * 0.2)
            canary = {"version": "2"}
            admin.append(httpx.post(f"{url}/admin/models/churn/reload", json=canary, timeout=30))
            time.sleep(max(0.0, SECONDS - (time.monotonic() - started)))
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=30)
        promoted = httpx.post(f"{url}/admin/models/churn/traffic", json={"action": "promote"})
        after_promote = {
            httpx.post(f"{url}/v1/models/churn:predict", json=v1_body).headers[VERSION]
            for _ in range(10)
        }
        metrics = httpx.get(f"{url}/metrics").text

    assert [a.status_code for a in admin] == [200, 200, 200], [a.text for a in admin]
    assert [a.json().get("reloaded") for a in admin[1:]] == ["1", "2"]
    assert failures == [], failures[:5]
    assert set(served["before"]) == {"1"}, served
    assert served["after"]["1"] > 0 and served["after"]["2"] > 0, served
    total = sum(sum(counts.values()) for counts in served.values())
    assert total > 100, served
    assert promoted.json()["traffic"] == {"1": 0.0, "2": 100.0}
    assert after_promote == {"2"}
    assert 'headwater_batch_size_count{model_name="churn"' in metrics
    assert "canary 'churn' version 2" in log.read_text()
