"""`headwater serve --grpc-port`: the Open Inference Protocol over gRPC, driven by the clients
people use, Triton's (`tritonclient.grpc`) and KServe's (`kserve.InferenceGRPCClient`),
against a real `headwater serve` subprocess with two workers and a token.

Each client runs in a process of its own: Triton's and KServe's compiled messages register the
same `inference.*` names, so neither may be imported into the test process (another test
module imports `kserve` into it)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli
from test_serve_cli import free_port, save_booster, serving

pytest.importorskip("grpc")
if importlib.util.find_spec("tritonclient") is None:  # found, never imported here (above)
    pytest.skip("the gRPC clients need tritonclient[grpc]", allow_module_level=True)
xgb = pytest.importorskip("xgboost")
httpx = pytest.importorskip("httpx")

import numpy as np  # noqa: E402

pytestmark = pytest.mark.integration

TOKEN = "s3cret"
AUTH = {"authorization": f"Bearer {TOKEN}"}

#: Triton's client (and a bare stub with typed contents): what each call gave, as JSON.
_TRITON = """
import json, sys
import grpc
import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2 as pb, service_pb2_grpc as pb_grpc
from tritonclient.utils import InferenceServerException

address, token, rows = sys.argv[1], sys.argv[2], np.asarray(json.loads(sys.argv[3]), "float32")
auth = {"authorization": "Bearer " + token}
client = grpcclient.InferenceServerClient(address)
said = {"live": client.is_server_live(), "ready": client.is_server_ready()}
said["metadata"] = client.get_model_metadata("churn", headers=auth, as_json=True)
tensor = grpcclient.InferInput("input-0", list(rows.shape), "FP32")
tensor.set_data_from_numpy(rows)
answer = client.infer("churn", [tensor], headers=auth)
said["version"] = answer.get_response().model_version
said["raw"] = answer.as_numpy("predict").tolist()
stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(address))
typed = pb.ModelInferRequest(model_name="churn")
typed.inputs.add(name="input-0", datatype="FP32", shape=list(rows.shape))
typed.inputs[0].contents.fp32_contents[:] = rows.ravel().tolist()
found = stub.ModelInfer(typed, metadata=tuple(auth.items()))
said["typed"] = np.frombuffer(found.raw_output_contents[0], dtype="<f4").tolist()
narrow = grpcclient.InferInput("input-0", [len(rows), 3], "FP32")
narrow.set_data_from_numpy(rows[:, :3].copy())
said["refused"] = []
for call in (
    lambda: client.infer("churn", [tensor]),
    lambda: client.infer("nope", [tensor], headers=auth),
    lambda: client.is_model_ready("churn", headers={"authorization": "Bearer x"}),
    lambda: client.infer("churn", [narrow], headers=auth),
):
    try:
        call()
        said["refused"].append(None)
    except InferenceServerException as exc:
        said["refused"].append([str(exc.status()), exc.message()])
big = np.zeros((300_000, rows.shape[1]), dtype="float32")  # 4.8 MB: past gRPC's 4 MiB default
large = grpcclient.InferInput("input-0", list(big.shape), "FP32")
large.set_data_from_numpy(big)
said["large"] = len(client.infer("churn", [large], headers=auth).as_numpy("predict"))
print(json.dumps(said))
"""

#: KServe's client: the predictions, as JSON.
_KSERVE = """
import asyncio, json, sys
import numpy as np
from kserve import InferenceGRPCClient, InferInput, InferRequest

async def main():
    client = InferenceGRPCClient(sys.argv[1])
    rows = np.asarray(json.loads(sys.argv[3]), dtype=np.float32)
    tensor = InferInput("input-0", list(rows.shape), "FP32")
    tensor.set_data_from_numpy(rows, binary_data=True)
    answer = await client.infer(
        InferRequest(model_name="churn", infer_inputs=[tensor]),
        headers=(("authorization", "Bearer " + sys.argv[2]),),
    )
    print(json.dumps(answer.outputs[0].as_numpy().tolist()))

asyncio.run(main())
"""

#: Triton's client, each call asking model_version argv[3] (or none) with request id argv[4+i]:
#: the versions that answered, as JSON.
_VERSIONS = """
import json, sys
import numpy as np
import tritonclient.grpc as grpcclient

client = grpcclient.InferenceServerClient(sys.argv[1])
tensor = grpcclient.InferInput("input-0", [1, 4], "FP32")
tensor.set_data_from_numpy(np.zeros((1, 4), dtype=np.float32))
answers = [
    client.infer("churn", [tensor], model_version=sys.argv[2], headers={"x-request-id": key})
    for key in sys.argv[3:]
]
print(json.dumps([a.get_response().model_version for a in answers]))
"""


def _client(script: str, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_grpc_clients_infer_as_over_rest(headwater: Cli, tmp_path: Path) -> None:
    from headwater.models import xgboost_file

    model = save_booster(tmp_path / "model")
    rows = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    expected = xgboost_file.load(str(model)).inplace_predict(rows)
    port = free_port()
    args = (f"churn={model}", "--grpc-port", str(port), "--workers", "2", "--token", TOKEN)
    with serving(headwater, *args) as (url, log):
        assert f"gRPC on 127.0.0.1:{port}" in log.read_text()
        address, given = f"127.0.0.1:{port}", json.dumps(rows.tolist())
        said = _client(_TRITON, address, TOKEN, given)
        assert said["live"] and said["ready"]  # open, as REST's health checks are
        assert said["metadata"]["platform"] == "xgboost"
        assert said["metadata"]["inputs"][0]["shape"] == ["-1", "4"]
        assert said["version"] == "1"
        # Raw contents (Triton's client) and typed ones (other clients) answer alike.
        np.testing.assert_allclose(said["raw"], expected, rtol=1e-6)
        np.testing.assert_allclose(said["typed"], expected, rtol=1e-6)
        np.testing.assert_allclose(_client(_KSERVE, address, TOKEN, given), expected, rtol=1e-6)
        # Refusals are gRPC statuses with the REST protocols' messages.
        no_token, unknown, wrong_token, narrow = said["refused"]
        assert "UNAUTHENTICATED" in no_token[0] and "needs a token" in no_token[1]
        assert "NOT_FOUND" in unknown[0] and "no model named 'nope'" in unknown[1]
        assert "UNAUTHENTICATED" in wrong_token[0] and "not this server's" in wrong_token[1]
        assert "INVALID_ARGUMENT" in narrow[0] and "has shape [3, 3]" in narrow[1]
        assert said["large"] == 300_000  # as large as a REST body may be
        # Counted in the server's metrics under their own protocol (each worker counts its
        # own calls; fresh connections land on either).
        metrics = "".join(
            httpx.get(f"{url}/metrics", headers=AUTH, timeout=10).text for _ in range(30)
        )
        assert 'protocol="grpc",status="400"' in metrics


def test_grpc_calls_follow_the_traffic_policy(headwater: Cli, tmp_path: Path) -> None:
    # A canary takes its share of gRPC calls as of REST ones; a request id keeps a client on
    # one version, and a version asked for is the one that answers.
    from headwater.api.models import register_model

    headwater.home.mkdir(parents=True, exist_ok=True)
    metadata = f"sqlite:///{headwater.home / 'metadata.db'}"
    for version in (1, 2):
        model = save_booster(tmp_path / f"artifact-{version}")
        assert register_model("churn", str(model), metadata=metadata).version == version
    port = free_port()
    with serving(headwater, "churn:1", "--canary", "churn:2=50", "--grpc-port", str(port)):
        address = f"127.0.0.1:{port}"
        spread = _client(_VERSIONS, address, "", *(f"client-{i}" for i in range(40)))
        assert set(spread) == {"1", "2"}
        assert len(set(_client(_VERSIONS, address, "", *["one-client"] * 10))) == 1
        assert set(_client(_VERSIONS, address, "2", *(f"c-{i}" for i in range(5)))) == {"2"}


def test_a_deployed_endpoint_serves_grpc_too(
    headwater: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import headwater as api

    monkeypatch.setenv("HEADWATER_HOME", str(headwater.home))
    monkeypatch.delenv("HEADWATER_TOKEN", raising=False)
    model = save_booster(tmp_path / "model")
    port = free_port()
    deployed = api.deploy_model(str(model), name="churn", grpc_port=port)
    try:
        assert deployed.action == "started"
        assert deployed.endpoint.config["grpc_port"] == port
        assert _client(_VERSIONS, f"127.0.0.1:{port}", "", "a") == ["1"]
    finally:
        api.stop_endpoint("churn")


def test_bad_grpc_ports_are_one_line_and_exit_2(headwater: Cli, tmp_path: Path) -> None:
    import socket

    model = save_booster(tmp_path / "model")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        for args, said in [
            (["--grpc-port", "70000"], "--grpc-port must be from 1 to 65535"),
            (["--grpc-port", str(busy)], "choose another --grpc-port"),
            (["--grpc-port", "9090", "--port", "9090"], "is --port too"),
        ]:
            done = headwater("serve", f"churn={model}", *args)
            assert done.returncode == 2, done.describe()
            lines = done.stderr.strip().splitlines()
            assert lines[-1].startswith("headwater: error: ") and said in lines[-1], lines
