"""How an endpoint's server runs: the one list of `deploy_model`'s server settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from headwater.api._args import count
from headwater.errors import InvalidArgumentError


@dataclass(frozen=True)
class DeploySettings:
    """How an endpoint's server runs, recorded as the endpoint's `config`.

    `deploy_model(model, **settings)` takes these as keywords; deploying to a running
    endpoint with other settings restarts its server (see `headwater.endpoints.supervisor`).
    A new setting is a field here, a flag in `serve_args` and, for pipelines, a parameter
    of the `deploy_model` component.

    Attributes:
        host: Address to listen on; a non-loopback one needs `HEADWATER_TOKEN` set (which
            the server then requires of every request).
        port: TCP port; 0 keeps a running server's port, or picks a free one.
        workers: Server processes (an update without a restart needs 1).
        max_batch_size: Adaptive batching's largest batch (1: off).
        max_latency_ms: Adaptive batching's longest wait for a batch to fill.
        grpc_port: Also serve the inference protocol over gRPC on this port (None: not;
            needs the `grpc` extra).
    """

    host: str = "127.0.0.1"
    port: int = 0
    workers: int = 1
    max_batch_size: int = 1
    max_latency_ms: float = 5.0
    grpc_port: int | None = None

    @classmethod
    def of(cls, given: Mapping[str, Any], *, caller: str) -> DeploySettings:
        """The settings `given` as keywords to `caller`, unchecked (see `check`).

        Raises:
            TypeError: A keyword that is not a setting, as Python says it of a function.
        """
        known = [f.name for f in fields(cls)]
        unknown = [key for key in given if key not in known]
        if unknown:
            raise TypeError(
                f"{caller}() got an unexpected keyword argument {unknown[0]!r} "
                f"(server settings: {', '.join(known)})"
            )
        return cls(**given)

    def check(self) -> None:
        """Raise InvalidArgumentError for a bad port, workers or batching setting."""
        if count("port", self.port, minimum=0) > 65535:
            raise InvalidArgumentError(f"port must be from 0 to 65535, got {self.port}")
        count("workers", self.workers, minimum=1)
        count("max_batch_size", self.max_batch_size, minimum=1)
        latency = self.max_latency_ms
        if isinstance(latency, bool) or not isinstance(latency, int | float) or not latency >= 0:
            raise InvalidArgumentError(f"max_latency_ms must be 0 or more, got {latency!r}")
        if self.grpc_port is not None:
            if count("grpc_port", self.grpc_port, minimum=1) > 65535:
                raise InvalidArgumentError(
                    f"grpc_port must be from 1 to 65535, got {self.grpc_port}"
                )
            if self.grpc_port == self.port:
                raise InvalidArgumentError(
                    f"grpc_port {self.grpc_port} is port too: choose another"
                )

    def to_config(self) -> dict[str, Any]:
        """The settings as the endpoint's record keeps them (`EndpointRecord.config`)."""
        return asdict(self)

    def serve_args(self) -> list[str]:
        """The `headwater serve` options that run a server with these settings."""
        args = ["--host", str(self.host), "--port", str(self.port), "--workers", str(self.workers)]
        if int(self.max_batch_size) > 1:
            args += [
                "--max-batch-size", str(self.max_batch_size),
                "--max-latency-ms", str(self.max_latency_ms),
            ]  # fmt: skip
        if self.grpc_port is not None:
            args += ["--grpc-port", str(self.grpc_port)]
        return args
