#!/usr/bin/env python
"""The load generator for ``serving.py``: N keep-alive HTTP/1.1 clients POSTing one body (or,
with ``--grpc``, N gRPC channels calling ModelInfer with one serialized request).

Run as its own process so that the client's event loop does not share a GIL with the server
or with the orchestrating script::

    python benchmarks/_serving_clients.py --port 8080 --path /v2/models/m/infer \\
        --body-file body.json --clients 16 --seconds 10 --warmup 2

Each client is one TCP connection speaking raw HTTP/1.1 on asyncio streams (no HTTP library:
httpx costs ~0.3 ms of client CPU a request, which on 2 shared cores would cap the numbers we
measure). A client sends a request, reads the whole answer (Content-Length or chunked), and
sends the next: a closed loop, so throughput is what the server sustains at that concurrency.
Requests finished during the warm-up are not counted. On stdout: one JSON object with the
number of successful requests and errors in the measured window, its length, the latency
percentiles of the successful ones, and the first few error texts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any


def build_request(host: str, port: int, path: str, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """(status, body, server keeps the connection) of one HTTP/1.1 answer."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            parts.append(chunk[:-2])
        body = b"".join(parts)
    else:
        body = await reader.read()
    keep = headers.get("connection", "").lower() != "close"
    return status, body, keep


async def client(
    host: str,
    port: int,
    request: bytes,
    start_at: float,
    stop_at: float,
    latencies: list[float],
    errors: list[str],
) -> None:
    reader = writer = None
    while True:
        now = time.perf_counter()
        if now >= stop_at:
            break
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port)
            assert reader is not None
            t0 = time.perf_counter()
            writer.write(request)
            status, body, keep = await read_response(reader)
            t1 = time.perf_counter()
            if t0 >= start_at and t1 <= stop_at:
                if status == 200:
                    latencies.append(t1 - t0)
                else:
                    errors.append(f"HTTP {status}: {body[:200]!r}")
            if not keep:
                writer.close()
                writer = None
        except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
            if time.perf_counter() >= start_at:
                errors.append(f"{type(exc).__name__}: {exc}")
            if writer is not None:
                writer.close()
            writer = None
            await asyncio.sleep(0.01)
    if writer is not None:
        writer.close()


async def grpc_client(
    host: str,
    port: int,
    request: bytes,
    start_at: float,
    stop_at: float,
    latencies: list[float],
    errors: list[str],
) -> None:
    """One gRPC channel (its own HTTP/2 connection) calling ModelInfer in a closed loop with
    a request serialized once: no protobuf work in the client."""
    import grpc

    async with grpc.aio.insecure_channel(f"{host}:{port}") as channel:
        infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        while True:
            t0 = time.perf_counter()
            if t0 >= stop_at:
                break
            try:
                await infer(request)
                t1 = time.perf_counter()
                if t0 >= start_at and t1 <= stop_at:
                    latencies.append(t1 - t0)
            except grpc.aio.AioRpcError as exc:
                if time.perf_counter() >= start_at:
                    errors.append(f"{exc.code().name}: {exc.details()}")
                await asyncio.sleep(0.01)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    body = Path(args.body_file).read_bytes()
    latencies: list[float] = []
    errors: list[str] = []
    begin = time.perf_counter()
    start_at = begin + args.warmup
    stop_at = start_at + args.seconds
    if args.grpc:
        one, request = grpc_client, body
    else:
        one, request = client, build_request(args.host, args.port, args.path, body)
    await asyncio.gather(
        *(
            one(args.host, args.port, request, start_at, stop_at, latencies, errors)
            for _ in range(args.clients)
        )
    )
    latencies.sort()

    def pct(q: float) -> float | None:
        if not latencies:
            return None
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000

    return {
        "ok": len(latencies),
        "errors": len(errors),
        "error_samples": errors[:5],
        "seconds": args.seconds,
        "rps": len(latencies) / args.seconds,
        "p50_ms": pct(0.50),
        "p90_ms": pct(0.90),
        "p99_ms": pct(0.99),
        "max_ms": latencies[-1] * 1000 if latencies else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--path", default="", help="the HTTP path (not with --grpc)")
    p.add_argument(
        "--grpc",
        action="store_true",
        help="call ModelInfer over gRPC instead; the body file is a serialized ModelInferRequest",
    )
    p.add_argument("--body-file", required=True)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=2.0)
    args = p.parse_args()
    print(json.dumps(asyncio.run(run(args))))


if __name__ == "__main__":
    main()
