"""Task processes as the local executor runs them: what a task starts ends with it.

Every run is the real CLI in a subprocess (the `headwater` fixture); the pipelines live in
`pipelines/task_*.py`. Waits poll for their condition.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_harness import (
    Cli,
    build_wheel,
    kill_leftovers,
    one_line,
    pipeline,
    process_gone,
    run_failed,
    run_ok,
    task_states,
    wait_for,
)
from s3_server import S3Server

pytestmark = pytest.mark.integration

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="child subreapers are a Linux feature"
)

LEFTOVERS = ("background.pid", "session.pid", "orphan.pid", "daemon.pid")


def recorded_pids(scratch: Path) -> dict[str, int]:
    return {name: int((scratch / name).read_text()) for name in LEFTOVERS}


def kill_all(pids: dict[str, int]) -> None:
    for pid in pids.values():
        if not process_gone(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@linux_only
def test_what_a_task_started_ends_with_the_task(headwater: Cli, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    pids: dict[str, int] = {}
    try:
        cli = headwater.run("task_leftovers", params={"scratch": scratch})
        pids = recorded_pids(scratch)
        # `check-gone` ran after `leave-behind` ended, while the engine still ran: it found
        # every process the first task left behind already gone.
        result = run_ok(cli)
        assert result["outputs"]["Output"] == "all-gone"
        for name, pid in pids.items():
            wait_for(lambda pid=pid: process_gone(pid), 10, f"{name} ({pid}) to end")
    finally:
        kill_all(pids)


@linux_only
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_what_a_task_started_ends_when_the_run_is_stopped(
    headwater: Cli, tmp_path: Path, sig: signal.Signals
) -> None:
    scratch = tmp_path / "scratch"
    args = ["run", pipeline("task_leftovers"), "--param", f"scratch={scratch}"]
    args += ["--param", "linger=true"]
    proc = headwater.popen(*args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pids: dict[str, int] = {}
    try:
        wait_for((scratch / "ready").is_file, 30, "the task to start its processes")
        pids = recorded_pids(scratch)
        pids["task"] = int((scratch / "ready").read_text())
        assert not any(process_gone(pid) for pid in pids.values())

        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=30)

        assert proc.returncode != 0, stderr
        assert "Traceback" not in stderr
        for name, pid in pids.items():
            wait_for(lambda pid=pid: process_gone(pid), 10, f"{name} ({pid}) to end")
    finally:
        kill_leftovers(proc)
        kill_all(pids)


# --- packages_to_install ---------------------------------------------------------------------


def test_installed_packages_reach_the_task_subprocesses(headwater: Cli, tmp_path: Path) -> None:
    headwater.env["HEADWATER_TEST_WHEEL"] = str(build_wheel(tmp_path / "wheels", "sub-7f3a"))

    result = run_ok(headwater.run("task_pkg_subprocess", "--install-packages"))

    value, _, module_file = result["outputs"]["Output"].partition(" ")
    assert value == "sub-7f3a"
    (env,) = [p for p in (headwater.home / "envs").iterdir() if p.is_dir()]
    # The component's own subprocess imported it from the environment Headwater installed.
    assert Path(module_file).is_relative_to(env), module_file


# --- accelerators ----------------------------------------------------------------------------

no_gpu = pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has GPUs")


def warnings_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("headwater: warning:")]


@no_gpu
def test_accelerator_task_runs_without_a_gpu_after_one_warning(headwater: Cli) -> None:
    params = {"gpu_type": "example.com/tpu-v9", "gpus": "2"}

    cli = headwater.run("task_gpu", params=params)

    result = run_ok(cli)
    assert result["outputs"]["Output"] == "<unset>"
    (warning,) = warnings_of(cli.stderr)
    # The type is the resolved parameter, not its placeholder.
    assert "task 'wants-gpu' requests 2 accelerator(s) of type 'example.com/tpu-v9'" in warning
    assert "has none: running it without" in warning
    assert "--strict-resources" in warning


@no_gpu
def test_accelerator_task_is_refused_without_a_gpu_when_strict(headwater: Cli) -> None:
    cli = headwater.run("task_gpu", "--strict-resources", params={"gpu_type": "example.com/x"})

    result = run_failed(cli)
    assert task_states(result) == {"wants-gpu": "FAILED"}
    error = result["tasks"][0]["error"]
    assert error["error_type"] == "ResourceError"
    assert "1 accelerator(s) of type 'example.com/x' (it has 0)" in error["message"]
    assert not warnings_of(cli.stderr)


def test_accelerator_task_gets_what_there_is_on_a_machine_with_fewer_gpus(
    headwater: Cli,
) -> None:
    # Two visible devices, as CUDA_VISIBLE_DEVICES would show a machine with two GPUs.
    headwater.env["CUDA_VISIBLE_DEVICES"] = "0,1"

    cli = headwater.run("task_gpu", params={"gpus": "3"})

    result = run_ok(cli)
    assert result["outputs"]["Output"] == "0,1"
    (warning,) = warnings_of(cli.stderr)
    assert "requests 3 accelerator(s) of type 'nvidia.com/gpu'" in warning
    assert "has 2: running it with those 2" in warning

    strict = run_failed(headwater.run("task_gpu", "--strict-resources", params={"gpus": "3"}))
    assert "(it has 2)" in strict["tasks"][0]["error"]["message"]


# --- streaming task output -------------------------------------------------------------------

#: Runs the CLI in this interpreter and, at exit, writes its peak resident memory (VmHWM, kB).
PEAK_RSS_WRAPPER = """
import atexit, runpy, sys

def report(path=sys.argv[1]):
    with open("/proc/self/status") as f:
        peak = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
    with open(path, "w") as f:
        f.write(peak)

atexit.register(report)
sys.argv = ["headwater", *sys.argv[2:]]
runpy.run_module("headwater", run_name="__main__", alter_sys=True)
"""


def verbose_run_peak_rss(cli: Cli, tmp_path: Path, megabytes: int) -> tuple[int, Path]:
    """Run task_chatty with -v, its log uncapped; return (peak RSS of the CLI process in bytes,
    its stderr file)."""
    peak_file = tmp_path / f"peak-{megabytes}.txt"
    stderr_file = tmp_path / f"stderr-{megabytes}.txt"
    argv = [sys.executable, "-c", PEAK_RSS_WRAPPER, str(peak_file), "run", "-v"]
    argv += [pipeline("task_chatty"), "--param", f"megabytes={megabytes}"]
    with stderr_file.open("wb") as err:
        proc = subprocess.run(
            argv,
            stdout=subprocess.PIPE,
            stderr=err,
            env={**cli.env, "HEADWATER_TASK_LOG_LIMIT": "0"},
            cwd=cli.cwd,
            timeout=300,
        )
    assert proc.returncode == 0, stderr_file.read_bytes()[-2000:]
    return int(peak_file.read_text()) * 1024, stderr_file


def last_lines(path: Path, size: int = 4096) -> list[str]:
    with path.open("rb") as fh:
        fh.seek(max(0, path.stat().st_size - size))
        return fh.read().decode("utf-8", "replace").splitlines()


@linux_only
def test_verbose_streams_a_large_log_in_bounded_memory(headwater: Cli, tmp_path: Path) -> None:
    small, _ = verbose_run_peak_rss(headwater, tmp_path, 1)
    large, stderr_file = verbose_run_peak_rss(headwater, tmp_path, 150)

    # Every line came through, in order, each prefixed by its task's name.
    tail = last_lines(stderr_file)
    assert "chatty | chatty-done" in tail
    last_numbered = [line for line in tail if line.startswith("chatty | line ")][-1]
    assert last_numbered.startswith(f"chatty | line {150 * 10_000 - 1:012d} ")
    assert stderr_file.stat().st_size > 150 * 10**6
    # 150 MB went through the CLI; its memory grew by a small fraction of that, at most.
    assert large - small < 40 * 2**20, f"peak RSS {small / 2**20:.0f} -> {large / 2**20:.0f} MiB"


def test_a_task_log_keeps_its_start_and_end_under_its_cap(headwater: Cli) -> None:
    capped = headwater._replace(env={**headwater.env, "HEADWATER_TASK_LOG_LIMIT": str(2**20)})
    result = capped.run_ok("task_chatty", params={"megabytes": 20})  # 20 MB through 1 MiB
    [task] = capped.show(result["run_id"])["tasks"]
    log = Path(task["log_path"])
    assert log.stat().st_size <= 2**20
    text = log.read_text()
    head, marker, tail = text.partition("===== headwater: ")
    assert f"line {0:012d} " in head and "chatty-done" in tail  # how it began, how it ended
    assert marker and re.match(r"[0-9,]+ bytes of output cut here", tail)
    assert f"line {199_999:012d} " in tail and f"line {100_000:012d} " not in text

    bad = headwater._replace(env={**headwater.env, "HEADWATER_TASK_LOG_LIMIT": "100"})
    error = one_line(bad.run("task_chatty"))
    assert "HEADWATER_TASK_LOG_LIMIT='100'" in error and "4096 or more" in error


# --- output artifacts at the URI or path the component chose -----------------------------------

#: Task -> output -> (what its recorded URI ends with, the bytes there).
CHOSEN = {
    "gen-data": {"Output": ("/gen-data/data", b"some data")},
    "split": {"first": ("/split/first", b"some"), "second": ("/split/second", b"data")},
    "make-piece[0]": {"Output": ("/piece", b"Hel")},
    "make-piece[1]": {"Output": ("/piece", b"lo")},
    # A custom path, and a URI outside the root: the bytes are copied to the assigned URI.
    "custom-path": {"out": ("/custom-path/out", b"custom bytes")},
    "outside-root": {"Output": ("/outside-root/Output", b"outside bytes")},
}


def check_chosen_uris(shown: dict[str, Any], root: str, read: Callable[[str], bytes]) -> None:
    outputs = {t["name"]: t["artifacts"]["outputs"] for t in shown["tasks"]}
    for task, expected in CHOSEN.items():
        assert set(outputs[task]) == set(expected), (task, outputs[task])
        for name, (suffix, content) in expected.items():
            (uri,) = outputs[task][name]
            assert uri.startswith(root.rstrip("/") + "/"), (task, name, uri)
            assert uri.endswith(suffix), (task, name, uri)
            assert read(uri) == content, (task, name, uri)
    pieces = [outputs[f"make-piece[{i}]"]["Output"][0] for i in range(2)]
    assert len(set(pieces)) == 2, pieces


def test_artifact_uris_chosen_by_the_component_on_a_local_root(
    headwater: Cli, tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch"

    result = run_ok(headwater.run("task_artifact_uris", params={"scratch": scratch}))

    assert result["outputs"]["Output"] == "some|data|Hello|custom bytes|outside bytes"
    root = str(headwater.home / "artifacts")
    check_chosen_uris(headwater.show(result["run_id"]), root, lambda uri: Path(uri).read_bytes())
    # KFP's executor wrote its ExecutorOutput in the task root; none is left among the artifacts.
    assert not list(Path(root).rglob("executor_output.json"))


def test_artifact_uris_chosen_by_the_component_on_s3(
    headwater: Cli,
    tmp_path: Path,
    s3_env: S3Server,
    s3_bucket: str,
) -> None:
    for name in [n for n in headwater.env if n.startswith("AWS_")]:
        del headwater.env[name]
    headwater.env.update({k: v for k, v in os.environ.items() if k.startswith("AWS_")})
    root = f"s3://{s3_bucket}/root"
    params = {"scratch": tmp_path / "scratch"}

    result = run_ok(headwater.run("task_artifact_uris", "--pipeline-root", root, params=params))

    assert result["outputs"]["Output"] == "some|data|Hello|custom bytes|outside bytes"
    with contextlib.closing(s3_env.client()) as client:

        def read(uri: str) -> bytes:
            bucket, _, key = uri.removeprefix("s3://").partition("/")
            body: bytes = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            return body

        check_chosen_uris(headwater.show(result["run_id"]), root, read)
        listed = client.list_objects_v2(Bucket=s3_bucket, Prefix="root/")
        assert not [o["Key"] for o in listed["Contents"] if "executor_output" in o["Key"]]


# --- failed tasks report a structured error ----------------------------------------------------


def test_every_failure_shape_reaches_the_engine_as_a_task_error(headwater: Cli) -> None:
    cli = headwater.run("task_failures")

    result = run_failed(cli)
    # No traceback of the engine's; the log tail of the first failed task (indented) may show
    # the task's own, depending on which task failed first.
    assert not [line for line in cli.stderr.splitlines() if line.startswith("Traceback")]
    errors = {t["name"]: t["error"] for t in result["tasks"]}
    assert set(errors) == {"raises", "exits", "exits-hard", "killed", "not-text"}
    for name, error in errors.items():
        assert error is not None, name
        assert error["task"] == name
        assert error["log_path"], name

    raised = errors["raises"]
    assert (raised["error_type"], raised["message"], raised["exit_code"]) == (
        "ValueError",
        "boom-value-7c1",
        1,
    )
    assert "raise ValueError" in raised["traceback"]

    exited = errors["exits"]
    assert (exited["error_type"], exited["exit_code"]) == ("SystemExit", 3)
    assert "sys.exit(3)" in exited["message"]
    assert "sys.exit(3)" in exited["traceback"]

    assert errors["exits-hard"]["exit_code"] == 4
    assert "exited with code 4" in errors["exits-hard"]["message"]
    assert errors["killed"]["exit_code"] == -9
    assert "SIGKILL" in errors["killed"]["message"]

    not_text = errors["not-text"]
    assert not_text["error_type"] == "OutputError"
    assert "'out'" in not_text["message"] and "UTF-8" in not_text["message"]


@linux_only
def test_tasks_end_when_the_engine_and_its_fork_server_are_killed(
    headwater: Cli, tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch"
    args = ["run", pipeline("task_leftovers"), "--param", f"scratch={scratch}"]
    args += ["--param", "linger=true"]
    proc = headwater.popen(*args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pids: dict[str, int] = {}
    try:
        wait_for((scratch / "ready").is_file, 30, "the task to start its processes")
        pids = recorded_pids(scratch)
        task = int((scratch / "ready").read_text())
        pids["task"] = task
        server = int(Path(f"/proc/{task}/stat").read_text().rpartition(")")[2].split()[1])
        assert server != proc.pid
        pids["server"] = server

        # Neither may clean up: the server is stopped before the engine dies, then killed.
        os.kill(server, signal.SIGSTOP)
        proc.kill()
        proc.wait(timeout=10)
        os.kill(server, signal.SIGKILL)

        wait_for(lambda: process_gone(task), 10, f"the task ({task}) to end with its server")
    finally:
        kill_leftovers(proc)
        kill_all(pids)


@linux_only
def test_a_service_a_task_marks_outlives_the_task_and_the_run(
    headwater: Cli, tmp_path: Path
) -> None:
    # deploy_model's server is such a service: its own session, HEADWATER_SERVICE set.
    scratch = tmp_path / "scratch"
    pids: dict[str, int] = {}
    try:
        result = run_ok(headwater.run("task_service", params={"scratch": scratch}))
        assert result["state"] == "SUCCEEDED"
        pids = {n: int((scratch / f"{n}.pid").read_text()) for n in ("service", "plain")}
        wait_for(lambda: process_gone(pids["plain"]), 10, "the unmarked process to end")
        assert not process_gone(pids["service"]), "the marked service died with its run"
    finally:
        kill_all(pids)


def fork_servers_of(home: Path) -> list[int]:
    """The fork servers still running for a CLI whose HEADWATER_HOME is `home`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:  # ended meanwhile, or not ours to read
            continue
        if (
            b"headwater.executors.forkserver" in cmdline
            and f"HEADWATER_HOME={home}".encode() in environ
        ):
            found.append(int(entry.name))
    return found


@linux_only
@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["run", pipeline("runtime_output")], 0),
        (["run", "missing.yaml"], 2),
        (["run", pipeline("runtime_output"), "--max-parallel", "many"], 2),
        (["run", pipeline("runtime_output"), "--executor", "nope"], 2),
    ],
    ids=["success", "missing-file", "usage-error", "unknown-executor"],
)
def test_no_fork_server_outlives_the_cli(headwater: Cli, args: list[str], code: int) -> None:
    # The fork server is started before the arguments are parsed; whatever the outcome, it
    # must be gone when the CLI exits. Not waited for through a pipe of the CLI's: a leaked
    # server holds the CLI's stderr, so the wait would last until the server had exited too.
    proc = headwater.popen(*args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert proc.wait(timeout=headwater.timeout) == code
        assert fork_servers_of(headwater.home) == []
    finally:
        kill_leftovers(proc)
