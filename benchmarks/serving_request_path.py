#!/usr/bin/env python
"""The model server's own cost per V2 request, in process: no sockets, no client, no noise
from a load generator sharing the cores.

Each round starts a fresh interpreter per tree (this checkout's ``src``, and ``--baseline-src``
when given), builds the app exactly as ``headwater serve`` does (``create_app`` with the
default hooks and metrics), runs its lifespan, and calls it over ASGI with the same V2 infer
body ``--requests`` times after a warm-up; rounds alternate the trees. A request is the whole
server path: the middlewares (request metrics, browser guard, protocol routes), reading and
parsing the body, decoding the tensor, the prediction on the prediction pool's thread, the
answer. The model is trained here as ``serving.py`` trains it (30 FP32 features, 100 trees of
depth 6), ``OMP_NUM_THREADS=1``.

Usage::

    python benchmarks/serving_request_path.py [--rows 1,64,1000] [--requests 2000]
        [--rounds 3] [--baseline-src DIR] [--markdown] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import add_report_options, base_machine_info, finish, info_section, progress, table

SRC = Path(__file__).resolve().parents[1] / "src"

#: Run in a fresh interpreter with the tree under test first on sys.path: prints us/request.
_MEASURE = r"""
import asyncio, json, sys, time
import numpy as np
from headwater.serving.app import create_app

model, rows, requests, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
app = create_app([f"churn={model}"])
data = np.random.default_rng(0).random((rows, 30), dtype=np.float32).ravel().tolist()
body = json.dumps({"inputs": [{"name": "input-0", "shape": [rows, 30], "datatype": "FP32",
                               "data": data}]}).encode()
scope = {
    "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
    "scheme": "http", "path": "/v2/models/churn/infer", "raw_path": b"/v2/models/churn/infer",
    "root_path": "", "query_string": b"", "client": ("127.0.0.1", 50000),
    "server": ("127.0.0.1", 8080), "state": {},
    "headers": [(b"host", b"127.0.0.1:8080"), (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode())],
}

async def one():
    answered = []
    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}
    async def send(message):
        answered.append(message)
    await app(dict(scope), receive, send)
    if answered[0]["status"] != 200:
        raise SystemExit(f"status {answered[0]['status']}: {answered[1:]}")

async def main():
    async with app.router.lifespan_context(app):
        for _ in range(warmup):
            await one()
        started = time.perf_counter()
        for _ in range(requests):
            await one()
        print((time.perf_counter() - started) / requests * 1e6)

asyncio.run(main())
"""


def _train(path: Path) -> None:
    import numpy as np
    import xgboost as xgb

    rng = np.random.default_rng(1)
    features = rng.random((20_000, 30), dtype=np.float32)
    labels = (features[:, 0] + features[:, 5] > 1.0).astype(int)
    params = {"objective": "binary:logistic", "tree_method": "hist", "max_depth": 6, "eta": 0.2}
    xgb.train(params, xgb.DMatrix(features, label=labels), 100).save_model(str(path))


def _measure(src: Path, model: Path, rows: int, requests: int, home: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1", "HEADWATER_HOME": home}
    warmup = max(100, requests // 10)
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(model), str(rows), str(requests), str(warmup)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the measurement failed ({src}):\n{done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--rows", default="1,64,1000", help="rows a request, comma-separated")
    p.add_argument("--requests", type=int, default=2000, help="timed requests a measurement")
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds (median kept)")
    p.add_argument("--baseline-src", type=Path, help="another tree's src to compare against")
    add_report_options(p, "exit 2 unless every ratio (baseline / this) is at least 1.0")
    args = p.parse_args()
    trees = [("this checkout", SRC)]
    if args.baseline_src is not None:
        trees.append((f"baseline {args.baseline_src}", args.baseline_src.resolve()))
    sizes = [int(r) for r in args.rows.split(",")]
    found: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="hw-request-path-") as scratch:
        model = Path(scratch) / "model.ubj"
        progress("training the model ...")
        _train(model)
        for rows in sizes:
            for round_ in range(args.rounds):
                for name, src in trees:
                    us = _measure(src, model, rows, args.requests // max(1, rows // 64), scratch)
                    progress(f"{rows} rows, round {round_ + 1}, {name}: {us:.1f} us/request")
                    found.setdefault((name, rows), []).append(us)
    rows_out, passed = [], True
    for rows in sizes:
        mine = statistics.median(found[(trees[0][0], rows)])
        cells = [str(rows), f"{mine:.0f}"]
        if len(trees) > 1:
            base = statistics.median(found[(trees[1][0], rows)])
            ratio = base / mine
            passed = passed and ratio >= 1.0
            cells += [f"{base:.0f}", f"{ratio:.2f}"]
        rows_out.append(cells)
    headers = ["rows a request", "this checkout: us/request"]
    if len(trees) > 1:
        headers += ["baseline: us/request", "speed-up (baseline / this)"]
    lines = info_section("Machine", base_machine_info(), args.markdown)
    lines += [
        f"{args.rounds} alternating rounds, median kept; one interpreter a measurement",
        "",
        table(headers, rows_out, args.markdown),
    ]
    raw: dict[str, Any] = {f"{n}|{r}": v for (n, r), v in found.items()}
    return finish("\n".join(lines), passed, args, raw)


if __name__ == "__main__":
    sys.exit(main())
