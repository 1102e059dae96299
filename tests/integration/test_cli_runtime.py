"""The `headwater` CLI at run time: console output, logs, scheduling, isolation, packages, signals.

Every run is a real subprocess (`python -m headwater ...`, or the Python API in its own
interpreter) with HEADWATER_HOME in the test's tmp_path; the pipelines live in
`pipelines/runtime_*.py`. Where a test waits for something it polls for it.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from cli_harness import (
    Cli,
    build_wheel,
    cached_flags,
    kill_leftovers,
    last_json_line,
    pipeline,
    process_gone,
    run_failed,
    run_in_pty,
    run_ok,
    task_states,
    wait_for,
)

pytestmark = pytest.mark.integration

Span = tuple[float, float]


def logs_dir(stderr: str) -> Path:
    """The directory named by the `headwater: logs in <dir>` line."""
    match = re.search(r"^headwater: logs in (.+)$", stderr, re.MULTILINE)
    assert match, f"no 'logs in' line on stderr:\n{stderr}"
    return Path(match.group(1).strip())


def read_spans(directory: Path) -> dict[str, Span]:
    spans = {}
    for path in sorted(directory.glob("*.json")):
        start, end = json.loads(path.read_text())
        spans[path.stem] = (start, end)
    return spans


def overlapping(spans: dict[str, Span]) -> list[tuple[str, str]]:
    """Pairs of labels whose (start, end) intervals overlap."""
    return [
        (a, b)
        for (a, (a0, a1)), (b, (b0, b1)) in itertools.combinations(sorted(spans.items()), 2)
        if max(a0, b0) < min(a1, b1)
    ]


# --- console output and logs -----------------------------------------------------------------

RUNTIME_OUTPUT_TASKS = {"greet": "SUCCEEDED", "farewell": "SUCCEEDED"}
TASK_PRINTS = {
    "greet": ["greet-output: hello river", "greet-output: second line"],
    "farewell": ["farewell-output: hello river, goodbye"],
}


def test_plain_output_and_task_logs(headwater: Cli) -> None:
    cli = headwater("run", pipeline("runtime_output"), "--json")

    result = run_ok(cli)
    assert task_states(result) == RUNTIME_OUTPUT_TASKS
    assert result["outputs"] == {"Output": "hello river, goodbye"}
    # Not a terminal: no status line redrawn in place, one plain line per event.
    assert "\r" not in cli.stderr
    for name in RUNTIME_OUTPUT_TASKS:
        assert re.search(rf"^\s+started\s+{name}$", cli.stderr, re.MULTILINE), cli.stderr
        assert re.search(rf"^\s+succeeded\s+{name} in \d+\.\d+s$", cli.stderr, re.MULTILINE)
    # Task output goes to the logs only, unless --verbose.
    assert "greet-output" not in cli.stderr + cli.stdout
    logs = logs_dir(cli.stderr)
    assert logs.is_relative_to(headwater.home)
    for name, lines in TASK_PRINTS.items():
        log = logs / name / "log.txt"
        assert log.is_file(), f"no log for {name} in {sorted(logs.rglob('*'))}"
        text = log.read_text()
        for line in lines:
            assert line in text.splitlines(), f"{line!r} not in {log}:\n{text}"


def test_verbose_streams_task_output(headwater: Cli) -> None:
    cli = headwater("run", pipeline("runtime_output"), "--json", "--verbose")

    assert task_states(run_ok(cli)) == RUNTIME_OUTPUT_TASKS
    stderr_lines = cli.stderr.splitlines()
    for name, lines in TASK_PRINTS.items():
        for line in lines:
            assert f"{name} | {line}" in stderr_lines, cli.stderr
    # Streamed in the order printed, and only on stderr (stdout stays clean for --json).
    greet_lines = [line for line in stderr_lines if line.startswith("greet | greet-output")]
    assert greet_lines == [f"greet | {line}" for line in TASK_PRINTS["greet"]]
    assert "greet-output" not in cli.stdout


def test_tty_status_line(headwater: Cli) -> None:
    returncode, output = run_in_pty(headwater, "run", pipeline("runtime_status"))

    assert returncode == 0, output
    # The status line is redrawn in place: carriage return, clear-line, elapsed time, counts and
    # the running task's name.
    status = re.findall(r"\r\x1b\[K(\[\s*\d+\.\ds\] [^\r\n]*)", output)
    assert status, f"no status line in {output!r}"
    first_running = r"\brunning=1\b.*\| nap-first"
    second_running = r"\brunning=1\b.*\bsucceeded=1\b.*\| nap-second"
    assert any(re.search(first_running, s) for s in status), status
    assert any(re.search(second_running, s) for s in status), status
    assert all(re.match(r"\[\s*\d+\.\ds\] ([a-z]+=\d+ ?)+", s) for s in status), status
    # A terminal gets the lines any stream gets, each task's start and end, above the status.
    assert "  started   nap-first\r\n" in output, output
    assert re.search(r"  succeeded nap-second in \d+\.\d+s\r\n", output), output
    assert re.search(r"headwater: run \S+ SUCCEEDED in \d+\.\d+s \(2 succeeded\)", output)
    assert "Output = 0.6" in output


def test_tty_status_counts_only_admitted_tasks(headwater: Cli, tmp_path: Path) -> None:
    returncode, output = run_in_pty(
        headwater,
        "run",
        pipeline("runtime_spans"),
        "--max-parallel",
        "1",
        "--param",
        f"scratch={tmp_path / 'spans'}",
    )

    assert returncode == 0, output
    status = re.findall(r"\r\x1b\[K(\[\s*\d+\.\ds\] [^\r\n]*)", output)
    assert status, f"no status line in {output!r}"
    # --max-parallel 1: one task runs, the other two wait; never "running=3".
    running = [int(m) for s in status for m in re.findall(r"\brunning=(\d+)", s)]
    assert running and max(running) == 1, status
    assert any(re.search(r"\bpending=2\b", s) for s in status), status


def test_reported_duration_excludes_queue_wait(headwater: Cli, tmp_path: Path) -> None:
    cli = headwater(
        "run",
        pipeline("runtime_spans"),
        "--json",
        "--max-parallel",
        "1",
        "--param",
        f"scratch={tmp_path / 'spans'}",
    )

    run_ok(cli)
    took = [float(s) for s in re.findall(r"succeeded record-span\S* in (\d+\.\d+)s", cli.stderr)]
    assert len(took) == 3, cli.stderr
    # Each task sleeps 0.5 s; the second and third waited 0.5 s and 1 s for the slot first.
    assert max(took) < 0.95, cli.stderr


def test_failure_output(headwater: Cli) -> None:
    cli = headwater("run", pipeline("runtime_failure"), "--json")

    result = run_failed(cli)
    assert task_states(result) == {"explode": "FAILED"}
    # The task's error type and message, and the tail of its log with a line it printed.
    assert re.search(
        r"^headwater: task 'explode' failed: RuntimeError: detonated-9b2e$",
        cli.stderr,
        re.MULTILINE,
    ), cli.stderr
    assert re.search(r"^\s+\|?\s*explode-log-line: about to raise 5d1c$", cli.stderr, re.MULTILINE)
    log = logs_dir(cli.stderr) / "explode" / "log.txt"
    assert str(log) in cli.stderr
    assert "explode-log-line: about to raise 5d1c" in log.read_text()


# --- scheduling: --max-parallel and CPU requests ---------------------------------------------


@pytest.mark.parametrize(
    ("max_parallel", "expect_overlap"),
    [pytest.param(1, False, id="max-parallel-1"), pytest.param(3, True, id="max-parallel-3")],
)
def test_max_parallel(
    headwater: Cli, tmp_path: Path, max_parallel: int, expect_overlap: bool
) -> None:
    scratch = tmp_path / "spans"
    cli = headwater(
        "run",
        pipeline("runtime_spans"),
        "--json",
        "--max-parallel",
        str(max_parallel),
        "--param",
        f"scratch={scratch}",
    )

    result = run_ok(cli)
    assert set(task_states(result).values()) == {"SUCCEEDED"}
    spans = read_spans(scratch)
    assert set(spans) == {"a", "b", "c"}
    pairs = overlapping(spans)
    if expect_overlap:
        assert pairs, f"no two tasks overlapped with --max-parallel {max_parallel}: {spans}"
    else:
        assert not pairs, f"tasks overlapped with --max-parallel 1: {pairs} in {spans}"


def test_cpu_requests_bound_concurrency(headwater: Cli, tmp_path: Path) -> None:
    scratch = tmp_path / "spans"
    cli = headwater(
        "run",
        pipeline("runtime_cpu"),
        "--json",
        "--max-parallel",
        "8",
        "--param",
        f"scratch={scratch}",
    )

    result = run_ok(cli)
    assert set(task_states(result).values()) == {"SUCCEEDED"}
    spans = read_spans(scratch)
    assert set(spans) == {"a", "b", "c"}
    # Each task asks for every CPU of the machine: slots allow 8, the CPUs allow one.
    assert not overlapping(spans), spans


# --- isolation -------------------------------------------------------------------------------


def test_crashing_tasks_are_isolated(headwater: Cli) -> None:
    cli = headwater("run", pipeline("runtime_crash"), "--json")

    result = run_failed(cli)
    assert task_states(result) == {
        "exit-hard": "FAILED",
        "segfault": "FAILED",
        "steady": "SUCCEEDED",
    }
    assert re.search(r"FAILED exit-hard in \d+\.\d+s: .*\bexit(ed)? (with )?code 3\b", cli.stderr)
    assert re.search(r"FAILED segfault in \d+\.\d+s: .*\bSIGSEGV\b", cli.stderr), cli.stderr
    assert re.search(r"^\s+succeeded steady in", cli.stderr, re.MULTILINE), cli.stderr
    # The engine reported the failures and exited 1 on its own: no traceback of ours.
    assert "Traceback" not in cli.stderr + cli.stdout
    assert re.search(r"^headwater: run \S+ FAILED in", cli.stderr, re.MULTILINE)


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has a GPU")
def test_accelerator_request_without_gpu_when_strict(headwater: Cli) -> None:
    cli = headwater("run", pipeline("runtime_gpu"), "--json", "--strict-resources")

    result = run_failed(cli)
    assert task_states(result) == {"on-gpu": "FAILED", "on-cpu": "SUCCEEDED"}
    match = re.search(r"^headwater: task 'on-gpu' failed: (.*)$", cli.stderr, re.MULTILINE)
    assert match, cli.stderr
    message = match.group(1)
    # What was asked, what the machine has, and how to fix it.
    assert "accelerator" in message
    assert "nvidia.com/gpu" in message
    assert "has 0" in message
    assert "set_accelerator_limit" in message
    assert "Traceback" not in cli.stderr
    # The GPU task never ran, so it has no log.
    assert not (logs_dir(cli.stderr) / "on-gpu" / "log.txt").exists()


# --- packages_to_install ---------------------------------------------------------------------


def test_missing_packages_stop_the_run(headwater: Cli) -> None:
    cli = headwater("run", pipeline("runtime_missing_pkg"), "--json")

    assert cli.returncode == 2, cli.describe()
    lines = cli.stderr.strip().splitlines()
    assert len(lines) == 1, cli.stderr
    assert "headwater-no-such-pkg-xyz==1.0" in lines[0]
    assert "--install-packages" in lines[0]
    assert "Traceback" not in cli.stderr + cli.stdout
    assert cli.stdout == ""
    # Checked before anything started: no task, not even the one without packages, has run.
    assert not list(headwater.home.glob("runs/*/tasks/*/log.txt"))


def test_install_packages_from_a_local_wheel(headwater: Cli, tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "wheels", "from-the-wheel-41c7")
    headwater.env["HEADWATER_TEST_WHEEL"] = str(wheel)
    args = ["run", pipeline("runtime_wheel_pkg"), "--json", "--install-packages"]

    # Without --install-packages the wheel is reported missing.
    refused = headwater(*args[:-1])
    assert refused.returncode == 2, refused.describe()
    assert str(wheel) in refused.stderr

    first = run_ok(headwater(*args))
    value, _, module_file = first["outputs"]["Output"].partition("@")
    assert value == "from-the-wheel-41c7"
    envs = [p for p in (headwater.home / "envs").iterdir() if p.is_dir()]
    assert len(envs) == 1, envs
    env = envs[0]
    # The task imported the package from the cached environment, not from the venv.
    assert Path(module_file).is_relative_to(env), module_file
    marker = env / ".complete"
    assert marker.is_file()
    installed_at = marker.stat().st_mtime_ns

    second = run_ok(headwater(*args, "--no-cache"))
    assert cached_flags(second) == {"use-wheel": False}
    assert second["outputs"] == first["outputs"]
    # Reused, not reinstalled.
    assert marker.stat().st_mtime_ns == installed_at
    assert [p for p in (headwater.home / "envs").iterdir() if p.is_dir()] == [env]


# --- interrupt -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ignore_sigterm",
    [
        pytest.param(False, id="plain-task"),
        pytest.param(
            True,
            id="task-ignoring-sigterm",
        ),
    ],
)
def test_sigint_stops_run_and_its_tasks(
    headwater: Cli, tmp_path: Path, ignore_sigterm: bool
) -> None:
    scratch = tmp_path / "scratch"
    pid_file = scratch / "pid"
    out_path, err_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    args = ["run", pipeline("runtime_sleeper"), "--param", f"scratch={scratch}"]
    args += ["--param", f"ignore_sigterm={json.dumps(ignore_sigterm)}"]
    with out_path.open("w") as out, err_path.open("w") as err:
        proc = subprocess.Popen(
            headwater.argv(*args), stdout=out, stderr=err, env=headwater.env, cwd=headwater.cwd
        )
    task_pid: int | None = None
    try:

        def task_started() -> bool:
            logs = list(headwater.home.glob("runs/*/tasks/sleeper/log.txt"))
            return bool(logs) and "sleeper-started" in logs[0].read_text() and pid_file.is_file()

        wait_for(task_started, 30, "the sleeper task to start")
        task_pid = int(pid_file.read_text())
        assert not process_gone(task_pid)

        proc.send_signal(signal.SIGINT)
        returncode = proc.wait(timeout=10)

        stderr = err_path.read_text()
        assert returncode == 130, stderr
        assert "headwater: interrupted" in stderr
        assert "Traceback" not in stderr
        wait_for(lambda: process_gone(task_pid), 10, f"the task process {task_pid} to end")
    finally:
        kill_leftovers(proc, task_pid)


# --- cache -----------------------------------------------------------------------------------


def test_cache_clear(headwater: Cli) -> None:
    args = ["run", pipeline("runtime_output"), "--json"]
    db = headwater.home / "metadata.db"

    def keyed() -> int:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT count(*) FROM executions WHERE cache_key != ''").fetchone()[
                0
            ]

    first = run_ok(headwater(*args))
    assert not any(cached_flags(first).values())
    assert keyed() == len(RUNTIME_OUTPUT_TASKS)

    cleared = headwater("cache", "clear")
    assert cleared.returncode == 0, cleared.describe()
    assert keyed() == 0
    assert f"cleared {len(RUNTIME_OUTPUT_TASKS)} cached task result(s)" in cleared.stderr

    after_clear = headwater(*args)
    assert cached_flags(run_ok(after_clear)) == dict.fromkeys(RUNTIME_OUTPUT_TASKS, False)
    assert "cached" not in after_clear.stderr

    rerun = headwater(*args)
    result = run_ok(rerun)
    assert cached_flags(result) == dict.fromkeys(RUNTIME_OUTPUT_TASKS, True)
    assert result["outputs"] == first["outputs"]
    for name in RUNTIME_OUTPUT_TASKS:
        assert re.search(rf"^\s+cached\s+{name}$", rerun.stderr, re.MULTILINE), rerun.stderr


# --- Python API ------------------------------------------------------------------------------

_API_SCRIPT = """
import importlib.util, json, sys
import headwater
from headwater.errors import ParameterError

spec = importlib.util.spec_from_file_location("runtime_api", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)

run = headwater.run(module.runtime_api, arguments={"a": 40})
report = {
    "is_run": isinstance(run, headwater.Run),
    "state": run.state,
    "outputs": run.outputs,
    "errors": {},
}
for label, arguments in [("wrong-type", {"a": "forty"}), ("unknown", {"a": 1, "zzz": 2})]:
    try:
        headwater.run(module.runtime_api, arguments=arguments)
    except ParameterError as exc:
        report["errors"][label] = str(exc)
print(json.dumps(report))
"""


def test_python_api(headwater: Cli) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _API_SCRIPT, pipeline("runtime_api")],
        capture_output=True,
        text=True,
        env=headwater.env,
        cwd=headwater.cwd,
        timeout=60,
    )

    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    report = last_json_line(proc.stdout)
    assert report is not None, proc.stdout
    assert report["is_run"] is True
    assert report["state"] == "SUCCEEDED"
    assert report["outputs"] == {"Output": 42}
    errors = report["errors"]
    assert set(errors) == {"wrong-type", "unknown"}, errors
    assert "forty" in errors["wrong-type"]
    assert "zzz" in errors["unknown"]
    # A refused run never started: only the good run left a run directory.
    assert len(list((headwater.home / "runs").iterdir())) == 1
