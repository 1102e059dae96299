"""`headwater server` driven by the real `kfp.Client` over HTTP, as a notebook or CI would.

One server (a subprocess on a free loopback port) serves most tests; the SIGKILL test starts
its own. Runs are ordinary Headwater runs: the tests read them back through `headwater.api`.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from cli_harness import process_gone, wait_for
from kfp import compiler
from kfp_server_api.exceptions import ApiException
from server_harness import (
    adder,
    flaky,
    held,
    kfp_client,
    looped,
    running_server,
    server_env,
    start_server,
    stop,
    wait_state,
    with_secret,
)

from headwater.api.runs import get_run as headwater_run

pytestmark = pytest.mark.integration

FINAL = ("SUCCEEDED", "FAILED", "SKIPPED", "ERROR")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("server") / "home"


@pytest.fixture(scope="module")
def server(home: Path) -> Iterator[str]:
    with running_server(home, "--max-concurrent-runs", "4") as base:
        yield base


@pytest.fixture(scope="module")
def client(server: str) -> Any:
    return kfp_client(server)


def metadata_url(home: Path) -> str:
    return f"sqlite:///{home / 'metadata.db'}"


def package(tmp_path: Path, pipeline: Any) -> str:
    path = tmp_path / f"{pipeline.name}.yaml"
    compiler.Compiler().compile(pipeline, str(path))
    return str(path)


def api_error(call: Any) -> tuple[int, dict[str, Any]]:
    """The status and KFP error body of a call that must fail."""
    with pytest.raises(ApiException) as caught:
        call()
    return caught.value.status, json.loads(caught.value.body)


def test_a_run_from_a_pipeline_function_is_an_ordinary_headwater_run(
    client: Any, home: Path
) -> None:
    assert client.get_kfp_healthz().multi_user is False
    result = client.create_run_from_pipeline_func(
        adder, arguments={"x": 5}, experiment_name="first"
    )
    run = client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.1)
    assert run.state == "SUCCEEDED"
    assert run.runtime_config.parameters == {"x": 5}
    tasks = {t.display_name: t for t in run.run_details.task_details}
    assert set(tasks) == {"add", "add-2"}
    assert all(t.state == "SUCCEEDED" and t.end_time >= t.start_time for t in tasks.values())
    # The same run in Headwater's own store, under the same id, with its outputs.
    recorded = headwater_run(result.run_id, metadata=metadata_url(home))
    assert recorded.state == "SUCCEEDED" and recorded.parameters == {"x": 5}
    assert {t.name: t.outputs for t in recorded.tasks}["add-2"]["Output"] == 17
    experiment = client.get_experiment(experiment_name="first")
    assert run.experiment_id == experiment.experiment_id


def test_loop_iterations_are_child_tasks_of_their_loop(client: Any) -> None:
    result = client.create_run_from_pipeline_func(looped)
    run = client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.1)
    tasks = {t.display_name: t for t in run.run_details.task_details}
    assert set(tasks) == {"add", "add[0]", "add[1]"}
    loop = tasks["add"]
    assert loop.state == "SUCCEEDED"
    assert {c.task_id for c in loop.child_tasks} == {
        tasks["add[0]"].task_id,
        tasks["add[1]"].task_id,
    }
    assert tasks["add[0]"].parent_task_id == loop.task_id


def test_experiments_create_get_list_archive_delete(client: Any) -> None:
    made = client.create_experiment("exp-crud", description="d")
    assert client.create_experiment("exp-crud").experiment_id == made.experiment_id
    assert client.get_experiment(experiment_id=made.experiment_id).description == "d"
    names = [e.display_name for e in client.list_experiments(page_size=100).experiments]
    assert "exp-crud" in names
    client.archive_experiment(made.experiment_id)
    assert client.get_experiment(experiment_id=made.experiment_id).storage_state == "ARCHIVED"
    client.unarchive_experiment(made.experiment_id)
    assert client.get_experiment(experiment_id=made.experiment_id).storage_state == "AVAILABLE"
    client.delete_experiment(made.experiment_id)
    status, body = api_error(lambda: client.get_experiment(experiment_id=made.experiment_id))
    assert status == 404 and body["code"] == 5 and made.experiment_id in body["message"]


def test_upload_a_pipeline_and_run_its_versions(client: Any, server: str, tmp_path: Path) -> None:
    path = package(tmp_path, adder)
    pipeline = client.upload_pipeline(path, pipeline_name="adder-upload")
    assert client.get_pipeline_id("adder-upload") == pipeline.pipeline_id
    by_name = httpx.get(f"{server}/apis/v2beta1/pipelines/names/adder-upload").json()
    assert by_name["pipeline_id"] == pipeline.pipeline_id
    [version] = client.list_pipeline_versions(pipeline.pipeline_id).pipeline_versions
    uploaded = yaml.safe_load(Path(path).read_text())
    # The spec comes back exactly as it was uploaded (the KFP UI draws the graph from it).
    got = client.get_pipeline_version(pipeline.pipeline_id, version.pipeline_version_id)
    assert got.pipeline_spec == uploaded
    status, body = api_error(lambda: client.upload_pipeline(path, pipeline_name="adder-upload"))
    assert status == 409 and "adder-upload" in body["message"]

    second = client.upload_pipeline_version(
        path, pipeline_version_name="v2", pipeline_id=pipeline.pipeline_id
    )
    experiment = client.create_experiment("versions")
    run = client.run_pipeline(
        experiment_id=experiment.experiment_id,
        job_name="from a version",
        pipeline_id=pipeline.pipeline_id,
        version_id=second.pipeline_version_id,
        params={"x": 1},
    )
    done = client.wait_for_run_completion(run.run_id, timeout=60, sleep_duration=0.1)
    assert done.state == "SUCCEEDED"
    assert done.pipeline_version_reference.pipeline_version_id == second.pipeline_version_id
    status, _ = api_error(lambda: client.delete_pipeline(pipeline.pipeline_id))
    assert status == 409  # it has versions
    client.delete_pipeline_version(pipeline.pipeline_id, second.pipeline_version_id)
    httpx.delete(
        f"{server}/apis/v2beta1/pipelines/{pipeline.pipeline_id}", params={"cascade": "true"}
    ).raise_for_status()
    assert api_error(lambda: client.get_pipeline(pipeline.pipeline_id))[0] == 404


def test_list_runs_pages_sorts_and_filters(client: Any) -> None:
    experiment = client.create_experiment("listing")
    ids = [
        client.create_run_from_pipeline_func(
            adder, arguments={"x": i}, run_name=f"list-{i}", experiment_name="listing"
        ).run_id
        for i in range(3)
    ]
    first = client.list_runs(experiment_id=experiment.experiment_id, page_size=2)
    assert first.total_size == 3 and len(first.runs) == 2 and first.next_page_token
    second = client.list_runs(
        experiment_id=experiment.experiment_id, page_size=2, page_token=first.next_page_token
    )
    assert {r.run_id for r in first.runs + second.runs} == set(ids)
    by_name = client.list_runs(
        experiment_id=experiment.experiment_id, sort_by="display_name desc", page_size=10
    )
    assert [r.display_name for r in by_name.runs] == ["list-2", "list-1", "list-0"]
    wanted = json.dumps(
        {"predicates": [{"operation": 9, "key": "display_name", "stringValue": "list-1"}]}
    )
    found = client.list_runs(experiment_id=experiment.experiment_id, filter=wanted)
    assert [r.run_id for r in found.runs] == [ids[1]]
    for run_id in ids:
        client.wait_for_run_completion(run_id, timeout=60, sleep_duration=0.1)


def test_a_failing_run_fails_and_retry_resumes_it(client: Any, tmp_path: Path) -> None:
    counter, marker = tmp_path / "count", tmp_path / "marker"
    result = client.create_run_from_pipeline_func(
        flaky, arguments={"counter": str(counter), "marker": str(marker)}
    )
    run = client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.1)
    assert run.state == "FAILED" and "no marker" in run.error.message
    states = {t.display_name: t.state for t in run.run_details.task_details}
    assert states == {"count": "SUCCEEDED", "need": "FAILED"}
    marker.write_text("")
    client.runs.run_service_retry_run(result.run_id)
    run = client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.1)
    assert run.state == "SUCCEEDED"
    assert counter.read_text() == "x"  # the finished task was reused, not run again
    status, body = api_error(lambda: client.runs.run_service_retry_run(result.run_id))
    assert status == 409 and "SUCCEEDED" in body["message"]


def test_a_run_that_cannot_start_fails_with_the_reason(client: Any, tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    result = client.create_run_from_pipeline_func(
        adder, arguments={"x": 1}, pipeline_root=str(blocked / "root")
    )
    run = client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.1)
    assert run.state == "FAILED" and str(blocked) in run.error.message
    assert run.run_details.task_details == []  # nothing ran


def test_terminate_stops_the_task_process(client: Any, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    result = client.create_run_from_pipeline_func(
        held,
        arguments={
            "counter": str(tmp_path / "c"),
            "pid_file": str(pid_file),
            "gate": str(tmp_path / "never"),
        },
    )
    wait_for(lambda: pid_file.exists() and pid_file.read_text() != "", 60, "the task to start")
    task_pid = int(pid_file.read_text())
    client.terminate_run(result.run_id)
    run = wait_state(client, result.run_id, ("CANCELED",), timeout=30)
    assert run.state == "CANCELED"
    wait_for(lambda: process_gone(task_pid), 10, "the task process to end")
    assert api_error(lambda: client.terminate_run(result.run_id))[0] == 409
    # Archive, unarchive and delete (a Headwater run too).
    client.archive_run(result.run_id)
    assert client.get_run(result.run_id).storage_state == "ARCHIVED"
    client.unarchive_run(result.run_id)
    assert client.get_run(result.run_id).storage_state == "AVAILABLE"
    client.delete_run(result.run_id)
    assert api_error(lambda: client.get_run(result.run_id))[0] == 404


def test_bad_input_is_400_unknown_ids_404_and_the_rest_501(client: Any, server: str) -> None:
    status, body = api_error(
        lambda: client.runs.run_service_create_run(
            {"display_name": "bad", "pipeline_spec": {"not": "ir"}}
        )
    )
    assert status == 400 and body["code"] == 3 and "PipelineSpec" in body["message"]
    status, body = api_error(
        lambda: client.create_run_from_pipeline_func(adder, arguments={"nope": 1})
    )
    assert status == 400 and "'nope'" in body["message"]
    status, body = api_error(
        lambda: client.create_run_from_pipeline_func(adder, arguments={"x": "five"})
    )
    assert status == 400 and "x" in body["message"]
    for call in (
        lambda: client.get_run("no-such-run"),
        lambda: client.get_pipeline("no-such-pipeline"),
        lambda: client.get_experiment(experiment_id="no-such-experiment"),
    ):
        status, body = api_error(call)
        assert status == 404 and body["code"] == 5
    bad_filter = httpx.get(f"{server}/apis/v2beta1/runs", params={"filter": "{nope"})
    assert bad_filter.status_code == 400 and "filter" in bad_filter.json()["message"]
    # A body a page of another site could send without asking first (ADR 19).
    plain = httpx.post(
        f"{server}/apis/v2beta1/experiments",
        content='{"display_name": "from a page"}',
        headers={"Content-Type": "text/plain"},
    )
    assert plain.status_code == 415 and plain.json()["code"] == 3
    missing = httpx.post(f"{server}/apis/v2beta1/runs/x:pause")
    assert missing.status_code == 501
    assert missing.json() == {
        "code": 12,
        "message": missing.json()["message"],
        "details": [],
    }
    assert "POST /apis/v2beta1/runs/x:pause" in missing.json()["message"]
    # The web UI and its API share the port.
    assert httpx.get(f"{server}/api/v1/runs").status_code == 200
    assert httpx.get(f"{server}/").status_code == 200


def test_namespaces_are_recorded_and_lists_filter_by_them(client: Any, server: str) -> None:
    exp = client.create_experiment("team-a-exp", namespace="team-a")
    assert exp.namespace == "team-a"
    result = client.create_run_from_pipeline_func(
        adder, arguments={"x": 2}, experiment_name="team-a-exp", namespace="team-a"
    )
    runs = client.list_runs(namespace="team-a").runs
    assert [r.run_id for r in runs] == [result.run_id]
    others = client.list_runs(namespace="team-b")
    assert others.runs is None and others.total_size == 0
    names = [e.display_name for e in client.list_experiments(namespace="team-a").experiments]
    assert names == ["team-a-exp"]
    client.wait_for_run_completion(result.run_id, timeout=60, sleep_duration=0.1)


def test_concurrent_clients_are_all_accepted_and_all_run(server: str) -> None:
    run_ids: list[str] = []
    errors: list[BaseException] = []

    def submit(n: int) -> None:
        try:
            c = kfp_client(server)
            for i in range(2):
                r = c.create_run_from_pipeline_func(
                    adder, arguments={"x": n * 10 + i}, experiment_name="crowd"
                )
                run_ids.append(r.run_id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [getattr(e, "body", e) for e in errors] == []
    assert len(set(run_ids)) == 8
    c = kfp_client(server)
    for run_id in run_ids:
        assert c.wait_for_run_completion(run_id, timeout=120, sleep_duration=0.2).state == (
            "SUCCEEDED"
        )


def test_a_recurring_run_fires_until_disabled(client: Any, server: str, tmp_path: Path) -> None:
    experiment = client.create_experiment("recurring")
    recurring = client.create_recurring_run(
        experiment_id=experiment.experiment_id,
        job_name="every second",
        pipeline_package_path=package(tmp_path, adder),
        params={"x": 4},
        interval_second=1,
        max_concurrency=1,
    )
    rid = recurring.recurring_run_id
    fetched = client.get_recurring_run(rid)
    assert fetched.status == "ENABLED" and fetched.trigger.periodic_schedule.interval_second == "1"
    listed = httpx.get(
        f"{server}/apis/v2beta1/recurringruns", params={"experiment_id": experiment.experiment_id}
    ).json()
    assert [r["recurring_run_id"] for r in listed["recurringRuns"]] == [rid]

    def made() -> list[Any]:
        return client.list_runs(experiment_id=experiment.experiment_id, page_size=100).runs or []

    wait_for(lambda: len(made()) >= 2, 60, "the recurring run to fire twice")
    client.disable_recurring_run(rid)
    assert client.get_recurring_run(rid).status == "DISABLED"
    fired = made()
    assert {r.recurring_run_id for r in fired} == {rid}
    for run in fired:
        assert wait_state(client, run.run_id, ("SUCCEEDED",)).runtime_config.parameters == {"x": 4}
    assert len(made()) == len(fired)  # nothing fires while disabled
    client.delete_recurring_run(rid)
    assert api_error(lambda: client.get_recurring_run(rid))[0] == 404
    status, body = api_error(
        lambda: client.create_recurring_run(
            experiment_id=experiment.experiment_id,
            job_name="bad",
            pipeline_package_path=package(tmp_path, adder),
            cron_expression="61 * * * * *",
        )
    )
    assert status == 400 and "second" in body["message"]


def test_kubernetes_settings_from_kfp_client_reach_the_tasks(
    client: Any, home: Path, tmp_path: Path
) -> None:
    """kfp.Client sends a package's platform spec beside its IR (`{"platforms": ...}`), and an
    upload carries it as a second document: the secret reaches the task from an inline
    spec, an uploaded version and a recurring run of that version alike."""
    password = "s3cr3t-for-the-server"
    stored = subprocess.run(
        [sys.executable, "-m", "headwater", "secrets", "set", "db", f"password={password}"],
        env=server_env(home),
        capture_output=True,
        text=True,
    )
    assert stored.returncode == 0, stored.stderr
    digest = hashlib.sha256(password.encode()).hexdigest()[:12]
    path = package(tmp_path, with_secret)
    assert len(list(yaml.safe_load_all(Path(path).read_text()))) == 2  # IR, platform spec

    inline = client.create_run_from_pipeline_package(path, experiment_name="secrets").run_id
    pipeline = client.upload_pipeline(path, pipeline_name="with-secret-upload")
    [version] = client.list_pipeline_versions(pipeline.pipeline_id).pipeline_versions
    experiment = client.get_experiment(experiment_name="secrets")
    uploaded = client.run_pipeline(
        experiment_id=experiment.experiment_id,
        job_name="uploaded",
        pipeline_id=pipeline.pipeline_id,
        version_id=version.pipeline_version_id,
    ).run_id
    recurring = client.create_recurring_run(
        experiment_id=experiment.experiment_id,
        job_name="recurring",
        pipeline_id=pipeline.pipeline_id,
        version_id=version.pipeline_version_id,
        interval_second=1,
        max_concurrency=1,
    ).recurring_run_id

    def fired() -> list[Any]:
        runs = client.list_runs(experiment_id=experiment.experiment_id, page_size=100).runs
        return [r for r in runs or [] if r.recurring_run_id == recurring]

    wait_for(lambda: bool(fired()), 60, "the recurring run to fire")
    client.disable_recurring_run(recurring)
    for run_id in (inline, uploaded, fired()[0].run_id):
        assert wait_state(client, run_id, FINAL).state == "SUCCEEDED", run_id
        recorded = headwater_run(run_id, metadata=metadata_url(home))
        assert {t.name: t.outputs for t in recorded.tasks}["password-digest"]["Output"] == digest
    client.delete_recurring_run(recurring)


def _worker_pid(home: Path, run_id: str) -> int:
    db = sqlite3.connect(home / "metadata.db")
    try:
        query = "SELECT engine_pid FROM runs WHERE run_id = ?"
        (pid,) = db.execute(query, (run_id,)).fetchone()
    finally:
        db.close()
    return int(pid)


def test_a_sigkilled_server_loses_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proc, base = start_server(home, "--max-concurrent-runs", "1", "--token", "s3cret")
    restarted: subprocess.Popen[Any] | None = None
    task_pid = 0
    try:
        assert httpx.get(f"{base}/apis/v2beta1/healthz").status_code == 200  # says nothing
        assert httpx.get(f"{base}/apis/v2beta1/runs").status_code == 401
        client = kfp_client(base, existing_token="s3cret")
        pid_file, gate, counter = tmp_path / "pid", tmp_path / "gate", tmp_path / "count"
        first = client.create_run_from_pipeline_func(
            held,
            arguments={"counter": str(counter), "pid_file": str(pid_file), "gate": str(gate)},
        ).run_id
        queued = client.create_run_from_pipeline_func(adder, arguments={"x": 1}).run_id
        wait_for(lambda: pid_file.exists() and pid_file.read_text() != "", 60, "the task")
        task_pid = int(pid_file.read_text())
        assert client.get_run(queued).state == "PENDING"  # one at a time
        # The server dies, and its run's worker and task with it (a machine crash).
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        os.kill(_worker_pid(home, first), signal.SIGKILL)
        os.kill(task_pid, signal.SIGKILL)
        wait_for(lambda: process_gone(task_pid), 10, "the task to die")
        gate.write_text("")
        restarted, base = start_server(
            home,
            "--max-concurrent-runs",
            "1",
            "--token",
            "s3cret",
            port=int(base.rsplit(":", 1)[1]),
        )
        client = kfp_client(base, existing_token="s3cret")
        for run_id in (first, queued):
            run = client.wait_for_run_completion(run_id, timeout=90, sleep_duration=0.2)
            assert run.state == "SUCCEEDED", run.error
        assert counter.read_text() == "x"  # the first task finished before the crash: reused
    finally:
        for p in (proc, restarted):
            if p is not None:
                stop(p)
        if task_pid and not process_gone(task_pid):
            os.kill(task_pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--host", "0.0.0.0"], "without a token"),
        (["--max-concurrent-runs", "0"], "--max-concurrent-runs must be at least 1"),
        (["--executor", "ray"], "--executor must be local or dask"),
        (["--scheduler", "tcp://x:8786"], "--scheduler needs --executor dask"),
        (["--lease-seconds", "1"], "--lease-seconds must be from 3 to 3600"),
        (["HEADWATER_TASK_LOG_LIMIT=100"], "HEADWATER_TASK_LOG_LIMIT='100' is not"),
        (["--max-request-mb", "inf"], "--max-request-mb must be a positive number of MiB"),
        (["--max-request-mb", "1e-9"], "at least one byte), got 1e-09"),
        (["HEADWATER_CONTAINERS=sometimes"], "HEADWATER_CONTAINERS='sometimes' is not one of"),
        # (The suite's own default is never: these runs ask for containers.)
        (["--containers", "auto", "HEADWATER_CONTAINER_RUNTIME=nerdctl"], "runtime 'nerdctl'"),
        (["--containers", "auto", "HEADWATER_CONTAINER_ARGS=--label 'open"], "_ARGS="),
    ],
    ids=[
        "open-host",
        "zero-runs",
        "executor",
        "scheduler",
        "lease",
        "log-limit",
        "inf",
        "tiny",
        "containers",
        "runtime",
        "container-args",
    ],
)
def test_bad_server_options_are_one_line_and_exit_2(
    tmp_path: Path, args: list[str], named: str
) -> None:
    settings = dict(a.split("=", 1) for a in args if a.startswith("HEADWATER_"))
    args = [a for a in args if not a.startswith("HEADWATER_")]
    done = subprocess.run(
        [sys.executable, "-m", "headwater", "server", "--port", "1", *args],
        env={**server_env(tmp_path / "home"), **settings},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert named in line
