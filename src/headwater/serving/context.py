"""`ServingContext`: what every route handler shares, and the call path of one prediction.

The app keeps one context (`app.state.headwater`). A handler resolves the endpoint, holds a
version for the request (`ModelEndpoint.serving`), notes it (`mark`), and calls the model
through `predict`/`explain`, which go through the version's `Predictor` (the batching seam),
time each stage for the hooks, and turn what a model raises on its input into a 400.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio.to_thread
import numpy as np
from starlette.requests import Request

from headwater.errors import UserError
from headwater.serving.endpoint import ModelVersion
from headwater.serving.errors import InvalidInputError, ProtocolError
from headwater.serving.observe import SERVED, Served, ServingHooks, logger
from headwater.serving.repository import ModelRepository
from headwater.serving.runtimes.base import Explanation
from headwater.serving.wire import header

T = TypeVar("T")
#: What a model may raise on an input it cannot take; answered 400 with its message.
MODEL_INPUT_ERRORS = (ValueError, TypeError, RuntimeError, IndexError, KeyError)


@dataclass
class ServingContext:
    """The repository, hooks and limits of one app.

    Attributes:
        repository: The endpoints served.
        hooks: Called after each request and stage (metrics).
        max_body_bytes: The largest request body taken (413 beyond).
    """

    repository: ModelRepository
    hooks: Sequence[ServingHooks] = field(default_factory=tuple)
    max_body_bytes: int = 32 * 2**20

    @staticmethod
    def of(request: Request) -> ServingContext:
        """The context of the app serving `request`."""
        found: ServingContext = request.app.state.headwater
        return found

    @staticmethod
    def mark(
        request: Request, endpoint: str, version: str | None, protocol: str, verb: str
    ) -> None:
        """Note what serves `request` (for the version header and the hooks)."""
        request.scope.setdefault("state", {})[SERVED] = Served(endpoint, version, protocol, verb)

    async def predict(
        self,
        version: ModelVersion,
        inputs: Mapping[str, np.ndarray],
        outputs: Sequence[str] | None,
    ) -> dict[str, np.ndarray]:
        """The version's outputs for `inputs`, through its predictor.

        Raises:
            InvalidInputError: The model rejected the input, or did not give an output asked for.
        """
        started = time.perf_counter()
        try:
            found = await version.predictor.predict(version, inputs, outputs=outputs)
        except (ProtocolError, UserError):
            raise
        except MODEL_INPUT_ERRORS as exc:
            raise _rejected(version, exc) from exc
        finally:
            self.stage(version, "predict", started)
        missing = [o for o in outputs or () if o not in found]
        if missing:
            raise InvalidInputError(
                f"model {version.endpoint!r} version {version.version} gave no output "
                f"{', '.join(repr(m) for m in missing)} (it gave: {', '.join(found)})"
            )
        return found

    async def explain(
        self, version: ModelVersion, inputs: Mapping[str, np.ndarray], options: Mapping[str, Any]
    ) -> Explanation:
        """The version's explanation of `inputs`, through its predictor.

        Raises:
            InvalidInputError: The model rejected the input or the options.
            NotSupportedError: The model has no explainer.
        """
        started = time.perf_counter()
        try:
            return await version.predictor.explain(version, inputs, options=options)
        except (ProtocolError, UserError):
            raise
        except MODEL_INPUT_ERRORS as exc:
            raise _rejected(version, exc) from exc
        finally:
            self.stage(version, "explain", started)

    async def run_stage(
        self, version: ModelVersion, stage: str, work: Callable[[], T], *, offload: bool
    ) -> T:
        """`work()` timed as `stage`; on a worker thread when `offload` (large payloads), so
        decoding a big request does not hold up the event loop."""
        started = time.perf_counter()
        try:
            return await anyio.to_thread.run_sync(work) if offload else work()
        finally:
            self.stage(version, stage, started)

    def stage(self, version: ModelVersion, stage: str, started: float) -> None:
        """Tell the hooks that `stage` of a request to `version` took since `started`."""
        if not self.hooks:
            return
        took = time.perf_counter() - started
        for hook in self.hooks:
            try:
                hook.after_stage(
                    endpoint=version.endpoint,
                    version=version.version,
                    stage=stage,
                    duration_s=took,
                )
            except Exception:  # a broken exporter must not fail the request it measures
                logger.exception("serving hook %r failed in after_stage", hook)


def request_key(request: Request) -> str | None:
    """The key a traffic policy may route by to keep a client on one version."""
    return header(request, b"x-request-id")


def _rejected(version: ModelVersion, exc: BaseException) -> InvalidInputError:
    said = (str(exc).strip().splitlines() or [""])[0][:500]
    return InvalidInputError(
        f"model {version.endpoint!r} version {version.version} rejected the input: "
        f"{type(exc).__name__}: {said}".rstrip(": ")
    )
