"""`ServerConfig`: what `headwater serve` was asked for, as plain data for its workers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from headwater.serving.source import ModelSource

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
#: The default limit on a request body: 32 MiB.
DEFAULT_MAX_BODY_BYTES = 32 * 2**20
#: How long a batch waits for more requests when `max_latency_ms` is not given.
DEFAULT_MAX_LATENCY_MS = 5.0


@dataclass(frozen=True)
class Canary:
    """A second version of a served model taking a share of its traffic.

    Attributes:
        source: The canary version (its `name` is the endpoint's).
        percent: The share of requests, 0 to 100, sent to it.
    """

    source: ModelSource
    percent: float


@dataclass(frozen=True)
class Batching:
    """Adaptive batching of one model (MLServer's setting names).

    Attributes:
        max_batch_size: The most requests joined into one predict call (1: no batching).
        max_latency_ms: The longest a request waits for others to join its batch.
    """

    max_batch_size: int
    max_latency_ms: float = DEFAULT_MAX_LATENCY_MS


@dataclass(frozen=True)
class ServerConfig:
    """A model server's settings.

    Attributes:
        sources: The models, resolved (registry versions pinned, remote files downloaded),
            so every worker serves the same ones.
        host: The address to listen on (loopback unless a token is set).
        port: The TCP port (0: any free one).
        workers: Server processes, each loading every model (throughput scales with them).
        token: The bearer token every request must carry, or None.
        max_body_bytes: The largest request body taken.
        canaries: Second versions taking a share of their endpoint's traffic.
        batching: Adaptive batching by endpoint name (models not named are not batched).
        allowed_hosts: `Host` names answered to besides loopback's (`--allow-host`); on a
            non-loopback `host`, none means any (`headwater.security.hosts_for_bind`).
        grpc_port: Also serve the Open Inference Protocol over gRPC on this port (None: not).
    """

    sources: tuple[ModelSource, ...]
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    workers: int = 1
    token: str | None = field(default=None, repr=False)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    canaries: tuple[Canary, ...] = ()
    batching: dict[str, Batching] = field(default_factory=dict)
    allowed_hosts: tuple[str, ...] = ()
    grpc_port: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The settings as JSON (the token included: keep the file private)."""
        return {
            "sources": [s.to_json() for s in self.sources],
            "host": self.host,
            "port": self.port,
            "workers": self.workers,
            "token": self.token,
            "max_body_bytes": self.max_body_bytes,
            "canaries": [
                {"source": c.source.to_json(), "percent": c.percent} for c in self.canaries
            ],
            "batching": {
                name: {"max_batch_size": b.max_batch_size, "max_latency_ms": b.max_latency_ms}
                for name, b in self.batching.items()
            },
            "allowed_hosts": list(self.allowed_hosts),
            "grpc_port": self.grpc_port,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServerConfig:
        """The settings `to_json` wrote."""
        canaries = tuple(
            Canary(ModelSource.from_json(c["source"]), c["percent"])
            for c in data.get("canaries", ())
        )
        batching = {name: Batching(**b) for name, b in data.get("batching", {}).items()}
        sources = tuple(ModelSource.from_json(s) for s in data["sources"])
        hosts = tuple(data.get("allowed_hosts", ()))
        return cls(
            **{
                **data,
                "sources": sources,
                "canaries": canaries,
                "batching": batching,
                "allowed_hosts": hosts,
            }
        )
