"""The fork server's protocol where a task cannot start: no process left, or no log."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

# The real server, in a process whose fork() fails as the kernel's does when no process is left.
NO_FORK = """
import errno, os
def refuse():
    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))
os.fork = refuse
from headwater.executors.forkserver import serve
serve()
"""
SERVER = "from headwater.executors.forkserver import serve; serve()"


def _each_fails_alone(program: str, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Send each payload to a fork server running `program`; return its error records, after
    checking it went on serving and exited cleanly when its input ended."""
    errors = []
    with subprocess.Popen(
        [sys.executable, "-c", program], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as server:
        assert server.stdin is not None and server.stdout is not None
        try:
            assert json.loads(server.stdout.readline()) == {"ready": True}
            for task, payload in enumerate(payloads, 1):
                server.stdin.write(json.dumps({"id": task, "payload": payload}) + "\n")
                server.stdin.flush()
                reply = json.loads(server.stdout.readline())
                assert reply["id"] == task
                errors.append(reply["error"])
            server.stdin.close()
            assert server.wait(timeout=30) == 0
        finally:
            if server.poll() is None:
                server.kill()
    return errors


def test_a_task_that_cannot_be_forked_fails_alone(tmp_path: Path) -> None:
    log = {"log_path": str(tmp_path / "task" / "log.txt")}
    for error in _each_fails_alone(NO_FORK, [log, log]):
        assert error["error_type"] == "BlockingIOError"
        assert "could not start the task process" in error["message"]


def test_a_task_whose_log_cannot_be_made_fails_alone_naming_it(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    blocked = str(tmp_path / "file" / "task" / "log.txt")  # a file where a folder must be
    [error] = _each_fails_alone(SERVER, [{"log_path": blocked}])
    assert error["error_type"] == "NotADirectoryError"
    assert error["message"].startswith("could not start the task process")
    assert str(tmp_path / "file") in error["message"]
