"""Sandboxes: each task sees only what is its own (bubblewrap, as Flatpak uses it).

A sandboxed task process sees a read-only view of the system (`/usr`, `/etc`) and of the
Python environment it runs in, its own input artifacts read-only, its own directory, output
artifacts and run workspace writable, a private `/tmp`, its own PID and IPC namespaces (no
other process of the machine is visible) and an environment of its own. Nothing else of the
machine's file system is there: not `$HEADWATER_HOME`, the metadata store, other tasks' or
namespaces' artifacts and logs, nor any file, environment or process of the server.

How (ADR 68): bubblewrap (`bwrap`) builds the namespaces and the view around a tiny holder
process (`cat`); the task process, forked from a warm interpreter, joins them with `setns`
(as `flatpak enter` joins a running sandbox) and forks once more into the new PID namespace,
then drops every privilege before the component runs. The task keeps the warm interpreter
(KFP imported, a fork costs milliseconds) and bubblewrap does every mount.

* `policy`: `SandboxPolicy`, what a run asks for (the uid tasks of a root engine run as,
  paths every task may read, paths hidden from every task), and `check_available`.
* `view`: the view of one task, as bubblewrap's arguments.
* `join`: in the task process: make the sandbox, join it, drop privileges and set limits.
* `command`: run a program (pip, a model server) in a sandbox of its own.
"""

from __future__ import annotations

from headwater.sandbox.policy import SandboxPolicy, check_available

__all__ = ["SandboxPolicy", "check_available"]
