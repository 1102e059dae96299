"""One run system: a `headwater server` run is one record that `kfp.Client`, the web UI's JSON API
and `headwater runs` read alike, from the moment it is accepted; runs started in the UI are
queued like any other; deletes agree; a notebook reads back what each task produced.

Real parts only: a `headwater server` subprocess with one run at a time, the stock `kfp.Client`,
httpx against the UI's API, `headwater runs show` as a subprocess; on SQLite and, where
`HEADWATER_TEST_POSTGRES_URL` names a server, on PostgreSQL.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_harness import wait_for
from kfp import compiler
from kfp_server_api.exceptions import ApiException
from postgres_db import BASE_URL, fresh_database
from server_harness import (
    adder,
    held,
    kfp_client,
    made,
    running_server,
    server_env,
    wait_state,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('records') / 'metadata.db'}"
        return
    if not BASE_URL:
        pytest.skip("set HEADWATER_TEST_POSTGRES_URL for the PostgreSQL runs of these tests")
    with fresh_database() as url:
        yield url


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("records-server") / "home"


@pytest.fixture(scope="module")
def server(home: Path, store_url: str) -> Iterator[str]:
    with running_server(home, "--max-concurrent-runs", "1", "--metadata-url", store_url) as base:
        yield base


@pytest.fixture(scope="module")
def client(server: str) -> Any:
    return kfp_client(server)


def headwater_json(home: Path, store_url: str, *args: str) -> Any:
    """`headwater ARGS --json` against the server's store, its JSON answer."""
    done = subprocess.run(
        [sys.executable, "-m", "headwater", *args, "--json"],
        env={**server_env(home), "HEADWATER_METADATA_URL": store_url},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def status(call: Any) -> int:
    with pytest.raises(ApiException) as caught:
        call()
    return int(caught.value.status)


def test_a_queued_run_is_a_run_everywhere_and_cancels_as_one(
    client: Any, server: str, home: Path, store_url: str, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    first = client.create_run_from_pipeline_func(
        held,
        arguments={
            "counter": str(tmp_path / "n"),
            "pid_file": str(tmp_path / "pid"),
            "gate": str(gate),
        },
        run_name="holder",
    ).run_id
    wait_state(client, first, ("RUNNING",))
    queued = client.create_run_from_pipeline_func(
        adder, arguments={"x": 4}, run_name="waiting", experiment_name="queue-test"
    ).run_id
    # KFP, the UI's API and the CLI read one record: queued, named, in its experiment.
    assert client.get_run(queued).state == "PENDING"
    ui = httpx.get(f"{server}/api/v1/runs/{queued}").json()
    assert (ui["state"], ui["display_name"], ui["experiment"]) == (
        "QUEUED",
        "waiting",
        "queue-test",
    )
    shown = headwater_json(home, store_url, "runs", "show", queued)
    assert (shown["state"], shown["display_name"], shown["tasks"]) == ("QUEUED", "waiting", [])
    listed = {r["run_id"]: r["state"] for r in headwater_json(home, store_url, "runs", "list")}
    assert listed[queued] == "QUEUED"
    experiment = client.get_experiment(experiment_name="queue-test")
    in_ui = httpx.get(f"{server}/api/v1/runs", params={"experiment": experiment.experiment_id})
    assert [r["run_id"] for r in in_ui.json()["runs"]] == [queued]
    # A queued run is not deleted (409 both ways); terminated from the UI, it is CANCELED
    # for kfp.Client and the CLI at once, and never starts.
    assert httpx.delete(f"{server}/api/v1/runs/{queued}").status_code == 409
    assert status(lambda: client.delete_run(queued)) == 409
    assert httpx.post(f"{server}/api/v1/runs/{queued}/terminate", json={}).status_code == 200
    assert client.get_run(queued).state == "CANCELED"
    assert headwater_json(home, store_url, "runs", "show", queued)["state"] == "CANCELED"
    gate.write_text("go")
    assert client.wait_for_run_completion(first, 60, sleep_duration=0.1).state == "SUCCEEDED"
    assert client.get_run(queued).state == "CANCELED"
    assert headwater_json(home, store_url, "runs", "show", queued)["tasks"] == []
    # Retried from the UI, it is queued again, and runs.
    assert httpx.post(f"{server}/api/v1/runs/{queued}/retry", json={}).status_code == 200
    assert client.wait_for_run_completion(queued, 60, sleep_duration=0.1).state == "SUCCEEDED"


def test_a_run_started_in_the_ui_is_queued_and_seen_by_kfp(
    client: Any, server: str, tmp_path: Path
) -> None:
    experiment = client.create_experiment("from-the-ui")
    path = tmp_path / "adder.yaml"
    compiler.Compiler().compile(adder, str(path))
    started = httpx.post(
        f"{server}/api/v1/runs",
        json={
            "content": path.read_text(),
            "filename": "adder.yaml",
            "parameters": {"x": 7},
            "display_name": "started in the ui",
            "experiment_id": experiment.experiment_id,
        },
    )
    assert started.status_code == 200, started.text
    run_id = started.json()["run_id"]
    run = client.wait_for_run_completion(run_id, 60, sleep_duration=0.1)
    assert (run.state, run.display_name, run.experiment_id) == (
        "SUCCEEDED",
        "started in the ui",
        experiment.experiment_id,
    )
    assert run.runtime_config.parameters["x"] == 7
    listed = client.list_runs(experiment_id=experiment.experiment_id).runs
    assert [r.run_id for r in listed] == [run_id]
    # From an uploaded version too, and a bad argument is a 400 with nothing queued.
    pipeline = client.upload_pipeline(str(path), pipeline_name="adder-for-the-ui")
    [version] = client.list_pipeline_versions(pipeline.pipeline_id).pipeline_versions
    bad = httpx.post(
        f"{server}/api/v1/runs",
        json={"pipeline_version_id": version.pipeline_version_id, "parameters": {"nope": 1}},
    )
    assert bad.status_code == 400 and "'nope'" in bad.json()["error"]
    assert client.list_runs(experiment_id=experiment.experiment_id).total_size == 1
    by_version = httpx.post(
        f"{server}/api/v1/runs",
        json={"pipeline_version_id": version.pipeline_version_id, "parameters": {"x": 1}},
    ).json()["run_id"]
    run = client.wait_for_run_completion(by_version, 60, sleep_duration=0.1)
    assert run.state == "SUCCEEDED"
    assert run.pipeline_version_reference.pipeline_version_id == version.pipeline_version_id
    assert run.display_name.startswith("adder ")  # named after its pipeline and the time


def test_deletes_from_the_ui_and_from_kfp_agree(
    client: Any, server: str, home: Path, store_url: str
) -> None:
    ids = [
        client.create_run_from_pipeline_func(adder, arguments={"x": 100 + i}).run_id
        for i in range(2)
    ]
    for run_id in ids:
        client.wait_for_run_completion(run_id, 60, sleep_duration=0.1)
    deleted = httpx.delete(f"{server}/api/v1/runs/{ids[0]}")
    assert deleted.status_code == 200
    assert deleted.json() == {"run_id": ids[0], "artifact_uris": []}  # outputs: parameters
    assert status(lambda: client.get_run(ids[0])) == 404
    client.delete_run(ids[1])
    assert httpx.get(f"{server}/api/v1/runs/{ids[1]}").status_code == 404
    for run_id in ids:
        done = subprocess.run(
            [sys.executable, "-m", "headwater", "runs", "show", run_id],
            env={**server_env(home), "HEADWATER_METADATA_URL": store_url},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 2 and "no run" in done.stderr


def test_a_notebook_reads_what_each_task_produced(client: Any, server: str) -> None:
    result = client.create_run_from_pipeline_func(made, arguments={"text": "abc"})
    run = client.wait_for_run_completion(result.run_id, 60, sleep_duration=0.1)
    assert run.state == "SUCCEEDED"
    tasks = {t.display_name: t for t in run.run_details.task_details}
    maker, sizer = tasks["make"], tasks["size"]
    assert set(maker.outputs) == {"data", "model"}
    [data_id] = maker.outputs["data"].artifact_ids
    assert sizer.inputs["data"].artifact_ids == [data_id]
    # The branch not taken: SKIPPED, never started, nothing out; `make` ran, with its times.
    skipped = tasks["add"]
    assert skipped.state == "SKIPPED" and skipped.start_time.year == 1970
    assert not skipped.outputs
    assert maker.start_time.year > 1970 and maker.end_time >= maker.start_time

    def read(node: str, name: str) -> dict[str, bytes]:
        answer = httpx.get(
            f"{server}/apis/v2beta1/runs/{run.run_id}/nodes/{node}/artifacts/{name}:read"
        )
        assert answer.status_code == 200, answer.text
        data = base64.b64decode(answer.json()["data"])
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            return {
                m.name: archive.extractfile(m).read()  # type: ignore[union-attr]
                for m in archive.getmembers()
                if m.isfile()
            }

    assert list(read(maker.task_id, "data").values()) == [b"abc"]
    assert list(read("make", "model").values()) == [b"abcabc"]  # by name, a folder
    assert list(read("size", "data").values()) == [b"abc"]  # an input of that name
    missing = httpx.get(f"{server}/apis/v2beta1/runs/{run.run_id}/nodes/make/artifacts/nope:read")
    assert missing.status_code == 404 and "data, model" in missing.json()["message"]
    # The UI downloads the same artifacts: a file as itself, a folder as a .tar.gz.
    file = httpx.get(f"{server}/api/v1/artifacts/{data_id}/download")
    assert file.status_code == 200 and file.content == b"abc"
    assert 'filename="data"' in file.headers["content-disposition"]
    [model_id] = maker.outputs["model"].artifact_ids
    folder = httpx.get(f"{server}/api/v1/artifacts/{model_id}/download")
    assert folder.headers["content-type"] == "application/gzip"
    with tarfile.open(fileobj=io.BytesIO(folder.content), mode="r:gz") as archive:
        assert archive.getnames() == ["model", "model/weights.txt"]
    # Run again: `make` is a cache hit, SKIPPED as KFP reports one, with its times and the
    # artifacts it reused.
    again = client.create_run_from_pipeline_func(made, arguments={"text": "abc"})
    rerun = client.wait_for_run_completion(again.run_id, 60, sleep_duration=0.1)
    cached = {t.display_name: t for t in rerun.run_details.task_details}["make"]
    assert cached.state == "SKIPPED" and cached.execution_id != "0"
    assert cached.start_time.year > 1970
    assert cached.outputs["data"].artifact_ids == [data_id]


def test_the_task_log_route_serves_a_server_runs_log(client: Any, server: str) -> None:
    run_id = client.create_run_from_pipeline_func(adder, arguments={"x": 2}).run_id
    client.wait_for_run_completion(run_id, 60, sleep_duration=0.1)
    log = httpx.get(f"{server}/api/v1/runs/{run_id}/tasks/add/log")
    assert log.status_code == 200 and log.headers["content-type"].startswith("text/plain")


def test_a_dead_worker_is_found_by_pid_and_start_time_and_its_run_resumed(
    client: Any, home: Path, store_url: str, tmp_path: Path
) -> None:
    import signal

    pid_file, gate = tmp_path / "pid", tmp_path / "gate"
    run_id = client.create_run_from_pipeline_func(
        held,
        arguments={"counter": str(tmp_path / "n"), "pid_file": str(pid_file), "gate": str(gate)},
    ).run_id
    wait_for(lambda: pid_file.exists() and pid_file.read_text() != "", 60, "the held task")
    shown = headwater_json(home, store_url, "runs", "show", run_id)
    assert shown["state"] == "RUNNING"
    worker = _engine_pid(store_url, run_id)
    os.kill(worker, signal.SIGKILL)
    # The task goes with its worker's fork server, which may have stopped it already (on a
    # busy machine, between these two lines): either way it never finishes.
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
    gate.write_text("go")
    # The queue finds the worker gone, and a new worker resumes the run: `count` ran once.
    run = client.wait_for_run_completion(run_id, 90, sleep_duration=0.1)
    assert run.state == "SUCCEEDED"
    assert (tmp_path / "n").read_text() == "x"
    assert _engine_pid(store_url, run_id) != worker


def _engine_pid(url: str, run_id: str) -> int:
    from headwater.metadata.sql import SqlMetadataStore

    with SqlMetadataStore(url) as store:
        found = store.get_run(run_id)
    assert found is not None
    return found.engine_pid


def test_deleting_a_pipeline_keeps_the_version_its_queued_run_needs(
    client: Any, server: str, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    holder = client.create_run_from_pipeline_func(
        held,
        arguments={
            "counter": str(tmp_path / "n"),
            "pid_file": str(tmp_path / "p"),
            "gate": str(gate),
        },
    ).run_id
    wait_state(client, holder, ("RUNNING",))
    path = tmp_path / "adder.yaml"
    compiler.Compiler().compile(adder, str(path))
    pipeline = client.upload_pipeline(str(path), pipeline_name="deleted-while-queued")
    [version] = client.list_pipeline_versions(pipeline.pipeline_id).pipeline_versions
    experiment = client.create_experiment("deleting")
    queued = client.run_pipeline(
        experiment_id=experiment.experiment_id, job_name="queued", pipeline_id=pipeline.pipeline_id,
        version_id=version.pipeline_version_id, params={"x": 5},
    ).run_id  # fmt: skip
    assert client.get_run(queued).state == "PENDING"
    deleted = httpx.delete(f"{server}/apis/v2beta1/pipelines/{pipeline.pipeline_id}?cascade=true")
    assert deleted.status_code == 200, deleted.text
    gate.write_text("go")
    run = client.wait_for_run_completion(queued, 60, sleep_duration=0.1)
    assert run.state == "SUCCEEDED" and run.runtime_config.parameters["x"] == 5
    # Its version is no longer uploaded: the run shows its spec instead of a reference.
    assert run.pipeline_spec is not None and run.pipeline_version_reference is None
