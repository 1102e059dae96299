"""Starting `LocalExecutor`'s fork server, possibly before the engine has loaded: stdlib only.

The fork server needs ~0.1 s to import KFP. `headwater run` starts it first thing, so that it
warms up on another core while the engine imports itself and loads the pipeline, and hands it
to the `LocalExecutor` it makes later. This module imports nothing of Headwater's, so starting
the server costs the CLI a `fork`/`exec` and nothing else.

A process that runs pipelines one after another (`headwater.run` in a notebook) keeps one
warm: when a run's own server ends, a spare starts for the next run (`leave_spare`), which
takes it (`take_spare`) instead of waiting ~0.08 s for its own. The spare is stopped when the
process exits.
"""

from __future__ import annotations

import atexit
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
        #: Where its tasks start (a task's folder is never its working directory).
        self.cwd = os.getcwd()
        self._process: subprocess.Popen[bytes] | None = start_server(self.base_env)

    @property
    def pid(self) -> int | None:
        """The server's process id (None once adopted or closed)."""
        return None if self._process is None else self._process.pid

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


#: The spare fork server of each kind (sandboxed or not) an ended run left for the next one.
_spares: dict[bool, PrestartedServer] = {}


def take_spare(*, sandboxed: bool) -> PrestartedServer | None:
    """The warm fork server an earlier run of this process left, if it suits this one: same
    kind, same working directory and environment (`PYTHONPATH` decides its tasks' imports,
    from where the server started); None when there is none."""
    server = _spares.pop(sandboxed, None)
    if server is not None and (
        server.cwd != os.getcwd() or server.base_env != server_env(sandboxed)
    ):
        server.close()
        return None
    return server


def leave_spare(*, sandboxed: bool) -> None:
    """Start a fork server for the next run of this process (stopped when the process exits)."""
    if sandboxed in _spares:
        return
    if not _spares:
        atexit.unregister(_close_spares)
        atexit.register(_close_spares)
    _spares[sandboxed] = PrestartedServer(sandboxed=sandboxed)


def _close_spares() -> None:
    while _spares:
        _spares.popitem()[1].close()


def _stop(process: subprocess.Popen[bytes]) -> None:
    # It has run no task, so there is nothing to let it finish: kill it mid-warm-up.
    process.kill()
    process.wait()
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            pipe.close()
