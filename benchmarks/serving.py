#!/usr/bin/env python
"""Model serving: ``headwater serve`` against kserve's ModelServer, MLServer and bare FastAPI.

In one run, on the same XGBoost model and the same V2 (Open Inference Protocol) request:

* setup (untimed): a flagship-shaped model, trained here with ``xgb.train`` the way
  ``examples/higgs_xgboost.py`` trains it (``binary:logistic``, ``hist``, depth 6, learning
  rate 0.2, 100 rounds) on ``--train-rows`` synthetic Higgs rows (``rows_frame`` plus
  ``preprocess``'s derived features: 30 FP32 features), saved as ``model.ubj``;
* each competitor gets its own virtualenv under ``--venv-dir`` (``python -m venv`` + pip, kept
  for reruns; a changed requirement list rebuilds it): kserve (a minimal ``kserve.Model``
  subclass calling ``inplace_predict``: kserve's xgbserver is not on PyPI) and MLServer
  (``mlserver-xgboost``, ``uvloop<0.22`` and ``parallel_workers=0``: MLServer 1.7.1's worker
  crashes with newer uvloop, see docs research serving-protocols.md section 5);
* servers, one at a time, each on a free loopback port with ``OMP_NUM_THREADS=1``:
  ``headwater serve`` for every ``--workers`` count, a bare FastAPI endpoint in this venv
  (the same booster, ``inplace_predict`` on the event loop, stdlib json), kserve, MLServer;
* for each: wait until ``/v2/models/NAME/ready`` answers 200, check that a 1-row and a
  ``--batch-rows`` request predict what the booster predicts here (within 1e-5), then time
  ``--clients`` keep-alive connections POSTing a 1-row ``/infer`` for ``--seconds`` after a
  ``--warmup`` (and, unless ``--batch-rows 0``, the same with the batch request).

The load generator (``_serving_clients.py``, raw asyncio HTTP/1.1) is a separate process,
but it shares the machine's cores with the server: on 2 cores every number here is lower than
a server alone would reach, and the client's CPU share is reported beside each row. A server
that cannot be installed, does not start or answers wrongly gets a "not run: <reason>" row.

Target (issue 12): Headwater's best 1-row throughput >= 2x kserve's and MLServer's, with p99
<= 30 ms.

Usage::

    python benchmarks/serving.py [--seconds 10] [--clients 16] [--workers 1,2]
        [--batch-rows 64] [--warmup 2] [--venv-dir ~/.cache/headwater-bench]
        [--repeat 1] [--only headwater,fastapi,kserve,mlserver] [--baseline-src DIR]
        [--markdown] [--json-out FILE] [--strict]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (
    add_report_options,
    base_machine_info,
    finish,
    heading,
    info_section,
    load_average,
    progress,
    table,
    tail,
)

TARGET_SPEEDUP = 2.0
TARGET_P99_MS = 30.0
TOLERANCE = 1e-5
MODEL = "higgs"
HERE = Path(__file__).resolve().parent
CLIENT = HERE / "_serving_clients.py"
READY_TIMEOUT_S = 180.0
INSTALL_TIMEOUT_S = 1800.0

#: Pinned so that reruns compare like with like; xgboost as in this venv (3.2), the CPU-only
#: wheel where nothing else asks for ``xgboost`` (the full one pulls 468 MB of NCCL).
KSERVE_REQUIREMENTS = ["kserve==0.21.0", "xgboost-cpu==3.2.0"]
MLSERVER_REQUIREMENTS = [
    "mlserver==1.7.1",
    "mlserver-xgboost==1.7.1",
    "xgboost==3.2.0",
    "uvloop<0.22",
]


class NotRunError(Exception):
    """A server that could not be measured; the message is the report's reason."""


# --- the model and the requests -----------------------------------------------------------


def train_model(path: Path, rows: int, held: int) -> tuple[Any, Any]:
    """Train the flagship-shaped booster on `rows` Higgs rows; (booster, `held` other rows)."""
    import xgboost as xgb

    from headwater.components.data.higgs import BLOCK_ROWS, rows_frame
    from headwater.components.data.preprocessing import add_features

    frame = add_features(rows_frame(0, 0, rows))
    label = frame.pop("label")
    booster = xgb.train(
        {
            "objective": "binary:logistic",
            "tree_method": "hist",
            "max_depth": 6,
            "learning_rate": 0.2,
            "nthread": os.cpu_count() or 1,
        },
        xgb.DMatrix(frame, label),
        num_boost_round=100,
    )
    booster.save_model(str(path))
    start = -(-rows // BLOCK_ROWS) * BLOCK_ROWS  # rows the model never saw
    held_out = add_features(rows_frame(0, start, held)).drop(columns="label")
    return booster, held_out.to_numpy(dtype="float32")


def v2_body(x: Any) -> bytes:
    return json.dumps(
        {
            "id": "bench",
            "inputs": [
                {
                    "name": "input-0",
                    "shape": list(x.shape),
                    "datatype": "FP32",
                    "data": x.ravel().tolist(),
                }
            ],
        }
    ).encode()


def grpc_body(x: Any) -> bytes:
    """The same request as a serialized ModelInferRequest, its tensor as raw contents (what
    Triton's client sends)."""
    from tritonclient.grpc import service_pb2 as pb

    request = pb.ModelInferRequest(model_name=MODEL, id="bench")
    request.inputs.add(name="input-0", datatype="FP32", shape=list(x.shape))
    request.raw_input_contents.append(x.astype("<f4").tobytes())
    return bytes(request.SerializeToString())


def check_grpc_answer(port: int, body: bytes, expected: Any) -> None:
    import grpc
    import numpy as np
    from tritonclient.grpc import service_pb2 as pb

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                answer = pb.ModelInferResponse.FromString(infer(body, timeout=30))
                break
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    said = f"{exc.code().name} {exc.details()}"
                    raise NotRunError(f"wrong gRPC answer: {said}") from exc
                time.sleep(0.2)
    if answer.raw_output_contents:
        got = np.frombuffer(answer.raw_output_contents[0], dtype="<f4").astype(np.float64)
    else:
        contents = answer.outputs[0].contents
        got = np.asarray(contents.fp32_contents or contents.fp64_contents, dtype=np.float64)
    if got.shape != expected.shape or not np.allclose(got, expected, rtol=0, atol=TOLERANCE):
        raise NotRunError(f"wrong gRPC answer: {got[:3]} vs expected {expected[:3]}")


# --- virtualenvs ----------------------------------------------------------------------------


def ensure_venv(root: Path, name: str, requirements: list[str]) -> tuple[Path, str]:
    """The python of venv `root/name` with `requirements`, built if missing; (python, how)."""
    venv = root / name
    marker = venv / ".headwater-bench-requirements"
    wanted = "\n".join(requirements) + "\n"
    python = venv / "bin" / "python"
    if python.exists() and marker.exists() and marker.read_text() == wanted:
        return python, f"cached venv {venv}"
    shutil.rmtree(venv, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    progress(f"{name}: creating {venv} and installing {' '.join(requirements)} ...")
    started = time.perf_counter()
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, text=True
        )
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", *requirements],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        raise NotRunError(f"venv/pip failed: {exc}") from exc
    if done.returncode != 0:
        last = [ln for ln in done.stderr.splitlines() if ln.strip() and "is ignored" not in ln]
        raise NotRunError(f"pip install failed ({last[-1] if last else done.returncode})")
    marker.write_text(wanted)
    return python, f"installed into {venv} in {time.perf_counter() - started:.0f} s"


def venv_versions(python: Path, dists: list[str]) -> str:
    code = (
        "import importlib.metadata as m, sys\n"
        "print(', '.join(f'{d} {m.version(d)}' for d in sys.argv[1:]))\n"
        "print(sum(1 for _ in m.distributions()))"
    )
    out = subprocess.run(
        [str(python), "-c", code, *dists], capture_output=True, text=True, check=False
    )
    lines = out.stdout.splitlines()
    return f"{lines[0]}; {lines[1]} packages" if len(lines) == 2 else "?"


# --- the servers -----------------------------------------------------------------------------

FASTAPI_APP = '''
"""A bare V2 endpoint: one booster, inplace_predict on the event loop, stdlib json."""
import json
import sys

import numpy as np
import uvicorn
import xgboost as xgb
from fastapi import FastAPI, Request, Response

booster = xgb.Booster(model_file=sys.argv[1])
booster.set_param({"nthread": 1})
app = FastAPI()


@app.get("/v2/models/higgs/ready")
def ready() -> Response:
    return Response(status_code=200)


@app.post("/v2/models/higgs/infer")
async def infer(request: Request) -> Response:
    body = json.loads(await request.body())
    tensor = body["inputs"][0]
    x = np.asarray(tensor["data"], dtype=np.float32).reshape(tensor["shape"])
    y = booster.inplace_predict(x)
    out = {
        "model_name": "higgs",
        "id": body.get("id", ""),
        "outputs": [
            {"name": "predict", "datatype": "FP32", "shape": list(y.shape), "data": y.tolist()}
        ],
    }
    return Response(json.dumps(out), media_type="application/json")


uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access_log=False)
'''

KSERVE_APP = '''
"""A minimal kserve.Model for an XGBoost booster (what kserve's xgbserver does, V2 only)."""
import sys

import uvicorn

# kserve hard-codes host="0.0.0.0" for REST; a benchmark listens on loopback only.
_config_init = uvicorn.Config.__init__


def _loopback(self, *args, **kwargs):
    kwargs["host"] = "127.0.0.1"
    _config_init(self, *args, **kwargs)


uvicorn.Config.__init__ = _loopback
model_file, port = sys.argv[1], int(sys.argv[2])
sys.argv = sys.argv[:1]  # kserve parses sys.argv when imported

import kserve  # noqa: E402
import xgboost as xgb  # noqa: E402
from kserve import InferOutput, InferResponse  # noqa: E402


class XGBoostModel(kserve.Model):
    def __init__(self, name, path):
        super().__init__(name)
        self.path = path
        self.booster = None

    def load(self):
        self.booster = xgb.Booster(model_file=self.path)
        self.booster.set_param({"nthread": 1})
        self.ready = True
        return self.ready

    def predict(self, payload, headers=None, response_headers=None):
        y = self.booster.inplace_predict(payload.inputs[0].as_numpy()).astype("float32")
        out = InferOutput(name="predict", shape=list(y.shape), datatype="FP32")
        out.set_data_from_numpy(y, binary_data=False)
        return InferResponse(
            response_id=payload.id or "", model_name=self.name, infer_outputs=[out]
        )


model = XGBoostModel("higgs", model_file)
model.load()
kserve.ModelServer(
    http_port=port, enable_grpc=False, enable_latency_logging=False, workers=1
).start([model])
'''


@dataclass
class Server:
    """One row of the report: how to start a server and what it is."""

    name: str
    start: Callable[[int, Path], list[str]]  # (port, work dir) -> command line
    note: str = ""
    setup: Callable[[], str] | None = None  # builds its venv; returns how
    env: dict[str, str] = field(default_factory=dict)
    python: Path | None = None
    grpc_port: int | None = None  # set by `start` when it serves gRPC (--grpc)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def servers(args: argparse.Namespace, model: Path) -> list[Server]:
    only = set(args.only.split(","))
    headwater = Path(sys.executable).with_name("headwater")
    out: list[Server] = []
    builds: list[tuple[str, dict[str, str]]] = [("headwater", {})]
    if args.baseline_src is not None:
        # Another checkout's code in this venv: its src first on the path of the server and
        # of every worker process it spawns.
        src = str(args.baseline_src.resolve())
        builds.append(("baseline headwater", {"PYTHONPATH": src}))
    if "headwater" in only:
        for label, env in builds:
            for n in args.workers:
                hw = Server(
                    f"{label} ({n} worker{'s' if n > 1 else ''})",
                    lambda p, w: [],
                    note=f"headwater serve --workers {n}"
                    + (f", code from {env['PYTHONPATH']}" if env else ""),
                    env=env,
                )

                def hw_cmd(port: int, _work: Path, n: int = n, hw: Server = hw) -> list[str]:
                    cmd = [str(headwater), "serve", f"{MODEL}={model}", "--port", str(port)]
                    cmd += ["--workers", str(n)]
                    if args.grpc and not hw.env:  # the baseline has no gRPC
                        hw.grpc_port = free_port()
                        cmd += ["--grpc-port", str(hw.grpc_port)]
                    return cmd

                hw.start = hw_cmd
                out.append(hw)
    if "fastapi" in only:

        def fastapi_cmd(port: int, work: Path) -> list[str]:
            (work / "bare_fastapi.py").write_text(FASTAPI_APP)
            return [sys.executable, str(work / "bare_fastapi.py"), str(model), str(port)]

        out.append(Server("bare FastAPI", fastapi_cmd, note="this venv, 1 process"))
    if "kserve" in only:
        kserve = Server("kserve ModelServer", lambda p, w: [], note="kserve.Model subclass")

        def kserve_setup() -> str:
            kserve.python, how = ensure_venv(args.venv_dir, "kserve", KSERVE_REQUIREMENTS)
            return f"{how}; {venv_versions(kserve.python, ['kserve', 'xgboost-cpu'])}"

        def kserve_cmd(port: int, work: Path) -> list[str]:
            (work / "kserve_model.py").write_text(KSERVE_APP)
            return [str(kserve.python), str(work / "kserve_model.py"), str(model), str(port)]

        kserve.setup, kserve.start = kserve_setup, kserve_cmd
        out.append(kserve)
    if "mlserver" in only:
        ml = Server("MLServer", lambda p, w: [], note="mlserver-xgboost, parallel_workers=0")

        def ml_setup() -> str:
            ml.python, how = ensure_venv(args.venv_dir, "mlserver", MLSERVER_REQUIREMENTS)
            dists = ["mlserver", "mlserver-xgboost", "uvloop"]
            return f"{how}; {venv_versions(ml.python, dists)}"

        def ml_cmd(port: int, work: Path) -> list[str]:
            root = work / "mlserver"
            (root / MODEL).mkdir(parents=True, exist_ok=True)
            ml.grpc_port = free_port() if args.grpc else None
            settings = {
                "debug": False,
                "host": "127.0.0.1",
                "http_port": port,
                "grpc_port": ml.grpc_port or free_port(),
                "metrics_port": free_port(),
                "parallel_workers": 0,
            }
            (root / "settings.json").write_text(json.dumps(settings))
            (root / MODEL / "model-settings.json").write_text(
                json.dumps(
                    {
                        "name": MODEL,
                        "implementation": "mlserver_xgboost.XGBoostModel",
                        "parameters": {"uri": str(model)},
                    }
                )
            )
            assert ml.python is not None
            return [str(ml.python.with_name("mlserver")), "start", str(root)]

        ml.setup, ml.start = ml_setup, ml_cmd
        out.append(ml)
    return out


class Running:
    """A server subprocess in its own session, its output in a log file."""

    def __init__(self, cmd: list[str], log: Path, env: dict[str, str]) -> None:
        self.log = log
        self.handle = log.open("wb")
        self.proc = subprocess.Popen(
            cmd,
            stdout=self.handle,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )

    def log_tail(self, lines: int = 3) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return tail(text, lines).replace("\n", " | ")[-400:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                # MLServer can wait minutes for background tasks after SIGTERM.
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        self.handle.close()


def wait_ready(running: Running, port: int) -> float:
    import httpx

    started = time.perf_counter()
    url = f"http://127.0.0.1:{port}/v2/models/{MODEL}/ready"
    while time.perf_counter() - started < READY_TIMEOUT_S:
        if running.proc.poll() is not None:
            raise NotRunError(f"exited with code {running.proc.returncode}: {running.log_tail()}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return time.perf_counter() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise NotRunError(f"not ready after {READY_TIMEOUT_S:.0f} s: {running.log_tail()}")


def check_answer(port: int, body: bytes, expected: Any) -> None:
    import httpx
    import numpy as np

    url = f"http://127.0.0.1:{port}/v2/models/{MODEL}/infer"
    r = httpx.post(url, content=body, headers={"content-type": "application/json"}, timeout=30)
    if r.status_code != 200:
        raise NotRunError(f"wrong answer: HTTP {r.status_code} {r.text[:200]}")
    outputs = r.json().get("outputs") or [{}]
    got = np.asarray(outputs[0].get("data", []), dtype=np.float64).ravel()
    if got.shape != expected.shape or not np.allclose(got, expected, rtol=0, atol=TOLERANCE):
        raise NotRunError(f"wrong answer: {got[:3]} vs expected {expected[:3]}")


def load_run(
    port: int, body_file: Path, args: argparse.Namespace, *, grpc: bool = False
) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_before = load_average()
    how = ["--grpc"] if grpc else ["--path", f"/v2/models/{MODEL}/infer"]
    done = subprocess.run(
        [
            sys.executable,
            str(CLIENT),
            "--port",
            str(port),
            *how,
            "--body-file",
            str(body_file),
            "--clients",
            str(args.clients),
            "--seconds",
            str(args.seconds),
            "--warmup",
            str(args.warmup),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise NotRunError(f"load generator failed: {tail(done.stderr, 2)}")
    result = json.loads(done.stdout)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result["client_cpu_share"] = cpu / (args.seconds + args.warmup)  # of one core
    result["load_before"], result["load_after"] = load_before, load_average()
    return result


def measure(
    server: Server,
    args: argparse.Namespace,
    work: Path,
    bodies: dict[str, tuple[Path, Any]],
) -> dict[str, Any]:
    grpc_bodies = {kind: path.with_suffix(".pb").read_bytes() for kind, (path, _) in bodies.items()}
    row: dict[str, Any] = {"server": server.name, "note": server.note}
    try:
        if server.setup is not None:
            row["install"] = server.setup()
        port = free_port()
        cmd = server.start(port, work)
        env = {**os.environ, "OMP_NUM_THREADS": "1", **server.env}
        slug = server.name.split()[0].lower() + str(port)
        running = Running(cmd, work / f"{slug}.log", env)
        try:
            row["startup_s"] = wait_ready(running, port)
            for path, expected in bodies.values():
                check_answer(port, path.read_bytes(), expected)
            runs = [(kind, port, path, False) for kind, (path, _) in bodies.items()]
            if server.grpc_port is not None:
                for kind, (path, expected) in bodies.items():
                    check_grpc_answer(server.grpc_port, grpc_bodies[kind], expected)
                    runs.append((f"grpc {kind}", server.grpc_port, path.with_suffix(".pb"), True))
            for kind, at, path, grpc in runs:
                progress(f"{server.name}: {kind} for {args.seconds:g} s (load {load_average()})")
                row[kind] = load_run(at, path, args, grpc=grpc)
                r = row[kind]
                progress(
                    f"  {r['rps']:.0f} req/s, p50 {r['p50_ms'] or 0:.1f} ms, "
                    f"p99 {r['p99_ms'] or 0:.1f} ms, {r['errors']} errors"
                )
        finally:
            running.stop()
    except NotRunError as exc:
        row["not_run"] = str(exc)
    except Exception as exc:  # one broken server must not end the others' run
        row["not_run"] = f"{type(exc).__name__}: {exc}"
        progress(f"{server.name}: not run: {exc}")
    return row


# --- the report --------------------------------------------------------------------------------


def fmt_ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def verdict(rows: list[dict[str, Any]]) -> tuple[bool, list[str], dict[str, Any]]:
    ours = [r for r in rows if r["server"].startswith("headwater") and "single" in r]
    if not ours:
        return False, ["Headwater was not measured: target NOT EVALUATED"], {}
    best = max(ours, key=lambda r: r["single"]["rps"])
    single = best["single"]
    lines = [f"Headwater's best: {best['server']}, {single['rps']:.0f} req/s"]
    passed = True
    ratios = {}
    for name in ("kserve ModelServer", "MLServer", "bare FastAPI"):
        other = next((r for r in rows if r["server"] == name), None)
        if other is None:
            continue
        if "single" not in other:
            lines.append(f"vs {name}: not run, so not evaluated")
            passed = passed and name == "bare FastAPI"
            continue
        ratio = single["rps"] / other["single"]["rps"] if other["single"]["rps"] else float("inf")
        ratios[name] = ratio
        if name == "bare FastAPI":
            lines.append(f"vs {name}: {ratio:.2f}x (for reference; no target)")
            continue
        ok = ratio >= TARGET_SPEEDUP
        passed = passed and ok
        lines.append(
            f"vs {name}: {ratio:.2f}x (target >= {TARGET_SPEEDUP:g}x) {'ok' if ok else 'MISSED'}"
        )
    for name in ("kserve ModelServer", "MLServer"):
        if not any(r["server"] == name for r in rows):
            lines.append(f"vs {name}: not in --only, so not evaluated")
            passed = False
    p99_ok = single["p99_ms"] is not None and single["p99_ms"] <= TARGET_P99_MS
    passed = passed and p99_ok and single["errors"] == 0
    lines.append(
        f"p99 {fmt_ms(single['p99_ms'])} ms (target <= {TARGET_P99_MS:g} ms) "
        f"{'ok' if p99_ok else 'MISSED'}; errors {single['errors']}"
    )
    lines.append(f"target {'MET' if passed else 'MISSED'}")
    return passed, lines, {"best": best["server"], "ratios": ratios}


def best_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A server's run with the most 1-row requests/s (its first run if none was measured)."""
    measured = [r for r in runs if "single" in r]
    return max(measured, key=lambda r: r["single"]["rps"]) if measured else runs[0]


def every_run(runs: list[dict[str, Any]], markdown: bool) -> str:
    rows = []
    for r in runs:
        if "single" not in r:
            continue
        cells = [r["server"], str(r["round"])]
        for kind in ("single", "batch"):
            m = r.get(kind)
            cells.append(
                "-"
                if m is None
                else f"{m['rps']:.0f} ({fmt_ms(m['p50_ms'])}/{fmt_ms(m['p99_ms'])})"
                + (f", {m['errors']} errors" if m["errors"] else "")
            )
        cells.append(r["single"]["load_before"])
        rows.append(cells)
    headers = ["server", "round", "1 row: req/s (p50/p99 ms)", "batch: req/s (p50/p99 ms)"]
    return table([*headers, "load before (1/5/15 min)"], rows, markdown)


def report(
    rows: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    args: argparse.Namespace,
    machine: dict[str, str],
) -> tuple[str, bool, dict[str, Any]]:
    md = args.markdown
    headers = ["server", "req/s", "p50 ms", "p99 ms", "errors", "client CPU", "load before/after"]
    single_rows, batch_rows, installs = [], [], {}
    grpc_rows: dict[str, list[list[str]]] = {"grpc single": [], "grpc batch": []}
    for r in rows:
        if "install" in r:
            installs[r["server"]] = r["install"]
        if "not_run" in r:
            reason = f"not run: {r['not_run']}".replace("|", "/")
            single_rows.append([r["server"], reason, "", "", "", "", ""])
            continue
        kinds = [("single", single_rows), ("batch", batch_rows), *grpc_rows.items()]
        for kind, out in kinds:
            if kind not in r:
                continue
            m = r[kind]
            rps = f"{m['rps']:.0f}"
            if kind.endswith("batch"):
                rps += f" ({m['rps'] * args.batch_rows:,.0f} rows/s)"
            out.append(
                [
                    r["server"],
                    rps,
                    fmt_ms(m["p50_ms"]),
                    fmt_ms(m["p99_ms"]),
                    str(m["errors"]),
                    f"{m['client_cpu_share']:.0%}",
                    f"{m['load_before'].split(' / ')[0]} / {m['load_after'].split(' / ')[0]}",
                ]
            )
    startup = {
        r["server"]: f"ready in {r['startup_s']:.1f} s ({r['note']})"
        for r in rows
        if "startup_s" in r
    }
    errors = {
        f"{r['server']} {kind} errors": "; ".join(r[kind]["error_samples"])[:300]
        for r in rows
        for kind in ("single", "batch", *grpc_rows)
        if kind in r and r[kind]["errors"]
    }
    setup = {
        "model": f"flagship-shaped XGBoost, {machine.pop('model')}",
        "load": f"{args.clients} keep-alive HTTP/1.1 connections (one asyncio client process "
        f"on the same cores), {args.warmup:g} s warm-up then {args.seconds:g} s measured, "
        "client CPU in % of one core",
        "servers": "one at a time on 127.0.0.1, OMP_NUM_THREADS=1, predictions checked "
        f"within {TOLERANCE:g} first",
        **startup,
        **installs,
        **errors,
    }
    passed, lines, summary = verdict(rows)
    best_of = f" (each server's best of {args.repeat} rounds)" if args.repeat > 1 else ""
    parts = [
        *info_section("Machine", machine, md),
        *info_section("Setup", setup, md),
        f"{heading(md)}V2 infer, 1 row of 30 FP32 features a request{best_of}",
        table(headers, single_rows, md),
    ]
    if batch_rows:
        parts += [
            f"{heading(md)}V2 infer, {args.batch_rows} rows a request"
            + (" (the rounds of the 1-row table)" if best_of else ""),
            table(headers, batch_rows, md),
        ]
    for kind, out in grpc_rows.items():
        if out:
            size = "1 row" if kind == "grpc single" else f"{args.batch_rows} rows"
            parts += [
                f"{heading(md)}V2 infer over gRPC (ModelInfer, raw contents), {size} a request",
                table(headers, out, md),
            ]
    if args.repeat > 1:
        parts += [f"{heading(md)}Every run (rounds alternate the servers)", every_run(runs, md)]
    bullet = "- " if md else ""
    parts.append(f"{heading(md)}Targets\n" + "\n".join(bullet + line for line in lines))
    return "\n\n".join(parts), passed, summary


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run")
    p.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds first")
    p.add_argument("--clients", type=int, default=16, help="concurrent connections")
    p.add_argument(
        "--workers",
        type=lambda s: [int(n) for n in s.split(",")],
        default=[1, 2],
        help="headwater serve --workers counts to measure, comma-separated (default 1,2)",
    )
    p.add_argument("--batch-rows", type=int, default=64, help="rows of the batch run (0: none)")
    p.add_argument("--train-rows", type=int, default=100_000, help="Higgs rows to train on")
    p.add_argument(
        "--venv-dir",
        type=Path,
        default=Path("~/.cache/headwater-bench").expanduser(),
        help="where the competitors' virtualenvs are kept (default ~/.cache/headwater-bench)",
    )
    p.add_argument(
        "--only",
        default="headwater,fastapi,kserve,mlserver",
        help="servers to run, comma-separated (default all four)",
    )
    p.add_argument(
        "--baseline-src",
        type=Path,
        default=None,
        help="also measure the headwater code in this src folder (another checkout, say a "
        "`git worktree` of the commit before a change), as 'baseline headwater' rows of the "
        "same run; the target is judged on this checkout's rows",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds over all servers; the tables show each server's best round (default 1)",
    )
    p.add_argument(
        "--grpc",
        action="store_true",
        help="also time the same requests over gRPC (ModelInfer): headwater serve --grpc-port "
        "(not the baseline's) and MLServer's gRPC port; one channel per client",
    )
    add_report_options(p, "exit 2 when the target is missed")
    args = p.parse_args()

    machine = base_machine_info()
    import xgboost

    machine["xgboost (this venv)"] = xgboost.__version__
    machine["load average at start"] = load_average()
    work = Path(tempfile.mkdtemp(prefix="hw-serve-bench-"))
    try:
        model = work / "model.ubj"
        progress(f"training the model on {args.train_rows:,} Higgs rows ...")
        booster, held_out = train_model(model, args.train_rows, max(args.batch_rows, 1))
        machine["model"] = (
            f"{booster.num_boosted_rounds()} rounds, depth 6, {booster.num_features()} "
            f"features, trained on {args.train_rows:,} generate_higgs rows"
        )
        bodies: dict[str, tuple[Path, Any]] = {}
        for kind, x in (("single", held_out[:1]), ("batch", held_out[: args.batch_rows])):
            if kind == "batch" and args.batch_rows <= 0:
                continue
            path = work / f"{kind}.json"
            path.write_bytes(v2_body(x))
            path.with_suffix(".pb").write_bytes(grpc_body(x) if args.grpc else b"")
            bodies[kind] = (path, booster.inplace_predict(x).astype("float64").ravel())
        order = servers(args, model)
        runs = []
        for i in range(args.repeat):
            for server in order:
                runs.append({**measure(server, args, work, bodies), "round": i + 1})
        rows = [best_run([r for r in runs if r["server"] == s.name]) for s in order]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    machine["load average at end"] = load_average()
    text, passed, summary = report(rows, runs, args, machine)
    return finish(text, passed, args, {"runs": runs, **summary, "machine": machine})


if __name__ == "__main__":
    raise SystemExit(main())
