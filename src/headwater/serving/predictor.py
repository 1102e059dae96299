"""`Predictor`: how a request's tensors reach a model version's runtime; the seam for batching.

The server never calls a runtime itself: it awaits `version.predictor.predict(version, inputs,
outputs=...)`. The default, `ThreadPredictor`, runs each call on a worker thread so the event
loop (and health checks) never wait on a model: one hop to a thread and one back per call,
through a pool of one thread per core (`run_off_loop`) rather than anyio's general one, whose
bookkeeping per call cost as much as the hop itself. A batcher is a `Predictor` that wraps another:
it queues concurrent calls for one version, concatenates their inputs along the first axis,
makes one call to the inner predictor and splits the outputs back by row counts::

    class BatchingPredictor(Predictor):
        def __init__(self, inner: Predictor, max_batch_size: int, max_latency_ms: float): ...

        async def predict(self, version, inputs, *, outputs=None):
            ...  # enqueue, await the batch's future, return this request's rows

    endpoint.load("3", runtime, predictor=BatchingPredictor(ThreadPredictor(), 32, 5))

Explanations are not batched: `explain` of the default runs on a thread of anyio's pool, so
slow explanations never hold up the prediction pool.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio.to_thread

if TYPE_CHECKING:
    import numpy as np

    from headwater.serving.runtimes.base import Explanation, ModelRuntime

T = TypeVar("T")


class Served(Protocol):
    """What a predictor (and a batch listener) reads of a loaded model version:
    `endpoint.ModelVersion` is one."""

    endpoint: str
    version: str
    runtime: ModelRuntime


#: Threads of the prediction pool at most: one per core, so model calls that release the GIL
#: use every core; more threads only queue for the GIL, and the event loop with them (16
#: clients on 2 cores: p99 18-27 ms with 2 threads, 21-37 ms with 6).
POOL_THREADS = os.cpu_count() or 1


class _PredictionPool:
    """Threads taking `(loop, future, context, call)` jobs from one queue, started as jobs
    find no idle thread, up to `size`. Leaner than `ThreadPoolExecutor` + `wrap_future`
    (no concurrent future, no chained callbacks): a job is one queue put, its answer one
    `call_soon_threadsafe`."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, job: _Job) -> None:
        self._jobs.put(job)
        with self._lock:
            if self._idle:
                self._idle -= 1  # an idle thread will take it
                return
            if len(self._threads) >= self.size:
                return  # the next thread to finish takes it
            thread = threading.Thread(
                target=self._work, name=f"headwater-predict-{len(self._threads)}", daemon=True
            )
            self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        while True:
            loop, future, context, call = self._jobs.get()
            try:
                result, error = context.run(call), None
            except BaseException as exc:  # handed to the awaiting task, as a pool would
                result, error = None, exc
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting
                loop.call_soon_threadsafe(_settle, future, result, error)
            del loop, future, context, call, result, error
            with self._lock:
                self._idle += 1


_Job = tuple[
    asyncio.AbstractEventLoop, "asyncio.Future[Any]", contextvars.Context, Callable[[], Any]
]
_pool = _PredictionPool(POOL_THREADS)


def _new_pool_after_fork() -> None:
    global _pool
    _pool = _PredictionPool(POOL_THREADS)  # a forked child has none of the parent's threads


os.register_at_fork(after_in_child=_new_pool_after_fork)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is None:
        future.set_result(result)
    elif isinstance(error, StopIteration):  # a future cannot hold one
        future.set_exception(RuntimeError(f"the model call raised StopIteration: {error}"))
    else:
        future.set_exception(error)


async def run_off_loop(call: Callable[[], T]) -> T:
    """`call()` on the prediction pool (in a copy of the caller's context), awaited on the
    running asyncio loop.

    Cancelling the awaiting task does not abandon the call: the task waits until the call
    has returned, then is cancelled, so a model version is never released (and perhaps
    unloaded) while a thread still runs it. This is what anyio's `to_thread.run_sync` does.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    _pool.submit((loop, future, contextvars.copy_context(), call))
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
        version: Served,
        inputs: Mapping[str, np.ndarray],
        *,
        outputs: Sequence[str] | None = None,
    ) -> dict[str, np.ndarray]:
        """`version.runtime.predict(inputs, outputs=outputs)`, off the event loop."""

    async def explain(
        self, version: Served, inputs: Mapping[str, np.ndarray], *, options: Mapping[str, Any]
    ) -> Explanation:
        """`version.runtime.explain(inputs, options=options)` on a thread of anyio's pool."""

        def call() -> Explanation:
            return version.runtime.explain(inputs, options=options)

        return await anyio.to_thread.run_sync(call)


class ThreadPredictor(Predictor):
    """Each call on a thread of the prediction pool (one request, one runtime call)."""

    async def predict(
        self,
        version: Served,
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
