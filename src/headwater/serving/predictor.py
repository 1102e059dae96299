"""`Predictor`: how a request's tensors reach a model version's runtime; the seam for batching.

The server never calls a runtime itself: it awaits `version.predictor.predict(version, inputs,
outputs=...)`. The default, `ThreadPredictor`, runs each call on a worker thread so the event
loop (and health checks) never wait on a model: one hop to a thread and one back per call,
through a thread pool of its own (`run_off_loop`) rather than anyio's general one, whose
bookkeeping per call cost as much as the hop itself. A batcher is a `Predictor` that wraps another:
it queues concurrent calls for one version, concatenates their inputs along the first axis,
makes one call to the inner predictor and splits the outputs back by row counts::

    class BatchingPredictor(Predictor):
        def __init__(self, inner: Predictor, max_batch_size: int, max_latency_ms: float): ...

        async def predict(self, version, inputs, *, outputs=None):
            ...  # enqueue, await the batch's future, return this request's rows

    endpoint.load("3", runtime, predictor=BatchingPredictor(ThreadPredictor(), 32, 5))

Explanations are not batched: `explain` of the default runs on a worker thread too.
"""

from __future__ import annotations

import abc
import asyncio
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import numpy as np

    from headwater.serving.endpoint import ModelVersion
    from headwater.serving.runtimes.base import Explanation

T = TypeVar("T")
#: Threads of the prediction pool: as `concurrent.futures` sizes a pool by default. More
#: threads than cores only make the event loop wait longer for the GIL.
POOL_THREADS = min(32, (os.cpu_count() or 1) + 4)
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def prediction_pool() -> ThreadPoolExecutor:
    """The process's thread pool for model calls, started on first use."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="headwater-predict")
    return _pool


async def run_off_loop(call: Callable[[], T]) -> T:
    """`call()` on the prediction pool, awaited on the running asyncio loop.

    Cancelling the awaiting task does not abandon the call: the task waits until the call
    has returned, then is cancelled, so a model version is never released (and perhaps
    unloaded) while a thread still runs it. This is what anyio's `to_thread.run_sync` does.
    """
    future = asyncio.get_running_loop().run_in_executor(prediction_pool(), call)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        while not future.done():
            try:
                await asyncio.shield(future)
            except asyncio.CancelledError:
                continue
        raise


class Predictor(abc.ABC):
    """Calls a version's runtime for a request; see the module docstring."""

    @abc.abstractmethod
    async def predict(
        self,
        version: ModelVersion,
        inputs: Mapping[str, np.ndarray],
        *,
        outputs: Sequence[str] | None = None,
    ) -> dict[str, np.ndarray]:
        """`version.runtime.predict(inputs, outputs=outputs)`, off the event loop."""

    async def explain(
        self, version: ModelVersion, inputs: Mapping[str, np.ndarray], *, options: Mapping[str, Any]
    ) -> Explanation:
        """`version.runtime.explain(inputs, options=options)` on a worker thread."""

        def call() -> Explanation:
            return version.runtime.explain(inputs, options=options)

        return await run_off_loop(call)


class ThreadPredictor(Predictor):
    """Each call on a thread of the prediction pool (one request, one runtime call)."""

    async def predict(
        self,
        version: ModelVersion,
        inputs: Mapping[str, np.ndarray],
        *,
        outputs: Sequence[str] | None = None,
    ) -> dict[str, np.ndarray]:
        """The runtime's outputs for `inputs`, computed on a worker thread."""

        def call() -> dict[str, np.ndarray]:
            return version.runtime.predict(inputs, outputs=outputs)

        return await run_off_loop(call)

    def __repr__(self) -> str:
        return "ThreadPredictor()"
