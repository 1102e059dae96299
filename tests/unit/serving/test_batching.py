"""Adaptive batching: concurrent requests share predict calls and each gets its own rows back;
requests that cannot be joined, or spoil a batch, are answered alone."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from headwater.errors import InvalidArgumentError
from headwater.serving.app import create_app
from headwater.serving.batching import BatchingPredictor
from headwater.serving.config import Batching, ServerConfig
from headwater.serving.endpoint import ModelEndpoint, ModelVersion
from headwater.serving.predictor import Predictor, ThreadPredictor
from headwater.serving.repository import ModelRepository
from headwater.serving.resolve import resolve
from headwater.serving.server import build_repository

from .helpers import client, rows, v2_input


class CountingPredictor(ThreadPredictor):
    """A `ThreadPredictor` noting the rows of every call it makes."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    async def predict(
        self,
        version: ModelVersion,
        inputs: Mapping[str, np.ndarray],
        *,
        outputs: Sequence[str] | None = None,
    ) -> dict[str, np.ndarray]:
        self.calls.append(len(next(iter(inputs.values()))))
        return await super().predict(version, inputs, outputs=outputs)


def batched(spec: str, counting: CountingPredictor, size: int = 8, ms: float = 50) -> Any:
    """An app serving `spec` through a batcher over `counting`."""
    source = resolve(spec)
    predictor = BatchingPredictor(counting, max_batch_size=size, max_latency_ms=ms)
    repository = ModelRepository([ModelEndpoint(source.name, predictor=predictor)])
    repository.add_model(source)
    return create_app(repository)


@pytest.mark.anyio
async def test_concurrent_requests_share_predict_calls_and_get_their_own_rows(
    xgboost_model: Callable[..., str],
) -> None:
    spec = xgboost_model()
    plain = create_app([spec])
    counting = CountingPredictor()
    app = batched(spec, counting, size=8, ms=50)
    inputs = [rows(1 + i % 3, seed=i) for i in range(16)]
    async with client(plain) as c:
        expected = [
            (await c.post("/v2/models/churn/infer", json={"inputs": [v2_input(x)]})).json()
            for x in inputs
        ]
    async with client(app) as c:
        answers = await asyncio.gather(
            *(c.post("/v2/models/churn/infer", json={"inputs": [v2_input(x)]}) for x in inputs)
        )
    assert [a.status_code for a in answers] == [200] * 16
    found = [a.json()["outputs"][0] for a in answers]
    for got, want, x in zip(found, expected, inputs, strict=True):
        assert got["shape"] == [len(x)]
        np.testing.assert_allclose(got["data"], want["outputs"][0]["data"], rtol=1e-6)
    assert len(counting.calls) <= 4 and sum(counting.calls) == sum(len(x) for x in inputs)
    assert max(counting.calls) > 3


@pytest.mark.anyio
async def test_requests_of_other_shapes_go_in_their_own_batches(handler_file: str) -> None:
    counting = CountingPredictor()
    app = batched(f"sums={handler_file}:Untyped", counting, size=16, ms=50)
    inputs = [np.full((2, 4 if i % 2 else 3), float(i), dtype=np.float32) for i in range(8)]
    async with client(app) as c:
        answers = await asyncio.gather(
            *(c.post("/v2/models/sums/infer", json={"inputs": [v2_input(x)]}) for x in inputs)
        )
    for answer, x in zip(answers, inputs, strict=True):
        assert answer.status_code == 200, answer.text
        assert answer.json()["outputs"][0]["data"] == pytest.approx(x.sum(axis=1).tolist())
    assert sorted(counting.calls) == [8, 8]


@pytest.mark.anyio
async def test_a_request_the_model_rejects_fails_alone(handler_file: str) -> None:
    counting = CountingPredictor()
    app = batched(f"lengths={handler_file}:Lengths", counting, size=8, ms=50)
    texts = [["a", "bb"], ["reject"], ["ccc"], ["dddd", "e"]]

    def body(data: list[str]) -> dict[str, Any]:
        return {
            "inputs": [{"name": "text", "datatype": "BYTES", "shape": [len(data)], "data": data}]
        }

    async with client(app) as c:
        answers = await asyncio.gather(
            *(c.post("/v2/models/lengths/infer", json=body(t)) for t in texts)
        )
    assert [a.status_code for a in answers] == [200, 400, 200, 200]
    assert "reject" in answers[1].json()["error"]
    assert [a.json()["outputs"][0]["data"] for a in answers if a.status_code == 200] == [
        [1, 2],
        [3],
        [4, 1],
    ]
    assert counting.calls[0] == 6 and sorted(counting.calls[1:]) == [1, 1, 2, 2]


class Totals:
    """A runtime whose output is one number for the whole batch: it cannot be split."""

    def predict(
        self, inputs: Mapping[str, np.ndarray], *, outputs: Sequence[str] | None = None
    ) -> dict[str, np.ndarray]:
        return {"total": np.asarray(float(np.sum(inputs["x"])))}


@pytest.mark.anyio
async def test_outputs_that_are_not_per_row_are_computed_per_request() -> None:
    counting = CountingPredictor()
    batcher = BatchingPredictor(counting, max_batch_size=4, max_latency_ms=20)
    sizes: list[int] = []
    batcher.listeners.append(lambda version, size: sizes.append(size))
    version = ModelVersion("totals", "1", Totals(), batcher)  # type: ignore[arg-type]
    inputs = [np.full((2, 2), float(i)) for i in range(4)]
    found = await asyncio.gather(*(batcher.predict(version, {"x": x}) for x in inputs))
    assert [float(f["total"]) for f in found] == [0.0, 4.0, 8.0, 12.0]
    assert counting.calls == [8, 2, 2, 2, 2] and sizes == [4]


@pytest.mark.anyio
async def test_a_full_batch_does_not_wait_and_a_lone_request_waits_at_most_the_latency(
    handler_file: str,
) -> None:
    counting = CountingPredictor()
    batcher = BatchingPredictor(counting, max_batch_size=2, max_latency_ms=10_000)
    version = ModelVersion("t", "1", Totals(), batcher)  # type: ignore[arg-type]
    x = {"x": np.ones((1, 2))}
    with anyio_fail_after(5):
        await asyncio.gather(batcher.predict(version, x), batcher.predict(version, x))
    quick = BatchingPredictor(counting, max_batch_size=64, max_latency_ms=1)
    with anyio_fail_after(5):
        await quick.predict(ModelVersion("t", "1", Totals(), quick), x)  # type: ignore[arg-type]


def anyio_fail_after(seconds: float) -> Any:
    import anyio

    return anyio.fail_after(seconds)


@pytest.mark.parametrize(
    ("size", "ms"), [(0, 5), (2.5, 5), (True, 5), (4, -1)], ids=["zero", "float", "bool", "neg"]
)
def test_bad_settings_are_refused(size: Any, ms: float) -> None:
    inner: Predictor = ThreadPredictor()
    with pytest.raises(InvalidArgumentError, match="max_"):
        BatchingPredictor(inner, max_batch_size=size, max_latency_ms=ms)


def test_cli_options_for_all_models_and_per_model() -> None:
    from headwater.cli.serve import _batching

    served = ["churn", "iris"]
    assert _batching([], [], served) == {}
    assert _batching(["32"], ["2"], served) == {
        "churn": Batching(32, 2.0),
        "iris": Batching(32, 2.0),
    }
    assert _batching(["16", "iris=1"], ["churn=0.5"], served) == {"churn": Batching(16, 0.5)}
    for sizes, latencies, said in [
        (["other=4"], [], "not served"),
        (["x"], [], "NAME"),
        (["0"], [], "at least 1"),
        (["4"], ["-2"], "0 or more"),
    ]:
        with pytest.raises(InvalidArgumentError, match=said):
            _batching(sizes, latencies, served)


def test_the_server_batches_the_models_it_is_told_to(sklearn_model: Callable[..., str]) -> None:
    source = resolve(sklearn_model())
    config = ServerConfig(sources=(source,), batching={"iris": Batching(8, 3)})
    repository: ModelRepository = build_repository(ServerConfig.from_json(config.to_json()))
    version = repository.endpoint("iris").state.versions["1"]
    assert isinstance(version.predictor, BatchingPredictor)
    assert (version.predictor.max_batch_size, version.predictor.max_latency_ms) == (8, 3.0)
    repository.close()
