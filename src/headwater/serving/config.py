"""`ServerConfig`: what `headwater serve` was asked for, as plain data for its workers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from headwater.serving.source import ModelSource

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
#: The default limit on a request body: 32 MiB.
DEFAULT_MAX_BODY_BYTES = 32 * 2**20


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
    """

    sources: tuple[ModelSource, ...]
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    workers: int = 1
    token: str | None = field(default=None, repr=False)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES

    def to_json(self) -> dict[str, Any]:
        """The settings as JSON (the token included: keep the file private)."""
        return {
            "sources": [s.to_json() for s in self.sources],
            "host": self.host,
            "port": self.port,
            "workers": self.workers,
            "token": self.token,
            "max_body_bytes": self.max_body_bytes,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServerConfig:
        """The settings `to_json` wrote."""
        return cls(**{**data, "sources": tuple(ModelSource.from_json(s) for s in data["sources"])})
