"""The warm-worker launcher (`python -m headwater.server.launcher`) over its pipes, as the
server drives it: a run handed to it is taken by a forked worker that has it at once, which
reports its pid and, when the run ends, its exit status; a run not in the queue is left alone;
closing its stdin stops it and its spare."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from server_harness import adder, server_env

from headwater.metadata.sql import SqlMetadataStore
from headwater.processes import process_alive
from headwater.server.operations import NewRun, RunOperations

pytestmark = pytest.mark.integration


def read_event(proc: subprocess.Popen[Any], timeout: float = 60) -> dict[str, Any]:
    import select

    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "the launcher said nothing"
    return dict(json.loads(proc.stdout.readline()))


def test_the_launcher_hands_each_run_to_a_warm_worker(tmp_path: Path) -> None:
    from headwater.spec.loader import load_pipeline

    home = tmp_path / "home"
    home.mkdir()
    url = f"sqlite:///{home / 'metadata.db'}"
    env = server_env(home)
    os.environ["HEADWATER_HOME"] = str(home)  # the run's artifact root, resolved here
    try:
        with SqlMetadataStore(url) as store:
            operations = RunOperations(store)
            run, canceled = (
                operations.submit(NewRun(display_name=name, ir=load_pipeline(adder)))
                for name in ("by the launcher", "canceled")
            )
            operations.terminate(canceled.run_id)
    finally:
        del os.environ["HEADWATER_HOME"]
    logs = tmp_path / "logs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "headwater.server.launcher", "--log-dir", str(logs)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**env, "HEADWATER_METADATA_URL": url},
    )  # fmt: skip
    assert proc.stdin is not None
    try:
        assert read_event(proc) == {"ready": True}
        for run_id in (run.run_id, canceled.run_id):
            proc.stdin.write((json.dumps({"run_id": run_id}) + "\n").encode())
            proc.stdin.flush()
            handed = read_event(proc)
            assert handed["run_id"] == run_id and handed["pid"] > 0
            ended = read_event(proc)
            assert ended["run_id"] == run_id
            assert ended["exit"] == (0 if run_id == run.run_id else 3)
        with SqlMetadataStore(url) as store:
            done = store.get_run(run.run_id)
        assert done is not None and (done.state, done.starts) == ("SUCCEEDED", 1)
        assert "CANCELED: not in the queue" in (logs / f"{canceled.run_id}.log").read_text()
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(children) == 1  # the next spare, warming up
        spare = int(children[0])
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        assert proc.stdout is not None
        proc.stdout.close()
    deadline = time.monotonic() + 10
    while process_alive(spare) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(spare)


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _settled_descriptors(pid: int) -> int:
    """How many descriptors `pid` holds, not counting the pipe end it closes just after a fork
    (the fewest of a few looks over 0.3 s)."""
    counts = []
    for _ in range(6):
        counts.append(len(os.listdir(f"/proc/{pid}/fd")))
        time.sleep(0.05)
    return min(counts)


def test_spares_that_die_are_replaced_later_each_time_without_leaking(tmp_path: Path) -> None:
    # A spare that keeps dying (killed, or failing as it warms up) is forked again, each time
    # after a longer wait, and its pipe is closed: the launcher holds no more descriptors.
    home = tmp_path / "home"
    home.mkdir()
    url = f"sqlite:///{home / 'metadata.db'}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "headwater.server.launcher", "--log-dir", str(tmp_path / "logs")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        env={**server_env(home), "HEADWATER_METADATA_URL": url},
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert read_event(proc) == {"ready": True}
        waits, descriptors = [], []
        for _ in range(5):
            deadline = time.monotonic() + 30
            while not _children(proc.pid):
                assert time.monotonic() < deadline, "no spare was forked"
                time.sleep(0.01)
            [spare] = _children(proc.pid)
            descriptors.append(_settled_descriptors(proc.pid))  # one spare's pipe
            os.kill(spare, signal.SIGKILL)
            killed = time.monotonic()
            while _children(proc.pid) in ([], [spare]):
                assert time.monotonic() < deadline, "no spare was forked again"
                time.sleep(0.01)
            waits.append(time.monotonic() - killed)
        assert waits[-1] > 2 * waits[0] and waits[-1] >= 1.6, waits  # 0.2, 0.4 ... 3.2 s
        assert len(set(descriptors)) == 1, descriptors
    finally:
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        proc.stdout.close()
