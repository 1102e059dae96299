"""`/metrics`: request counts by model, version, protocol and status, KServe's stage
histograms, batch sizes, models loaded and the traffic split, in a registry per app."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

from headwater.serving.app import create_app
from headwater.serving.batching import BatchingPredictor
from headwater.serving.config import Canary, ServerConfig
from headwater.serving.endpoint import ModelEndpoint
from headwater.serving.repository import ModelRepository
from headwater.serving.resolve import resolve
from headwater.serving.server import build_repository

from .helpers import client, rows, v2_input

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(text: str) -> Samples:
    """Every sample as {(name, labels): value}."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.mark.anyio
async def test_requests_stages_models_and_traffic_are_exported(
    sklearn_model: Callable[..., str],
) -> None:
    first = resolve(sklearn_model())
    second = dataclasses.replace(first, version="2")
    repository = build_repository(ServerConfig(sources=(first,), canaries=(Canary(second, 0),)))
    app = create_app(repository)
    body = {"instances": rows(3).tolist()}
    async with client(app) as c:
        for _ in range(3):
            assert (await c.post("/v1/models/iris:predict", json=body)).status_code == 200
        assert (await c.post("/v1/models/iris:predict", json={"oops": 1})).status_code == 400
        infer = {"inputs": [v2_input(rows(2))]}
        assert (await c.post("/v2/models/iris/versions/2/infer", json=infer)).status_code == 200
        assert (await c.post("/v1/models/iris:explain", json=body)).status_code == 501
        answer = await c.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    samples = scrape(answer.text)
    counted = "headwater_requests_total"
    v1 = {"model_name": "iris", "protocol": "v1"}
    assert value(samples, counted, model_version="1", status="200", **v1) == 3
    # A body refused before any model is chosen is counted without a model.
    unlabelled = {"model_name": "", "model_version": "", "protocol": ""}
    assert value(samples, counted, status="400", **unlabelled) == 1
    v2 = {"model_name": "iris", "protocol": "v2"}
    assert value(samples, counted, model_version="2", status="200", **v2) == 1
    assert value(samples, counted, model_version="1", status="501", **v1) == 1
    for stage, count in [("preprocess", 4), ("predict", 3), ("postprocess", 3)]:
        name = f"request_{stage}_seconds_count"
        assert value(samples, name, model_name="iris", model_version="1") == count
    assert (
        value(samples, "request_predict_seconds_count", model_name="iris", model_version="2") == 1
    )
    assert value(samples, "headwater_request_duration_seconds_count", **v1) == 4
    assert value(samples, "headwater_models_loaded", model_name="iris") == 2
    split = "headwater_model_traffic_percent"
    assert value(samples, split, model_name="iris", model_version="1") == 100
    assert "# TYPE request_explain_seconds histogram" in answer.text
    async with client(app) as c:
        await c.post("/admin/models/iris/traffic", json={"canary": {"version": "2", "percent": 30}})
        shifted = scrape((await c.get("/metrics")).text)
    assert value(shifted, split, model_name="iris", model_version="2") == 30


@pytest.mark.anyio
async def test_batch_sizes_are_observed(sklearn_model: Callable[..., str]) -> None:
    source = resolve(sklearn_model())
    predictor = BatchingPredictor(max_batch_size=4, max_latency_ms=50)
    repository = ModelRepository([ModelEndpoint("iris", predictor=predictor)])
    repository.add_model(source)
    app = create_app(repository)
    body = {"instances": rows(1).tolist()}
    async with client(app) as c:
        answers = await asyncio.gather(
            *(c.post("/v1/models/iris:predict", json=body) for _ in range(8))
        )
        assert {a.status_code for a in answers} == {200}
        samples = scrape((await c.get("/metrics")).text)
    labels = {"model_name": "iris", "model_version": "1"}
    assert value(samples, "headwater_batch_size_count", **labels) == 2
    assert value(samples, "headwater_batch_size_sum", **labels) == 8


@pytest.mark.anyio
async def test_each_app_has_its_own_registry_and_metrics_can_be_off(
    sklearn_model: Callable[..., str],
) -> None:
    spec = sklearn_model()
    one, two = create_app([spec]), create_app([spec])
    body = {"instances": rows(1).tolist()}
    async with client(one) as c:
        await c.post("/v1/models/iris:predict", json=body)
    async with client(two) as c:
        samples = scrape((await c.get("/metrics")).text)
    total = "headwater_requests_total"
    ok = {"model_name": "iris", "model_version": "1", "protocol": "v1", "status": "200"}
    assert value(samples, total, **ok) == 0
    async with client(create_app([spec], metrics=False)) as c:
        assert (await c.get("/metrics")).status_code == 404


@pytest.mark.anyio
async def test_metrics_need_the_token_when_there_is_one(sklearn_model: Callable[..., str]) -> None:
    app = create_app([sklearn_model()], token="s3cret")
    async with client(app) as c:
        assert (await c.get("/metrics")).status_code == 401
    async with client(app, authorization="Bearer s3cret") as c:
        assert (await c.get("/metrics")).status_code == 200


@pytest.mark.anyio
async def test_failed_loads_under_made_up_names_leave_the_metrics_as_they_were(
    sklearn_model: Callable[..., str],
) -> None:
    app = create_app([sklearn_model()])

    async def fail(c: Any, i: int) -> None:
        body = {"model": f"/no/such/model-{i}.joblib"}
        assert (await c.post(f"/admin/models/made-up-{i}/load", json=body)).status_code == 400

    async with client(app) as c:
        await fail(c, 0)
        await c.get("/metrics")  # the scrape counts itself from its first time on
        before = (await c.get("/metrics")).text
        for i in range(1, 200):
            await fail(c, i)
        after = (await c.get("/metrics")).text
    assert len(after.splitlines()) == len(before.splitlines())
    samples = scrape(after)
    names = {dict(labels).get("model_name") for _, labels in samples}
    assert names - {None} == {"", "iris"}
    failed = {"model_name": "", "model_version": "", "protocol": "admin", "status": "400"}
    assert value(samples, "headwater_requests_total", **failed) == 200
