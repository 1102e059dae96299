"""`headwater serve --grpc-port`: the Open Inference Protocol over gRPC, driven by the clients
people use, Triton's (`tritonclient.grpc`) and KServe's (`kserve.InferenceGRPCClient`, in a
process of its own: its compiled messages and Triton's cannot share one), against a real
`headwater serve` subprocess with two workers and a token."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_harness import Cli
from test_serve_cli import free_port, save_booster, serving

grpcclient = pytest.importorskip("tritonclient.grpc")
xgb = pytest.importorskip("xgboost")
httpx = pytest.importorskip("httpx")

import grpc  # noqa: E402
import numpy as np  # noqa: E402
from tritonclient.grpc import service_pb2 as pb  # noqa: E402
from tritonclient.grpc import service_pb2_grpc as pb_grpc  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

pytestmark = pytest.mark.integration

TOKEN = "s3cret"
AUTH = {"authorization": f"Bearer {TOKEN}"}

_KSERVE = """
import asyncio, json, sys
import numpy as np
from kserve import InferenceGRPCClient, InferInput, InferRequest

async def main():
    client = InferenceGRPCClient(sys.argv[1])
    rows = np.asarray(json.loads(sys.argv[2]), dtype=np.float32)
    tensor = InferInput("input-0", list(rows.shape), "FP32")
    tensor.set_data_from_numpy(rows, binary_data=True)
    answer = await client.infer(
        InferRequest(model_name="churn", infer_inputs=[tensor]),
        headers=(("authorization", "Bearer " + sys.argv[3]),),
    )
    print(json.dumps(answer.outputs[0].as_numpy().tolist()))

asyncio.run(main())
"""


def test_grpc_clients_infer_as_over_rest(headwater: Cli, tmp_path: Path) -> None:
    model = save_booster(tmp_path / "model")
    from headwater.models import xgboost_file

    rows = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    expected = xgboost_file.load(str(model)).inplace_predict(rows)
    port = free_port()
    args = (f"churn={model}", "--grpc-port", str(port), "--workers", "2", "--token", TOKEN)
    with serving(headwater, *args) as (url, log):
        assert f"gRPC on 127.0.0.1:{port}" in log.read_text()
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
        assert client.is_server_live() and client.is_server_ready()  # open, as REST's
        meta = client.get_model_metadata("churn", headers=AUTH, as_json=True)
        assert meta["platform"] == "xgboost" and meta["inputs"][0]["shape"] == ["-1", "4"]
        # Triton's client sends raw_input_contents and reads raw_output_contents.
        tensor = grpcclient.InferInput("input-0", [3, 4], "FP32")
        tensor.set_data_from_numpy(rows)
        answer = client.infer("churn", [tensor], headers=AUTH)
        assert answer.get_response().model_version == "1"
        np.testing.assert_allclose(answer.as_numpy("predict"), expected, rtol=1e-6)
        # Typed contents, as other clients send them.
        stub = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
        typed = pb.ModelInferRequest(model_name="churn")
        typed.inputs.add(name="input-0", datatype="FP32", shape=[3, 4]).contents.fp32_contents[
            :
        ] = rows.ravel().tolist()
        found = stub.ModelInfer(typed, metadata=tuple(AUTH.items()))
        values = np.frombuffer(found.raw_output_contents[0], dtype="<f4")
        np.testing.assert_allclose(values, expected, rtol=1e-6)
        # KServe's client, in a process of its own.
        done = subprocess.run(
            [sys.executable, "-c", _KSERVE, f"127.0.0.1:{port}", json.dumps(rows.tolist()), TOKEN],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        np.testing.assert_allclose(json.loads(done.stdout), expected, rtol=1e-6)
        # Refusals are gRPC statuses with the REST protocols' messages.
        for call, code, said in [
            (lambda: client.infer("churn", [tensor]), "UNAUTHENTICATED", "needs a token"),
            (lambda: client.infer("nope", [tensor], headers=AUTH), "NOT_FOUND", "no model"),
            (lambda: client.is_model_ready("churn", headers={"authorization": "Bearer x"}),
             "UNAUTHENTICATED", "not this server's"),
        ]:  # fmt: skip
            with pytest.raises(InferenceServerException) as caught:
                call()
            assert code in str(caught.value.status()) and said in caught.value.message()
        narrow = grpcclient.InferInput("input-0", [3, 3], "FP32")
        narrow.set_data_from_numpy(rows[:, :3].copy())
        with pytest.raises(InferenceServerException) as caught:
            client.infer("churn", [narrow], headers=AUTH)
        assert "INVALID_ARGUMENT" in str(caught.value.status())
        assert "has shape [3, 3]" in caught.value.message()
        # Counted in the server's metrics under their own protocol (each worker counts its
        # own calls; fresh connections land on either).
        metrics = "".join(
            httpx.get(f"{url}/metrics", headers=AUTH, timeout=10).text for _ in range(30)
        )
        assert 'protocol="grpc",status="400"' in metrics


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
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
        rows = np.zeros((1, 4), dtype=np.float32)
        tensor = grpcclient.InferInput("input-0", [1, 4], "FP32")
        tensor.set_data_from_numpy(rows)
        assert client.infer("churn", [tensor]).as_numpy("predict").shape == (1,)
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
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
        tensor = grpcclient.InferInput("input-0", [1, 4], "FP32")
        tensor.set_data_from_numpy(np.zeros((1, 4), dtype=np.float32))

        def version(**kwargs: object) -> str:
            answer = client.infer("churn", [tensor], **kwargs)  # type: ignore[arg-type]
            return str(answer.get_response().model_version)

        spread = {version(headers={"x-request-id": f"client-{i}"}) for i in range(40)}
        assert spread == {"1", "2"}
        sticky = {version(headers={"x-request-id": "one-client"}) for _ in range(10)}
        assert len(sticky) == 1
        assert {version(model_version="2") for _ in range(5)} == {"2"}
