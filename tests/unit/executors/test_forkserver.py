"""The fork server's protocol where the machine refuses it a process."""

from __future__ import annotations

import json
import subprocess
import sys

# The real server, in a process whose fork() fails as the kernel's does when no process is left.
NO_FORK = """
import errno, os
def refuse():
    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))
os.fork = refuse
from headwater.executors.forkserver import serve
serve()
"""


def test_a_task_that_cannot_be_forked_fails_alone() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", NO_FORK], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as server:
        assert server.stdin is not None and server.stdout is not None
        try:
            assert json.loads(server.stdout.readline()) == {"ready": True}
            for task in (1, 2):
                server.stdin.write(json.dumps({"id": task, "payload": {}}) + "\n")
                server.stdin.flush()
                reply = json.loads(server.stdout.readline())
                assert reply["id"] == task
                assert reply["error"]["error_type"] == "BlockingIOError"
                assert "could not start the task process" in reply["error"]["message"]
            # The server is still serving; it exits when its input ends.
            server.stdin.close()
            assert server.wait(timeout=30) == 0
        finally:
            if server.poll() is None:
                server.kill()
