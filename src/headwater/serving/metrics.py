"""Prometheus metrics for the model server, at `GET /metrics`, through prometheus-client.

`PrometheusHooks` is a `ServingHooks` exporter writing into its own `CollectorRegistry` (not
the process-global one, so several apps in one process, tests among them, never clash).
The stage histograms carry KServe's names, so its dashboards carry over; the rest are ours:

    request_preprocess_seconds{model_name, model_version}     decoding and checking tensors
    request_predict_seconds{model_name, model_version}        the model call, batching wait included
    request_postprocess_seconds{model_name, model_version}    encoding the answer
    request_explain_seconds{model_name, model_version}        explanations
    headwater_requests_total{model_name, model_version, protocol, status}
    headwater_request_duration_seconds{model_name, protocol}  arrival to end of response
    headwater_batch_size{model_name, model_version}           requests per predict call (batching)
    headwater_models_loaded{model_name}                       versions loaded, read at scrape time
    headwater_model_traffic_percent{model_name, model_version} the traffic split, likewise

Requests about no model (health, `/metrics`, unknown routes), and requests naming a model
that is not served (an admin load that failed, a made-up name), have empty model labels:
label values come only from models that exist, so the series stay as few as they are. Each
worker process of `--workers N` keeps its own counts, and a scrape reaches one worker:
prometheus-client's multiprocess mode is not used (run one worker per scrape target, or sum
what you can see).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from headwater._deps import require
from headwater.serving.batching import BatchingPredictor
from headwater.serving.observe import STAGES, ServingHooks

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from headwater.serving.predictor import Served
    from headwater.serving.repository import ModelRepository

#: Latency buckets (seconds): 0.5 ms to 10 s, dense where a tabular model answers.
LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0,
)  # fmt: skip
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class PrometheusHooks(ServingHooks):
    """Counts requests and times stages into `registry`; see the module docstring.

    Args:
        repository: The served endpoints, read at scrape time (models loaded, traffic) and
            searched for batching predictors to report batch sizes.

    Raises:
        MissingDependencyError: prometheus-client is not installed.
    """

    def __init__(self, repository: ModelRepository) -> None:
        require("prometheus_client", "serve", "The server's metrics", package="prometheus-client")
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.repository = repository
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ["model_name", "model_version"]
        self.requests = Counter(
            "headwater_requests",
            "Requests answered, by model, version, protocol and HTTP status.",
            [*labels, "protocol", "status"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "headwater_request_duration_seconds",
            "Seconds from a request's arrival to the end of its response.",
            ["model_name", "protocol"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.stages = {
            stage: Histogram(
                f"request_{stage}_seconds",
                f"Seconds spent in the {stage} stage of a request (KServe's name).",
                labels,
                buckets=LATENCY_BUCKETS,
                registry=self.registry,
            )
            for stage in STAGES
        }
        self.batch_size = Histogram(
            "headwater_batch_size",
            "Requests joined into each predict call by adaptive batching.",
            labels,
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_RepositoryCollector(repository))
        # The labelled children by label values: `labels()` costs more than the observation
        # (it checks and joins the values under a lock), and the label sets repeat.
        self._counted: dict[tuple[str, str, str, int], Any] = {}
        self._timed: dict[tuple[str, str], Any] = {}
        self._staged: dict[tuple[str, str, str], Any] = {}
        self.watch_batches()

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
        """Count the request and time it."""
        if endpoint is None or endpoint not in self.repository:
            endpoint = version = None  # a name anyone can make up is not a label value
        model, protocol = endpoint or "", protocol or ""
        counted = self._counted.get((model, version or "", protocol, status))
        if counted is None:
            counted = self.requests.labels(model, version or "", protocol, str(status))
            self._counted[(model, version or "", protocol, status)] = counted
        counted.inc()
        timed = self._timed.get((model, protocol))
        if timed is None:
            timed = self._timed[(model, protocol)] = self.duration.labels(model, protocol)
        timed.observe(duration_s)

    def after_stage(self, *, endpoint: str, version: str, stage: str, duration_s: float) -> None:
        """Time the stage under KServe's name for it."""
        staged = self._staged.get((stage, endpoint, version))
        if staged is None:
            histogram = self.stages.get(stage)
            if histogram is None:
                return
            staged = self._staged[(stage, endpoint, version)] = histogram.labels(endpoint, version)
        staged.observe(duration_s)

    def watch_batches(self) -> None:
        """Report the batch sizes of every batching predictor the endpoints use now."""
        for endpoint in self.repository:
            predictors = [endpoint.predictor] + [
                v.predictor for v in endpoint.state.versions.values()
            ]
            for predictor in predictors:
                if (
                    isinstance(predictor, BatchingPredictor)
                    and self._on_batch not in predictor.listeners
                ):
                    predictor.listeners.append(self._on_batch)

    def _on_batch(self, version: Served, size: int) -> None:
        self.batch_size.labels(version.endpoint, version.version).observe(size)

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


class _RepositoryCollector:
    """Gauges read from the repository at scrape time: versions loaded, traffic split."""

    def __init__(self, repository: ModelRepository) -> None:
        self.repository = repository

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        from headwater.serving.traffic import describe

        loaded = GaugeMetricFamily(
            "headwater_models_loaded", "Versions of each model loaded.", labels=["model_name"]
        )
        split = GaugeMetricFamily(
            "headwater_model_traffic_percent",
            "Share of a model's requests (naming no version) sent to each version.",
            labels=["model_name", "model_version"],
        )
        for endpoint in self.repository:
            shown = describe(endpoint)
            loaded.add_metric([endpoint.name], len(shown["versions"]))
            for version, percent in shown["traffic"].items():
                split.add_metric([endpoint.name, version], percent)
        yield loaded
        yield split


def metrics_router(hooks: PrometheusHooks) -> APIRouter:
    """`GET /metrics`: `hooks`' registry in Prometheus' text format."""
    from prometheus_client import CONTENT_TYPE_LATEST

    router = APIRouter()

    @router.get("/metrics")
    async def metrics(request: Request) -> Response:
        """The server's metrics."""
        return Response(hooks.exposition(), media_type=CONTENT_TYPE_LATEST)

    return router


__all__ = ["PrometheusHooks", "metrics_router"]
