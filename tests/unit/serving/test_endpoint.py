"""Endpoints hold versions: atomic swaps, draining, reload and unload without a dropped
request, and the traffic-policy seam a canary router plugs into."""

from __future__ import annotations

import threading

import anyio
import anyio.to_thread
import pytest

from headwater.serving.app import create_app
from headwater.serving.endpoint import EndpointState, ModelEndpoint, TrafficPolicy
from headwater.serving.errors import ModelNotFoundError, ModelNotReadyError
from headwater.serving.repository import ModelRepository
from headwater.serving.resolve import resolve
from headwater.serving.runtimes import create_runtime
from headwater.serving.runtimes.base import ModelRuntime

from .helpers import client

VERSION = "x-headwater-model-version"


def runtime(handler_file: str, cls: str = "Untyped") -> ModelRuntime:
    return create_runtime(resolve(f"m={handler_file}:{cls}"))


def test_a_replaced_version_drains_before_it_unloads(handler_file: str) -> None:
    endpoint = ModelEndpoint("m")
    first = endpoint.load("1", runtime(handler_file))
    held = endpoint.choose()
    assert held is first and first.in_flight == 1
    second = endpoint.load("1", runtime(handler_file))  # same label: a reload
    assert endpoint.state.versions["1"] is second
    assert first.retired and first.runtime.ready  # still answering its request
    assert endpoint.choose() is second  # new requests go to the new copy
    second.release()
    held.release()
    assert first.wait_unloaded(timeout=5) and not first.runtime.ready
    assert second.runtime.ready


def test_unloading_moves_the_default_and_the_last_leaves_it_not_ready(
    handler_file: str,
) -> None:
    endpoint = ModelEndpoint("m")
    endpoint.load("1", runtime(handler_file))
    two = endpoint.load("2", runtime(handler_file), default=False)
    assert endpoint.state.default == "1"
    endpoint.unload("1")
    assert endpoint.state.default == "2" and endpoint.choose() is two
    two.release()
    endpoint.unload("2")
    assert not endpoint.ready and two.wait_unloaded(timeout=5)
    with pytest.raises(ModelNotReadyError, match="no version ready"):
        endpoint.choose()
    with pytest.raises(ModelNotFoundError, match="no version '2'"):
        endpoint.unload("2")


def test_a_failed_reload_keeps_the_old_copy_serving(handler_file: str) -> None:
    endpoint = ModelEndpoint("m")
    loaded = endpoint.load("1", runtime(handler_file))
    broken = ModelEndpoint("m", runtime_factory=lambda source: runtime(handler_file, "Missing"))
    broken.load("1", runtime(handler_file))
    with pytest.raises(Exception, match="no class 'Missing'"):
        broken.reload()
    assert broken.ready
    fresh = endpoint.reload()
    assert fresh is not loaded and fresh.version == "1" and loaded.wait_unloaded(timeout=5)


def test_swaps_from_many_threads_never_hand_out_an_unloaded_model(handler_file: str) -> None:
    endpoint = ModelEndpoint("m")
    endpoint.load("1", runtime(handler_file))
    stop = threading.Event()
    failures: list[str] = []

    def request() -> None:
        while not stop.is_set():
            chosen = endpoint.choose()
            try:
                if not chosen.runtime.ready:
                    failures.append(f"{chosen!r} was unloaded while held")
            finally:
                chosen.release()

    threads = [threading.Thread(target=request) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        for i in range(30):
            endpoint.load(str(i % 3), runtime(handler_file))
            if i % 5 == 4:
                endpoint.reload()
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert failures == []


class ByKey(TrafficPolicy):
    """Request keys starting with 'b' go to version 2: the shape of a canary router."""

    def choose(self, *, state: EndpointState, key: str | None) -> str | None:
        return "2" if key and key.startswith("b") else state.default


@pytest.mark.anyio
async def test_a_traffic_policy_picks_the_version_and_the_header_says_which(
    handler_file: str,
) -> None:
    repository = ModelRepository.from_sources([resolve(f"m={handler_file}:Untyped")])
    endpoint = repository.endpoint("m")
    endpoint.load("2", runtime(handler_file), default=False)
    endpoint.set_policy(ByKey())
    body = {"instances": [[1, 2]]}
    async with client(create_app(repository)) as c:
        a = await c.post("/v1/models/m:predict", json=body, headers={"x-request-id": "a1"})
        b = await c.post("/v1/models/m:predict", json=body, headers={"x-request-id": "b1"})
        pinned = await c.post(
            "/v2/models/m/versions/1/infer",
            json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [1]}]},
            headers={"x-request-id": "b2"},
        )
    assert (a.headers[VERSION], b.headers[VERSION], pinned.headers[VERSION]) == ("1", "2", "1")


@pytest.mark.anyio
async def test_reload_load_and_unload_under_load_drop_no_request(handler_file: str) -> None:
    repository = ModelRepository.from_sources([resolve(f"m={handler_file}:Slow")])
    endpoint = repository.endpoint("m")
    statuses: list[int] = []
    versions: set[str] = set()

    async with client(create_app(repository)) as c:

        async def requests() -> None:
            for _ in range(40):
                answer = await c.post("/v1/models/m:predict", json={"instances": [[1.0]]})
                statuses.append(answer.status_code)
                versions.add(answer.headers.get(VERSION, "?"))

        def swaps() -> None:
            for i in range(6):
                endpoint.reload()
                endpoint.load("2", runtime(handler_file, "Slow"))
                endpoint.unload("1" if i % 2 == 0 else "2")
                endpoint.load("1" if i % 2 == 0 else "2", runtime(handler_file, "Slow"))

        async with anyio.create_task_group() as group:
            for _ in range(6):
                group.start_soon(requests)
            group.start_soon(anyio.to_thread.run_sync, swaps)
    assert statuses == [200] * 240
    assert versions == {"1", "2"}


def test_a_model_unloaded_from_a_frozen_heap_is_still_freed(handler_file: str) -> None:
    # The server freezes its heap at start (gc.freeze); a model held in a reference cycle
    # must not stay behind for ever once it is unloaded.
    import gc
    import weakref

    endpoint = ModelEndpoint("m")
    first = runtime(handler_file)
    endpoint.load("1", first)
    handler = first.handler  # type: ignore[attr-defined]
    handler.own = handler  # the loaded model now lives in a reference cycle
    gone = weakref.ref(handler)
    del handler
    gc.collect()
    gc.freeze()
    try:
        endpoint.load("1", runtime(handler_file))  # a reload unloads the first copy
        gc.collect()  # a plain collection cannot see frozen objects: the unload did it
        assert gone() is None
    finally:
        gc.unfreeze()
