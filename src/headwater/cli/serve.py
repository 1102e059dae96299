"""`headwater serve MODEL...`: serve models over KServe V1 and the V2 Open Inference Protocol.

MODEL is `[NAME=]TARGET`, TARGET a registry name (`NAME`, `NAME:VERSION`, `NAME@STAGE`), an
artifact URI, a model file or directory, or a handler class (`module:Class`,
`file.py:Class`); see `headwater.serving.resolve`. Bad input (a spec naming nothing, a
non-loopback --host without a token, a busy port) is one line on stderr and exit code 2.
The server libraries are imported only when the command runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from headwater.cli.listen import add_listen_options, listen_options, megabytes
from headwater.errors import InvalidArgumentError
from headwater.serving.config import DEFAULT_MAX_LATENCY_MS

if TYPE_CHECKING:
    from headwater.serving.config import Batching, Canary


def add_parsers(sub: Any, parser_class: type[argparse.ArgumentParser]) -> None:
    """Register `serve` on the CLI's subparsers."""
    serve = sub.add_parser(
        "serve",
        help="serve models over KServe V1 and V2 (Open Inference Protocol) REST",
        description="Serve models over KServe V1 (/v1/models/NAME:predict, :explain) and "
        "the V2 Open Inference Protocol (/v2/models/NAME/infer).",
    )
    serve.add_argument(
        "models",
        nargs="+",
        metavar="MODEL",
        help="[NAME=]MODEL: a registered model (NAME, NAME:VERSION, NAME@production), an "
        "artifact URI, a model file or directory, or a handler (module:Class, file.py:Class)",
    )
    add_listen_options(serve, port=8080, token_help="require 'Authorization: Bearer T'")
    serve.add_argument(
        "--workers", type=int, default=1, metavar="N", help="server processes (default 1)"
    )
    serve.add_argument(
        "--max-body-mb",
        type=float,
        default=32.0,
        metavar="M",
        help="largest request body in MiB (default 32); larger ones get 413",
    )
    serve.add_argument(
        "--grpc-port",
        type=int,
        metavar="P",
        help="also serve the Open Inference Protocol over gRPC on port P (KServe's and "
        "Triton's gRPC clients; same host, token and models)",
    )
    serve.add_argument(
        "--canary",
        action="append",
        default=[],
        metavar="MODEL=PERCENT",
        help="also serve MODEL (another version of a served model, e.g. churn:4) and send it "
        "PERCENT%% of that model's requests; change it later with POST "
        "/admin/models/NAME/traffic (repeatable)",
    )
    serve.add_argument(
        "--max-batch-size",
        action="append",
        default=[],
        metavar="[NAME=]N",
        help="adaptive batching: join up to N concurrent requests into one predict call, for "
        "every model or for model NAME (repeatable; default 1: off)",
    )
    serve.add_argument(
        "--max-latency-ms",
        action="append",
        default=[],
        metavar="[NAME=]MS",
        help=f"adaptive batching: the longest a request waits for its batch to fill (default "
        f"{DEFAULT_MAX_LATENCY_MS:g}), for every model or for model NAME (repeatable)",
    )


def cmd_serve(args: argparse.Namespace) -> int:
    """`headwater serve`: resolve the models, then serve until interrupted."""
    from headwater.serving._deps import require_serve

    require_serve()
    from headwater.serving.config import ServerConfig
    from headwater.serving.resolve import resolve_all
    from headwater.serving.server import serve

    listen = listen_options(args)  # a bad name is refused before models load
    if args.workers < 1:
        raise InvalidArgumentError(f"--workers must be at least 1, got {args.workers}")
    max_body = megabytes(args.max_body_mb, "--max-body-mb")
    if args.grpc_port is not None and not 1 <= args.grpc_port <= 65535:
        raise InvalidArgumentError(f"--grpc-port must be from 1 to 65535, got {args.grpc_port}")
    if args.grpc_port is not None and args.grpc_port == args.port:
        raise InvalidArgumentError(f"--grpc-port {args.grpc_port} is --port too: choose another")
    if args.grpc_port is not None:
        from headwater.serving._deps import require_grpc

        require_grpc()
    sources = resolve_all(args.models, metadata=args.metadata_url)
    canaries = tuple(_canary(spec, args.metadata_url) for spec in args.canary)
    batching = _batching(args.max_batch_size, args.max_latency_ms, [s.name for s in sources])
    config = ServerConfig(
        sources=tuple(sources),
        host=args.host,
        port=args.port,
        workers=args.workers,
        token=listen.token,
        max_body_bytes=max_body,
        canaries=canaries,
        batching=batching,
        allowed_hosts=tuple(args.allow_host),
        grpc_port=args.grpc_port,
    )
    serve(config, announce=lambda line: print(f"headwater: {line}", file=sys.stderr, flush=True))
    return 0


def _canary(spec: str, metadata: Any) -> Canary:
    """`MODEL=PERCENT` -> the canary's resolved source and share."""
    from headwater.serving.config import Canary
    from headwater.serving.resolve import resolve

    model, equals, percent = spec.rpartition("=")
    try:
        share = float(percent)
    except ValueError:
        share = -1.0
    if not equals or not model or not 0 <= share <= 100:
        raise InvalidArgumentError(
            f"--canary must be MODEL=PERCENT with PERCENT from 0 to 100 (e.g. churn:4=10), "
            f"got {spec!r}"
        )
    return Canary(resolve(model, metadata=metadata), share)


def _batching(sizes: list[str], latencies: list[str], served: list[str]) -> dict[str, Batching]:
    """`--max-batch-size`/`--max-latency-ms` values (`N` for all models, `NAME=N` for one)
    -> batching per endpoint name; models whose size is 1 are left out (not batched)."""
    from headwater.serving.config import Batching

    size = _per_model("--max-batch-size", sizes, served, int)
    latency = _per_model("--max-latency-ms", latencies, served, float)
    found: dict[str, Batching] = {}
    for name in dict.fromkeys(served):
        n = int(size.get(name, size.get("", 1)))
        ms = latency.get(name, latency.get("", DEFAULT_MAX_LATENCY_MS))
        if n < 1:
            raise InvalidArgumentError(f"--max-batch-size must be at least 1, got {n}")
        if not ms >= 0:
            raise InvalidArgumentError(f"--max-latency-ms must be 0 or more, got {ms:g}")
        if n > 1:
            found[name] = Batching(max_batch_size=n, max_latency_ms=float(ms))
    return found


def _per_model(
    option: str, values: list[str], served: list[str], kind: type[float]
) -> dict[str, float]:
    """`{"": all models' value, NAME: that model's}` from `[NAME=]VALUE` strings."""
    found: dict[str, float] = {}
    for value in values:
        name, _, number = value.rpartition("=")
        if name and name not in served:
            raise InvalidArgumentError(
                f"{option} {value!r} names model {name!r}, which is not served "
                f"(models: {', '.join(dict.fromkeys(served))})"
            )
        try:
            found[name] = kind(number)
        except ValueError as exc:
            raise InvalidArgumentError(
                f"{option} must be [NAME=]{kind.__name__.upper()}, got {value!r}"
            ) from exc
    return found
