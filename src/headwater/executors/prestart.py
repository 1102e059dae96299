"""Starting `LocalExecutor`'s fork server, possibly before the engine has loaded: stdlib only.

The fork server needs ~0.1 s to import KFP. `headwater run` starts it first thing, so that it
warms up on another core while the engine imports itself and loads the pipeline, and hands it
to the `LocalExecutor` it makes later. This module imports nothing of Headwater's, so starting
the server costs the CLI a `fork`/`exec` and nothing else.
"""

from __future__ import annotations

import os
import subprocess
import sys


def start_server(base_env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start a fork server (`headwater.executors.forkserver`) with `base_env` as its environment.

    Its stdin takes requests and its stdout gives replies; it runs in a session of its own,
    so that a Ctrl-C in the terminal reaches the engine, which stops the tasks itself.
    """
    return subprocess.Popen(
        [sys.executable, "-m", "headwater.executors.forkserver"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        # KFP skips importing its API client (about a second) when this is set.
        env={**base_env, "_KFP_RUNTIME": "true"},
        start_new_session=True,
    )


def server_env(sandboxed: bool) -> dict[str, str]:
    """The environment a fork server starts with: this process's, or for sandboxed tasks only
    what they may inherit (`headwater.sandbox.policy.fork_server_env`)."""
    if not sandboxed:
        return dict(os.environ)
    from headwater.sandbox.policy import fork_server_env

    return fork_server_env(os.environ)


class PrestartedServer:
    """A fork server started ahead of the `LocalExecutor` that adopts it, or closes it unused.

    Example::

        server = PrestartedServer()
        try:
            executor = LocalExecutor(server=server)  # or never, when the input is bad
            ...
        finally:
            server.close()  # stops it only if no executor adopted it
    """

    def __init__(self, *, sandboxed: bool = False) -> None:
        # What the server inherited: the executor sends the environment again with a task
        # only when it has changed since. A server of sandboxed tasks inherits no secret.
        self.sandboxed = sandboxed
        self.base_env = server_env(sandboxed)
        self._process: subprocess.Popen[bytes] | None = start_server(self.base_env)

    def adopt(
        self, *, sandboxed: bool = False
    ) -> tuple[subprocess.Popen[bytes], dict[str, str]] | None:
        """Take the server and the environment it was started with; the caller now owns it.

        Returns:
            None when it was taken already, has exited, or was started for other tasks than
            `sandboxed` says (the caller starts its own).
        """
        if sandboxed != self.sandboxed:
            return None
        process, self._process = self._process, None
        if process is not None and process.poll() is not None:
            _stop(process)
            return None
        return None if process is None else (process, self.base_env)

    def close(self) -> None:
        """Stop the server and reap it, unless it was adopted; idempotent."""
        process, self._process = self._process, None
        if process is not None:
            _stop(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    # It has run no task, so there is nothing to let it finish: kill it mid-warm-up.
    process.kill()
    process.wait()
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            pipe.close()
