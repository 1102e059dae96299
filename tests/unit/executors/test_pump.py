"""A task given a secret writes through the masking pump: tasks run by the real fork server.

What the task writes, by any means (a program it execs, the file descriptors themselves, a
value split across writes), reaches its log with the secret's value as `***`; the task's
end is reported as it happened (exit code, signal) and only once its log is complete.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from headwater.executors.local import LocalExecutor
from headwater.outcome import OUTCOME_FILE
from headwater.platform.pod import EnvFile, TaskPlatform
from headwater.platform.secrets import SECRET, LocalSecretStore
from headwater.spec.placeholders import PlaceholderContext
from headwater.task import Launch, ResourceRequest, TaskResult

VALUE = "pump-s3cret-Value-42"

# Writes the value whole, split in two writes (flushed, with a pause so the pump reads them
# apart), at fd 2 directly and from a child process; then does what argv[1] says.
_LEAKY = """
import os, signal, subprocess, sys, time
value = os.environ["PW"]
print("whole:", value, flush=True)
sys.stdout.write("split: " + value[:7]); sys.stdout.flush(); time.sleep(0.05)
sys.stdout.write(value[7:] + "\\n"); sys.stdout.flush()
os.write(2, b"fd 2: " + value.encode() + b"\\n")
subprocess.run(["sh", "-c", 'echo "child: $PW"'], check=True)
with open(os.environ["OUT"], "w") as fh:
    fh.write(value)
if sys.argv[1] == "exit":
    sys.exit(3)
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
os._exit(0)
"""


@pytest.fixture(scope="module")
def executor() -> Iterator[LocalExecutor]:
    running = LocalExecutor()
    try:
        yield running
    finally:
        running.shutdown(kill=True)


@pytest.fixture
def secret(tmp_path: Path) -> TaskPlatform:
    """A platform plan that gives the task $PW from secret `db`, as the engine plans it."""
    store = LocalSecretStore(tmp_path / "secrets")
    store.set("db", {"pw": VALUE.encode()})
    path = str(store.path("db") / "pw")
    return TaskPlatform(
        env_files=(EnvFile("PW", path, False, "key 'pw' of secret 'db'"),),
        sources=((SECRET, "db", str(store.root), ("pw",)),),
    )


def leaky_launch(workdir: Path, how: str, platform: TaskPlatform, **outputs: Any) -> Launch:
    """A command task running `_LEAKY`; `outputs` are its output parameters and their types."""
    params = {name: {"outputFile": str(workdir / name)} for name in outputs}
    executor_input: dict[str, Any] = {
        "inputs": {"parameterValues": {}},
        "outputs": {"parameters": params, "artifacts": {}, "outputFile": str(workdir / "o.json")},
    }
    return Launch(
        1,
        "leaky",
        "comp-t",
        "exec-t",
        {"command": [sys.executable, "-c", _LEAKY, how]},
        executor_input,
        PlaceholderContext(executor_input=executor_input),
        workdir,
        workdir / "log.txt",
        {"OUT": str(workdir / ("n" if outputs else "scratch"))},
        ResourceRequest(),
        dict(outputs),
        platform=platform,
    )


def result_of(executor: LocalExecutor, launch: Launch) -> TaskResult:
    executor.submit(launch)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for result in executor.wait(0.5):
            return result
    pytest.fail("no result within 60 s")


def assert_masked_log(launch: Launch) -> None:
    log = launch.log_path.read_text()
    assert VALUE not in log
    for line in ("whole: ***", "split: ***", "fd 2: ***", "child: ***"):
        assert line in log.splitlines(), log


@pytest.mark.parametrize(
    ("how", "exit_code", "message"),
    [
        ("exit", 3, "exited with code 3"),
        ("kill", -signal.SIGKILL, "killed by SIGKILL"),
        ("os._exit", 0, None),
    ],
    ids=["sys.exit", "killed", "os._exit"],
)
def test_an_exec_d_program_s_output_is_masked_and_its_end_reported_as_it_was(
    executor: LocalExecutor,
    secret: TaskPlatform,
    tmp_path: Path,
    how: str,
    exit_code: int,
    message: str | None,
) -> None:
    launch = leaky_launch(tmp_path / "work", how, secret)

    result = result_of(executor, launch)

    assert_masked_log(launch)
    if message is None:
        assert result.ok, result.error
    else:
        assert result.error is not None
        assert (result.error.exit_code, result.error.message) == (exit_code, message)


def test_an_error_about_an_output_that_quotes_the_value_is_masked(
    executor: LocalExecutor, secret: TaskPlatform, tmp_path: Path
) -> None:
    # The task wrote the value as an integer output; the error that quotes it is the
    # executor's own, made outside the task.
    launch = leaky_launch(tmp_path / "work", "os._exit", secret, n="NUMBER_INTEGER")

    result = result_of(executor, launch)

    assert_masked_log(launch)
    assert result.error is not None
    assert "holds '***', not a NUMBER_INTEGER" in result.error.message
    assert VALUE not in result.error.message + result.error.traceback


def test_a_failed_outcome_that_quotes_the_value_is_masked(
    executor: LocalExecutor, secret: TaskPlatform, tmp_path: Path
) -> None:
    # The task succeeds, writing the value as the reason its outcome is a failure.
    launch = leaky_launch(tmp_path / "work", "os._exit", secret)
    launch = dataclasses.replace(launch, env={"OUT": str(launch.workdir / OUTCOME_FILE)})

    result = result_of(executor, launch)

    assert_masked_log(launch)
    assert result.ok, result.error
    assert result.failed_outcome == "***"
