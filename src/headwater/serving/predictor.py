"""`Predictor`: how a request's tensors reach a model version's runtime; the seam for batching.

The server never calls a runtime itself: it awaits `version.predictor.predict(version, inputs,
outputs=...)`. The default, `ThreadPredictor`, runs each call on a worker thread so the event
loop (and health checks) never wait on a model. A batcher is a `Predictor` that wraps another:
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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio.to_thread

if TYPE_CHECKING:
    import numpy as np

    from headwater.serving.endpoint import ModelVersion
    from headwater.serving.runtimes.base import Explanation


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

        return await anyio.to_thread.run_sync(call)


class ThreadPredictor(Predictor):
    """Each call on a worker thread of anyio's pool (one request, one runtime call)."""

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

        return await anyio.to_thread.run_sync(call)

    def __repr__(self) -> str:
        return "ThreadPredictor()"
