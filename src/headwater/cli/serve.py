"""`headwater serve MODEL...`: serve models over KServe V1 and the V2 Open Inference Protocol.

MODEL is `[NAME=]TARGET`, TARGET a registry name (`NAME`, `NAME:VERSION`, `NAME@STAGE`), an
artifact URI, a model file or directory, or a handler class (`module:Class`,
`file.py:Class`); see `headwater.serving.resolve`. Bad input (a spec naming nothing, a
non-loopback --host without a token, a busy port) is one line on stderr and exit code 2.
The server libraries are imported only when the command runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from headwater.errors import InvalidArgumentError

#: Where the token is read from when --token is not given (`ps` shows command lines).
TOKEN_ENV = "HEADWATER_TOKEN"


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
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    serve.add_argument("--port", type=int, default=8080, help="TCP port (default 8080; 0: any)")
    serve.add_argument(
        "--workers", type=int, default=1, metavar="N", help="server processes (default 1)"
    )
    serve.add_argument(
        "--token",
        metavar="T",
        help=f"require 'Authorization: Bearer T' (default ${TOKEN_ENV}); needed for a "
        "non-loopback --host",
    )
    serve.add_argument(
        "--max-body-mb",
        type=float,
        default=32.0,
        metavar="M",
        help="largest request body in MiB (default 32); larger ones get 413",
    )


def cmd_serve(args: argparse.Namespace) -> int:
    """`headwater serve`: resolve the models, then serve until interrupted."""
    from headwater.serving._deps import require_serve

    require_serve()
    from headwater.serving.config import ServerConfig
    from headwater.serving.resolve import resolve_all
    from headwater.serving.security import check_bind
    from headwater.serving.server import serve

    token = args.token or os.environ.get(TOKEN_ENV) or None
    check_bind(args.host, token)
    if not 0 <= args.port <= 65535:
        raise InvalidArgumentError(f"--port must be from 0 to 65535, got {args.port}")
    if args.workers < 1:
        raise InvalidArgumentError(f"--workers must be at least 1, got {args.workers}")
    if not args.max_body_mb > 0:
        raise InvalidArgumentError(f"--max-body-mb must be positive, got {args.max_body_mb}")
    sources = resolve_all(args.models, metadata=args.metadata_url)
    config = ServerConfig(
        sources=tuple(sources),
        host=args.host,
        port=args.port,
        workers=args.workers,
        token=token,
        max_body_bytes=int(args.max_body_mb * 2**20),
    )
    serve(config, announce=lambda line: print(f"headwater: {line}", file=sys.stderr, flush=True))
    return 0
