"""The libraries the model server needs, or an error naming the `serve` (or `grpc`) extra."""

from __future__ import annotations

from headwater._deps import require_installed

#: What `pip install 'headwater[serve]'` brings, by import name.
SERVE_MODULES = ("fastapi", "uvicorn", "numpy", "prometheus_client")


def require_serve() -> None:
    """Check that the server's libraries are installed, before anything imports them.

    Raises:
        MissingDependencyError: One is missing; the message names it and the extra.
    """
    require_installed(SERVE_MODULES, "serve", "The model server")


#: What `pip install 'headwater[grpc]'` adds for `--grpc-port`, by import name.
GRPC_MODULES = ("grpc", "tritonclient.grpc")


def require_grpc() -> None:
    """Check that the gRPC protocol's libraries are installed (`headwater serve --grpc-port`).

    Raises:
        MissingDependencyError: One is missing; the message names it and the extra.
    """
    require_installed(GRPC_MODULES, "grpc", "The inference protocol over gRPC")
