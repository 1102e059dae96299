"""`BatchingPredictor`: adaptive batching, joining concurrent requests into one predict call.

Requests to one model version that arrive together wait at most `max_latency_ms` for each
other (MLServer's and BentoML's setting names); a batch closes early once it holds
`max_batch_size` requests. Their inputs are concatenated along the first (batch) axis, the
inner predictor is called once, and each request gets its own rows of every output back::

    predictor = BatchingPredictor(ThreadPredictor(), max_batch_size=32, max_latency_ms=5)
    endpoint = ModelEndpoint("churn", predictor=predictor)

Only requests that can be joined are: the same version, the same outputs asked for, the same
input names, datatypes and shapes past the first axis. Anything else (a scalar input, inputs
of unequal row counts) waits in its own batch or goes alone. If the joined call fails, or its
outputs do not have one row per input row, each request is run alone instead, so one bad
request never fails the others, and answers are never split wrongly. Batching is off unless
asked for: at low traffic every request would wait out the latency for company.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from headwater.errors import InvalidArgumentError
from headwater.serving.predictor import Predictor, Served, ThreadPredictor

if TYPE_CHECKING:
    from headwater.serving.runtimes.base import Explanation

#: Called with each batch's version and its number of requests (a metrics exporter).
BatchListener = Callable[["Served", int], None]


@dataclass
class _Batch:
    version: Served
    outputs: Sequence[str] | None
    requests: list[tuple[Mapping[str, np.ndarray], asyncio.Future[dict[str, np.ndarray]]]] = field(
        default_factory=list
    )
    timer: asyncio.TimerHandle | None = None


class BatchingPredictor(Predictor):
    """Joins concurrent requests into batches for `inner`; see the module docstring.

    Args:
        inner: The predictor each batch is handed to (default: a `ThreadPredictor`).
        max_batch_size: The most requests in one batch (1 turns batching off).
        max_latency_ms: The longest the first request of a batch waits for others.

    Raises:
        InvalidArgumentError: `max_batch_size` < 1 or `max_latency_ms` < 0.
    """

    def __init__(
        self,
        inner: Predictor | None = None,
        *,
        max_batch_size: int,
        max_latency_ms: float,
    ) -> None:
        if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int):
            raise InvalidArgumentError(f"max_batch_size must be an integer, got {max_batch_size!r}")
        if max_batch_size < 1:
            raise InvalidArgumentError(f"max_batch_size must be at least 1, got {max_batch_size}")
        if not max_latency_ms >= 0:
            raise InvalidArgumentError(f"max_latency_ms must be 0 or more, got {max_latency_ms}")
        self.inner = inner or ThreadPredictor()
        self.max_batch_size = max_batch_size
        self.max_latency_ms = float(max_latency_ms)
        self.listeners: list[BatchListener] = []
        self._open: dict[Hashable, _Batch] = {}
        self._running: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return (
            f"BatchingPredictor({self.inner!r}, max_batch_size={self.max_batch_size}, "
            f"max_latency_ms={self.max_latency_ms:g})"
        )

    async def predict(
        self,
        version: Served,
        inputs: Mapping[str, np.ndarray],
        *,
        outputs: Sequence[str] | None = None,
    ) -> dict[str, np.ndarray]:
        """This request's outputs, computed in a batch with whatever arrives with it."""
        key = _batch_key(version, inputs, outputs)
        if key is None or self.max_batch_size == 1:
            self._tell(version, 1)
            return await self.inner.predict(version, inputs, outputs=outputs)
        loop = asyncio.get_running_loop()
        batch = self._open.get(key)
        if batch is None:
            batch = self._open[key] = _Batch(version, outputs)
            batch.timer = loop.call_later(self.max_latency_ms / 1000, self._close, key, batch)
        answer: asyncio.Future[dict[str, np.ndarray]] = loop.create_future()
        batch.requests.append((inputs, answer))
        if len(batch.requests) >= self.max_batch_size:
            self._close(key, batch)
        return await answer

    async def explain(
        self, version: Served, inputs: Mapping[str, np.ndarray], *, options: Mapping[str, Any]
    ) -> Explanation:
        """Explanations are not batched: the inner predictor's."""
        return await self.inner.explain(version, inputs, options=options)

    def _close(self, key: Hashable, batch: _Batch) -> None:
        if self._open.get(key) is not batch:
            return  # closed already, when it filled up
        del self._open[key]
        if batch.timer is not None:
            batch.timer.cancel()
        task = asyncio.get_running_loop().create_task(self._run(batch))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, batch: _Batch) -> None:
        requests = [(x, f) for x, f in batch.requests if not f.done()]  # not cancelled
        if not requests:
            return
        self._tell(batch.version, len(requests))
        if len(requests) == 1:
            await self._alone(batch, *requests[0])
            return
        counts = [len(next(iter(x.values()))) for x, _ in requests]
        joined = {name: np.concatenate([x[name] for x, _ in requests]) for name in requests[0][0]}
        try:
            found = await self.inner.predict(batch.version, joined, outputs=batch.outputs)
            parts = _split(found, counts)
        except Exception:
            parts = None
        if parts is None:  # one request may have spoilt the batch: each on its own
            await asyncio.gather(*(self._alone(batch, x, f) for x, f in requests))
            return
        for (_, answer), part in zip(requests, parts, strict=True):
            if not answer.done():
                answer.set_result(part)

    async def _alone(
        self,
        batch: _Batch,
        inputs: Mapping[str, np.ndarray],
        answer: asyncio.Future[dict[str, np.ndarray]],
    ) -> None:
        try:
            found = await self.inner.predict(batch.version, inputs, outputs=batch.outputs)
        except Exception as exc:
            if not answer.done():
                answer.set_exception(exc)
            return
        if not answer.done():
            answer.set_result(found)

    def _tell(self, version: Served, size: int) -> None:
        for listener in self.listeners:
            listener(version, size)


def _batch_key(
    version: Served, inputs: Mapping[str, np.ndarray], outputs: Sequence[str] | None
) -> Hashable | None:
    """What requests must share to be joined; None if this one cannot be."""
    shapes = []
    rows = None
    for name in sorted(inputs):
        array = inputs[name]
        if not isinstance(array, np.ndarray) or array.ndim == 0:
            return None
        if rows is not None and array.shape[0] != rows:
            return None
        rows = array.shape[0]
        shapes.append((name, array.dtype.str, array.shape[1:]))
    if not rows:
        return None
    return (id(version), None if outputs is None else tuple(outputs), tuple(shapes))


def _split(found: Mapping[str, Any], counts: list[int]) -> list[dict[str, np.ndarray]] | None:
    """Each request's rows of every output; None if an output is not one row per input row."""
    total = sum(counts)
    cuts = np.cumsum(counts)[:-1]
    parts: list[dict[str, np.ndarray]] = [{} for _ in counts]
    for name, value in found.items():
        array = np.asarray(value)
        if array.ndim == 0 or array.shape[0] != total:
            return None
        for part, rows in zip(parts, np.split(array, cuts), strict=True):
            part[name] = rows
    return parts


__all__ = ["BatchListener", "BatchingPredictor"]
