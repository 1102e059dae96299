"""Process liveness by pid and start time, on real child processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from headwater.processes import process_alive, process_start

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    """A child process that sleeps until killed."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("the condition did not hold in time")
        time.sleep(0.01)


def test_a_running_child_is_alive_with_its_start_time(child: subprocess.Popen[bytes]) -> None:
    started = process_start(child.pid)
    assert started.isdigit()
    assert process_alive(child.pid)
    assert process_alive(child.pid, started)


def test_a_reused_pid_with_another_start_time_is_not_alive(
    child: subprocess.Popen[bytes],
) -> None:
    started = int(process_start(child.pid))
    assert not process_alive(child.pid, str(started + 1))
    assert not process_alive(child.pid, str(started - 1))


def test_an_exited_child_is_dead_before_and_after_it_is_reaped(
    child: subprocess.Popen[bytes],
) -> None:
    started = process_start(child.pid)
    child.kill()
    # Not yet reaped: a zombie, which still answers kill(0).
    _until(lambda: _state(child.pid) == "Z")
    assert not process_alive(child.pid)
    assert not process_alive(child.pid, started)
    child.wait()
    # Gone; were the pid handed on meanwhile, the start time would tell the new process apart.
    assert not process_alive(child.pid, started)


def test_this_process_is_alive() -> None:
    assert process_alive(os.getpid(), process_start(os.getpid()))


@pytest.mark.parametrize("pid", [0, -1], ids=repr)
def test_no_positive_pid_is_no_process(pid: int) -> None:
    assert not process_alive(pid)


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        return fh.read().rpartition(b")")[2].split()[0].decode()
