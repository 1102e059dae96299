"""`headwater tensorboard RUN_ID`: a real run's logs served by a real TensorBoard on loopback,
stopped by Ctrl-C or SIGTERM; and each way it refuses, in one line with exit code 2."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from cli_harness import Cli, process_gone, wait_for
from s3_server import S3Server

from headwater.api.runs import get_run
from headwater.cli.main import main
from headwater.cli.tensorboard import find_logdirs, logdir_spec

pytest.importorskip("tensorboard")

pytestmark = pytest.mark.integration

ITERATIONS = ("train[0]/lightning_logs/version_0", "train[1]/lightning_logs/version_0")


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Cli, str]:
    """A CLI and the id of a run whose two `train` iterations wrote TensorBoard logs."""
    import os

    root = tmp_path_factory.mktemp("tensorboard")
    (root / "cwd").mkdir()
    env = {**os.environ, "HEADWATER_HOME": str(root / "home")}
    for name in ("HEADWATER_METADATA_URL", "HEADWATER_PIPELINE_ROOT"):
        env.pop(name, None)
    cli = Cli(root / "home", root / "cwd", env)
    return cli, str(cli.run_ok("tensorboard_logs")["run_id"])


@pytest.fixture
def home(logged: tuple[Cli, str], monkeypatch: pytest.MonkeyPatch) -> str:
    """The run's id, with this process's HEADWATER_HOME set to its home (for in-process calls)."""
    cli, run_id = logged
    monkeypatch.setenv("HEADWATER_HOME", str(cli.home))
    monkeypatch.delenv("HEADWATER_METADATA_URL", raising=False)
    return run_id


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(p) for p in text.split()]


def runs_listed(port: int) -> list[str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=2) as answer:
            listed = json.loads(answer.read())
    except OSError:
        return []
    return sorted(listed)


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_serves_each_iterations_logs_until_stopped(
    logged: tuple[Cli, str], stop: signal.Signals
) -> None:
    cli, run_id = logged
    port = free_port()
    proc = cli.popen(
        "tensorboard", run_id[:8], "--port", str(port),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        wait_for(lambda: runs_listed(port) == sorted(ITERATIONS), 60, "TensorBoard's runs")
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line == f"TensorBoard for run {run_id} at http://127.0.0.1:{port}/ (Ctrl-C to stop)"
        [server] = children(proc.pid)
        proc.send_signal(stop)
        out, err = proc.communicate(timeout=30)
        assert (proc.returncode, out, err) == (0, "", "")
        wait_for(lambda: process_gone(server), 10, "TensorBoard to stop")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_finds_the_log_folders_of_each_task_or_of_one(home: str) -> None:
    run = get_run(home)

    def no_scratch() -> str:
        raise AssertionError("logs on this machine need no temporary folder")

    every = find_logdirs(run, task=None, scratch=no_scratch)
    assert [(d.name, d.output) for d in every] == [
        ("train[0]", "tensorboard"),
        ("train[1]", "tensorboard"),
    ]  # neither the Dataset of `prepare` nor the `checkpoint` file
    assert all(Path(d.path, "lightning_logs", "version_0").is_dir() for d in every)
    assert [d.name for d in find_logdirs(run, task="train", scratch=no_scratch)] == [
        "train[0]",
        "train[1]",
    ]
    [one] = find_logdirs(run, task="train[1]", scratch=no_scratch)
    assert logdir_spec([one], no_scratch) == f"train[1]:{one.path}"


def one_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    code = main(argv)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured
    return code, captured.err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--task", "nope"], "has no task 'nope' (tasks: prepare, train[0], train[1])"),
        (["--task", "prepare"], "task 'prepare' of run {run} has no TensorBoard logs"),
        (["--port", "0"], "--port 0 is not a TCP port: give one from 1 to 65535"),
        (["--host", "0.0.0.0"], "--host '0.0.0.0' is not a loopback address"),
        (["--port", "http"], "argument --port: invalid int value: 'http'"),
    ],
    ids=["unknown-task", "task-without-logs", "port-zero", "all-interfaces", "port-not-number"],
)
def test_bad_options_are_one_line_and_exit_2(
    home: str, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    code, err = one_error(capsys, ["tensorboard", home, *args])
    assert code == 2 and expected.format(run=home) in err, err


def test_a_port_in_use_is_refused_before_tensorboard_starts(
    home: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, err = one_error(capsys, ["tensorboard", home, "--port", str(port)])
    assert code == 2 and f"cannot serve on 127.0.0.1 port {port}" in err, err
    assert "pass --port with a free port" in err


def test_without_tensorboard_installed_it_names_the_extra(
    home: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name == "tensorboard" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    code, err = one_error(capsys, ["tensorboard", home])
    assert code == 1 and "pip install 'headwater[torch]'" in err, err


def test_an_unknown_run_and_a_run_without_logs_exit_2(logged: tuple[Cli, str]) -> None:
    cli, _ = logged
    unknown = cli("tensorboard", "no-such-run")
    assert unknown.returncode == 2, unknown.describe()
    assert unknown.stderr == "headwater: error: no run 'no-such-run': see `headwater runs list`\n"
    bare = cli.run_ok("tensorboard_logs", params={"seeds": "[]"})["run_id"]
    refused = cli("tensorboard", bare)
    assert refused.returncode == 2, refused.describe()
    assert refused.stderr == (
        f"headwater: error: run {bare} has no TensorBoard logs (tasks: prepare, train); train "
        "with train_lightning to produce them\n"
    )


@pytest.mark.slow
def test_logs_on_s3_are_downloaded_and_nothing_else_is(
    s3_env: S3Server,
    s3_bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import os

    env = {**os.environ, "HEADWATER_HOME": str(tmp_path / "home")}
    env.pop("HEADWATER_METADATA_URL", None)
    (tmp_path / "cwd").mkdir()
    cli = Cli(tmp_path / "home", tmp_path / "cwd", env)
    run_id = cli.run_ok("tensorboard_logs", "--pipeline-root", f"s3://{s3_bucket}/root")["run_id"]
    monkeypatch.setenv("HEADWATER_HOME", str(cli.home))
    folders: list[Path] = []

    def scratch() -> str:
        folders.append(tmp_path / f"scratch{len(folders)}")
        folders[-1].mkdir()
        return str(folders[-1])

    found = find_logdirs(get_run(run_id), task=None, scratch=scratch)
    assert [d.name for d in found] == ["train[0]", "train[1]"]
    assert all(d.uri.startswith(f"s3://{s3_bucket}/root/") for d in found)
    # Only the two log folders came down: not the Dataset, not the checkpoints.
    assert [Path(d.path) for d in found] == [f / "logs" for f in folders]
    for d in found:
        [events] = Path(d.path, "lightning_logs", "version_0").iterdir()
        assert events.name.startswith("events.out.tfevents")
    assert capsys.readouterr().err.count("downloading TensorBoard logs s3://") == 2
