"""The engine under faults and odd input, through the real CLI (and the Python API) in subprocesses.

Names that sanitise alike, conditions that fail at run time, exit handlers that are pipelines,
outputs that do not fit their declared type, Ctrl-C and SIGTERM, and a run record that cannot be
written because the file-size limit (RLIMIT_FSIZE, as a full disk does) stops it.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_harness import Cli, CliResult, kill_leftovers, pipeline, run_failed, run_ok, wait_for

pytestmark = pytest.mark.integration


def compiled(headwater: Cli, tmp_path: Path, name: str) -> dict[str, Any]:
    """The IR of pipelines/`name`.py, compiled by `headwater compile`."""
    out = tmp_path / f"{name}.yaml"
    done = headwater("compile", pipeline(name), "-o", str(out))
    assert done.returncode == 0, done.describe()
    doc = yaml.safe_load(out.read_text())
    assert isinstance(doc, dict)
    return doc


def write_ir(tmp_path: Path, doc: dict[str, Any], name: str = "edited.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def stderr_lines_with(cli: CliResult, text: str) -> list[str]:
    return [line for line in cli.stderr.splitlines() if text in line]


# --- names that sanitise alike ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [("make a", "make_a"), ("make-text", "Make-Text")],
    ids=["space-and-underscore", "letter-case"],
)
def test_tasks_whose_names_sanitise_alike_keep_their_own_data(
    headwater: Cli, tmp_path: Path, first: str, second: str
) -> None:
    text = json.dumps(compiled(headwater, tmp_path, "faults_twins"))
    for old, new in (("make-text", first), ("make-text-2", second)):
        assert json.dumps(old) in text
        text = text.replace(json.dumps(old), json.dumps(new))
    ir = write_ir(tmp_path, json.loads(text))

    result = run_ok(headwater("run", ir, "--json"))

    assert result["outputs"] == {"Output": "first|second"}
    shown = headwater.show(result["run_id"])
    uris = {t["name"]: t["artifacts"]["outputs"].get("data") for t in shown["tasks"]}
    assert uris[first] and uris[second]
    assert len({json.dumps(uris[first]).lower(), json.dumps(uris[second]).lower()}) == 2


# --- a condition that fails at run time ------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("inputs.parameter_values['nope'] == 1.0", "no such key"),
        ("int(inputs.parameter_values['pipelinechannel--x']) / 0 == 1", "divide by zero"),
        ("inputs.parameter_values['pipelinechannel--x']", "not a bool"),
    ],
    ids=["missing-key", "division-by-zero", "not-boolean"],
)
def test_condition_failing_at_run_time_says_why_everywhere(
    headwater: Cli, tmp_path: Path, expression: str, reason: str
) -> None:
    doc = compiled(headwater, tmp_path, "faults_condition")
    doc["root"]["dag"]["tasks"]["condition-1"]["triggerPolicy"]["condition"] = expression
    cli = headwater("run", write_ir(tmp_path, doc), "--json")

    result = run_failed(cli)
    assert "Traceback" not in cli.stderr
    # --json: on the run and on the task that failed.
    assert reason in result["error"]["message"]
    assert result["error"]["error_type"] == "ConditionError"
    [task] = result["tasks"]
    assert (task["name"], task["state"]) == ("say", "FAILED")
    assert reason in task["error"]["message"]
    # stderr: one line naming the condition and the reason.
    [line] = stderr_lines_with(cli, reason)
    assert "ConditionError" in line
    # The store, as `runs show` reads it.
    shown = headwater.show(result["run_id"])
    assert shown["state"] == "FAILED"
    assert reason in shown["error"]["message"]
    [recorded] = shown["tasks"]
    assert reason in recorded["error"]["message"]
    text = headwater("runs", "show", result["run_id"])
    assert text.returncode == 0, text.describe()
    assert reason in text.stdout


def test_successful_run_has_no_error_and_its_tasks_no_error_key(headwater: Cli) -> None:
    result = run_ok(headwater.run("faults_condition"))
    assert result["error"] is None
    [task] = result["tasks"]
    assert "error" not in task
    assert task == {
        "name": "say",
        "state": "SUCCEEDED",
        "cached": False,
        "executor": "local",
        "worker": socket.gethostname(),
        "container": None,  # it ran on the host
        "sandbox": None,  # as it is, not sandboxed
    }


# --- an exit handler that is a pipeline ------------------------------------------------------


def test_exit_handler_that_is_a_pipeline_runs_after_a_failure(headwater: Cli) -> None:
    result = run_failed(headwater.run("faults_exit_pipeline"))
    states = {t["name"]: t["state"] for t in result["tasks"]}
    assert states == {"work": "FAILED", "notify.say": "SUCCEEDED", "notify.say-2": "SUCCEEDED"}
    assert result["error"]["message"] == "work failed"


# --- an output that does not fit its declared type -------------------------------------------


def test_output_that_does_not_fit_its_type_is_passed_through(headwater: Cli) -> None:
    result = run_ok(headwater.run("faults_collected"))
    assert result["outputs"] == {"Output": 3}
    [listed] = headwater.runs()
    assert listed["state"] == "SUCCEEDED"


# --- Ctrl-C and SIGTERM ----------------------------------------------------------------------


def start_nap(
    headwater: Cli, argv: list[str], scratch: Path, tmp_path: Path
) -> subprocess.Popen[str]:
    """Start `argv` (a run of storage_nap) and wait until its second task sleeps."""
    with (tmp_path / "out.txt").open("w") as out, (tmp_path / "err.txt").open("w") as err:
        proc = subprocess.Popen(
            argv, text=True, env=headwater.env, cwd=headwater.cwd, stdout=out, stderr=err
        )
    wait_for((scratch / "pid").is_file, 60, "the nap task to start")
    return proc


def assert_interrupted_and_resumable(headwater: Cli, scratch: Path) -> str:
    [listed] = headwater.runs()
    run_id = str(listed["run_id"])
    assert listed["state"] == "INTERRUPTED"
    states = {t["name"]: t["state"] for t in headwater.show(run_id)["tasks"]}
    assert states == {"quick": "SUCCEEDED", "nap": "FAILED"}
    (scratch / "marker").touch()
    resumed = run_ok(headwater("run", "--resume", run_id, "--json"))
    assert {t["name"]: t["cached"] for t in resumed["tasks"]} == {"quick": True, "nap": False}
    assert resumed["outputs"] == {"Output": "quick+nap"}
    return run_id


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_stopped_cli_run_is_interrupted_and_says_how_to_resume(
    headwater: Cli, tmp_path: Path, signum: signal.Signals
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    argv = headwater.argv("run", pipeline("storage_nap"), "--param", f"scratch={scratch}")
    proc = start_nap(headwater, argv, scratch, tmp_path)
    task_pid = int((scratch / "pid").read_text())
    try:
        proc.send_signal(signum)
        returncode = proc.wait(timeout=30)
        stderr = (tmp_path / "err.txt").read_text()
        assert returncode == 130, stderr
        assert "Traceback" not in stderr
        run_id = assert_interrupted_and_resumable(headwater, scratch)
        assert f"headwater run --resume {run_id}" in stderr
        assert f"run {run_id} INTERRUPTED" in stderr
    finally:
        kill_leftovers(proc, task_pid)


def test_ctrl_c_in_the_python_api_leaves_the_run_interrupted(
    headwater: Cli, tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    script = textwrap.dedent(
        f"""
        import headwater

        try:
            headwater.run({pipeline("storage_nap")!r}, {{"scratch": {str(scratch)!r}}})
        except KeyboardInterrupt:
            print("re-raised", flush=True)
            raise SystemExit(7)
        """
    )
    proc = start_nap(headwater, [sys.executable, "-c", script], scratch, tmp_path)
    task_pid = int((scratch / "pid").read_text())
    try:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 7, (tmp_path / "err.txt").read_text()
        assert (tmp_path / "out.txt").read_text().strip() == "re-raised"
        assert_interrupted_and_resumable(headwater, scratch)
    finally:
        kill_leftovers(proc, task_pid)


# --- a run record that cannot be written -----------------------------------------------------

#: Starts the CLI with a file-size limit: a write past it fails with EFBIG, as one on a full
#: disk fails with ENOSPC (SIGXFSZ ignored, so the write fails instead of killing the process).
_LIMITED = """
import os, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
os.execv(sys.executable, [sys.executable, "-m", "headwater", *sys.argv[2:]])
"""


def test_unwritable_run_record_fails_the_run_with_its_cause(headwater: Cli, tmp_path: Path) -> None:
    # A first run, unlimited, shows how large each file grows: run.json must be the largest.
    calibration = headwater._replace(
        home=tmp_path / "calibration",
        env={**headwater.env, "HEADWATER_HOME": str(tmp_path / "calibration")},
    )
    run_ok(calibration.run("faults_big_output"))
    sizes = {p: p.stat().st_size for p in calibration.home.rglob("*") if p.is_file()}
    record = max(size for p, size in sizes.items() if p.name == "run.json")
    others = max(size for p, size in sizes.items() if p.name != "run.json")
    assert record > others * 1.5, sizes
    limit = (record + others) // 2

    argv = [sys.executable, "-c", _LIMITED, str(limit), "run", pipeline("faults_big_output")]
    proc = subprocess.run(
        [*argv, "--json"], capture_output=True, text=True, env=headwater.env, cwd=headwater.cwd,
        timeout=120,
    )  # fmt: skip
    cli = CliResult.of(proc.returncode, proc.stdout, proc.stderr)

    result = run_failed(cli)
    assert "Traceback" not in cli.stderr
    [line] = stderr_lines_with(cli, "run.json")
    assert "File too large" in line
    assert "run.json" in result["error"]["message"]
    shown = headwater.show(result["run_id"])
    assert shown["state"] == "FAILED"
    assert "File too large" in shown["error"]["message"]
    run_dir = headwater.home / "runs" / result["run_id"]
    assert sorted(p.name for p in run_dir.iterdir() if p.is_file()) == []  # no partial record
