"""A program in a sandbox of its own: pip installing `packages_to_install`, a model server.

What it sees is a task's view (`sandbox.view`) with only `writable` writable: the system and
the Python environment read-only, its own `/tmp`, no `$HEADWATER_HOME`, no other process.
Its environment is what a sandboxed task inherits plus `env`. As root it runs as the
policy's uid (dropped inside, after bubblewrap has mounted what root may read); otherwise as
its caller, in a user namespace of its own, with no capability.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from headwater import config
from headwater.sandbox.join import give
from headwater.sandbox.policy import SandboxPolicy, bwrap_path, check_available, inherited_env
from headwater.sandbox.view import View, python_paths

__all__ = ["run", "sandboxed_argv"]

#: Run as root inside: become `uid` for good (no capability, no new privileges), then exec.
_DROP = (
    "import ctypes,os,sys;u=int(sys.argv[1]);os.setgroups([]);os.setresgid(u,u,u);"
    "os.setresuid(u,u,u);ctypes.CDLL(None).prctl(38,1,0,0,0);os.execvp(sys.argv[2],sys.argv[2:])"
)


def sandboxed_argv(
    argv: Sequence[str],
    policy: SandboxPolicy,
    *,
    writable: Sequence[str] = (),
    readable: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    lasting: bool = False,
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that run `argv` in a sandbox (see the module doc).

    Args:
        argv: The program and its arguments.
        policy: The run's sandbox (its uid, what every task may read, what none may see).
        writable: Paths it may write (made if missing; given to the uid as root).
        readable: More paths it may read.
        env: Variables it gets besides what a sandboxed task inherits.
        lasting: It outlives its caller (a model server): not killed when the caller dies.

    Raises:
        SandboxError: This machine cannot make sandboxes.
    """
    check_available()
    program = bwrap_path()
    assert program is not None
    root = os.geteuid() == 0
    if root:
        give(writable, policy.uid)
    view = View(user_namespace=not root, lasting=lasting).base()
    view.read_only(*python_paths(), *policy.readable, *readable)
    view.hide([str(config.home()), *policy.hidden])
    view.own([], [str(p) for p in writable])
    command = [program, *view.argv, "--"]
    if root:
        command += [sys.executable, "-c", _DROP, str(policy.uid)]
    command += list(argv)
    environment = inherited_env(os.environ)
    environment.update(HOME="/tmp", TMPDIR="/tmp")
    environment.update(env or {})
    return command, environment


def run(
    argv: Sequence[str], policy: SandboxPolicy, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """Run `argv` in a sandbox to its end (`sandboxed_argv`'s keywords; output captured as
    text, stderr into stdout)."""
    options = {k: kwargs.pop(k) for k in ("writable", "readable", "env") if k in kwargs}
    command, env = sandboxed_argv(argv, policy, **options)
    return subprocess.run(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
        **kwargs,
    )
