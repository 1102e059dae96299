"""Watching requests: the hooks a metrics exporter implements, and the middleware calling them.

`ObserveRequests` wraps the whole app. For every HTTP request it measures the time to the
end of the response, notes the status, adds the header naming the model version that served
it (`x-headwater-model-version`, on errors too once a version was chosen), turns an
unexpected exception into a JSON 500 (never a bare one) and then calls each hook's
`after_request`. Route handlers call `ServingHooks.after_stage` through `ServingContext` for
each stage of a prediction. Hooks run on the event loop: keep them cheap (a Prometheus
counter is). To export metrics, subclass `ServingHooks`::

    class PrometheusHooks(ServingHooks):
        def after_request(self, *, endpoint, version, protocol, verb, status, duration_s):
            REQUESTS.labels(endpoint or "", version or "", protocol or "", str(status)).inc()

        def after_stage(self, *, endpoint, version, stage, duration_s):
            STAGE_SECONDS[stage].labels(endpoint, version).observe(duration_s)

    create_app(repository, hooks=[PrometheusHooks()])
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from headwater.serving.errors import ProtocolError
from headwater.serving.wire import VERSION_HEADER, error_response

logger = logging.getLogger("headwater.serving")

#: The key in the request's `scope["state"]` under which a handler notes what served it.
SERVED = "headwater_served"
#: Stage names, as KServe's metrics name them (`request_<stage>_seconds`).
STAGES = ("preprocess", "predict", "postprocess", "explain")


@dataclass(frozen=True)
class Served:
    """What a handler notes about its request: the endpoint, the version and the verb."""

    endpoint: str
    version: str | None
    protocol: str
    verb: str


class ServingHooks:
    """Phase hooks of the server; every one is a no-op here. Subclass to record metrics.

    Hooks take keyword arguments only, so new ones can be added without breaking yours.
    """

    def after_request(
        self,
        *,
        endpoint: str | None,
        version: str | None,
        protocol: str | None,
        verb: str | None,
        status: int,
        duration_s: float,
    ) -> None:
        """A request has been answered.

        Args:
            endpoint: The model's endpoint name; None for routes about no model (`/v2`,
                health, unknown routes, refused tokens).
            version: The version that served it; None if none was chosen.
            protocol: "v1" or "v2"; None as for `endpoint`.
            verb: "predict", "explain", "infer", "metadata", "ready", ...; None likewise.
            status: The HTTP status sent.
            duration_s: Seconds from the request's arrival to the end of the response.
        """

    def after_stage(self, *, endpoint: str, version: str, stage: str, duration_s: float) -> None:
        """One stage of a prediction is done: "preprocess" (decoding and checking the
        tensors), "predict" (the runtime call, batching included), "postprocess" (encoding
        the answer) or "explain"."""


class ObserveRequests:
    """ASGI middleware: times, labels and guards every HTTP request (see the module)."""

    def __init__(self, app: ASGIApp, hooks: Sequence[ServingHooks] = ()) -> None:
        self.app = app
        self.hooks = tuple(hooks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        state: dict[str, Any] = scope.setdefault("state", {})
        status = 500
        response_started = False

        async def sending(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status = message["status"]
                response_started = True
                served = state.get(SERVED)
                if served is not None and served.version is not None:
                    headers = list(message.get("headers", []))
                    headers.append((VERSION_HEADER.encode(), served.version.encode()))
                    message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            logger.exception("internal error on %s %s", scope.get("method"), scope.get("path"))
            if response_started:
                raise
            error = ProtocolError(f"internal error: {type(exc).__name__}: {exc}".splitlines()[0])
            await error_response(error)(scope, receive, sending)
        finally:
            if self.hooks:
                self._after(state.get(SERVED), status, time.perf_counter() - started)

    def _after(self, served: Served | None, status: int, duration_s: float) -> None:
        for hook in self.hooks:
            try:
                hook.after_request(
                    endpoint=served.endpoint if served else None,
                    version=served.version if served else None,
                    protocol=served.protocol if served else None,
                    verb=served.verb if served else None,
                    status=status,
                    duration_s=duration_s,
                )
            except Exception:
                logger.exception("serving hook %r failed in after_request", hook)
