"""Triton's extensions its client calls: model configuration, statistics, repository index
(tritonclient.http `get_model_config`, `get_inference_statistics`,
`get_model_repository_index` send these requests)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from headwater.serving.app import create_app
from headwater.serving.endpoint import ModelEndpoint
from headwater.serving.repository import ModelRepository

from .helpers import client, rows, v2_input

pytestmark = pytest.mark.anyio


async def test_config_describes_the_model_as_tritons_model_config(
    sklearn_model: Callable[..., str],
) -> None:
    async with client(create_app([f"iris={sklearn_model()}"])) as c:
        plain = await c.get("/v2/models/iris/config")
        versioned = await c.get("/v2/models/iris/versions/1/config")
        missing = await c.get("/v2/models/iris/versions/7/config")
    assert plain.status_code == 200 and plain.json() == versioned.json()
    assert plain.json() == {
        "name": "iris",
        "platform": "sklearn",
        "backend": "sklearn",
        "max_batch_size": 0,
        "input": [{"name": "input-0", "data_type": "TYPE_FP64", "dims": [-1, 4]}],
        "output": [
            {"name": "predict", "data_type": "TYPE_STRING", "dims": [-1]},
            {"name": "predict_proba", "data_type": "TYPE_FP64", "dims": [-1, 2]},
            {"name": "decision_function", "data_type": "TYPE_FP64", "dims": [-1]},
        ],
    }
    assert missing.status_code == 404 and "no version '7'" in missing.json()["error"]


async def test_stats_count_inferences_per_version(xgboost_model: Callable[..., str]) -> None:
    good = {"inputs": [v2_input(rows(2))]}
    bad = {"inputs": [v2_input(rows(2)[:, :3])]}  # three features where the model takes four
    async with client(create_app([xgboost_model()])) as c:
        before = (await c.get("/v2/models/churn/stats")).json()
        for body in (good, good, bad):
            await c.post("/v2/models/churn/infer", json=body)
        await c.post("/v1/models/churn:predict", json={"instances": rows(1).tolist()})
        after = await c.get("/v2/models/churn/stats")
        every = await c.get("/v2/models/stats")
        one = await c.get("/v2/models/churn/versions/1/stats")
    assert before["model_stats"][0]["inference_count"] == 0
    assert after.status_code == 200 and after.json() == every.json() == one.json()
    [stat] = after.json()["model_stats"]
    assert (stat["name"], stat["version"]) == ("churn", "1")
    assert stat["inference_count"] == stat["execution_count"] == 3
    assert stat["last_inference"] > 0
    counts = {k: v["count"] for k, v in stat["inference_stats"].items()}
    assert counts == {
        "success": 3,
        "fail": 1,
        "queue": 0,
        "compute_input": 4,
        "compute_infer": 3,
        "compute_output": 3,
        "cache_hit": 0,
        "cache_miss": 0,
    }
    assert stat["inference_stats"]["compute_infer"]["ns"] > 0


async def test_repository_index_lists_the_loaded_versions(
    xgboost_model: Callable[..., str],
) -> None:
    from headwater.serving.resolve import resolve

    repository = ModelRepository([ModelEndpoint("empty")])
    repository.add_model(resolve(xgboost_model()))
    async with client(create_app(repository)) as c:
        everything = await c.post("/v2/repository/index")  # tritonclient sends no body
        ready = await c.post("/v2/repository/index", json={"ready": True})
        wrong = await c.post("/v2/repository/index", json={"ready": "yes"})
    assert everything.status_code == 200, everything.text
    assert everything.json() == [
        {"name": "empty", "state": "UNAVAILABLE", "reason": "no version loaded"},
        {"name": "churn", "version": "1", "state": "READY", "reason": ""},
    ]
    assert ready.json() == everything.json()[1:]
    assert wrong.status_code == 400 and '"ready"' in wrong.json()["error"]
