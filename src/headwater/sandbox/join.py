"""In the task process: make its sandbox with bubblewrap, join it, and go on inside.

`enter` splits the task process in two, as `executors.pump` does for masking:

* The *supervisor* (this process) starts bubblewrap, which builds the sandbox's namespaces
  and view (`sandbox.view`) around a holder (`cat`, the PID namespace's init, which echoes
  one byte once the view is complete and then waits for end of file), joins the holder's
  namespaces with `setns`, forks the task into the new PID namespace, waits for it and exits
  as it did. It runs no user code. Closing the holder's input when the task has ended ends
  the sandbox: the holder exits, and with the init gone the kernel kills whatever the task
  left in its PID namespace.
* The *task* returns from `enter`, inside, with no privilege left: an engine running as root
  has its tasks drop to the policy's uid (`setresuid`, which clears every capability); any
  other engine's tasks drop the capabilities their user namespace gave them. Both set
  `no_new_privs`, so no setuid program or file capability gives any back. Then the limits
  the task asked for, its environment and its working folder.

The task stays in the supervisor's process group, so the executor's SIGTERM and SIGKILL reach
both; the supervisor ignores SIGTERM and SIGINT, to report how the task ended.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from headwater.errors import SandboxError
from headwater.sandbox.links import remove_escapes
from headwater.sandbox.view import View, python_paths

__all__ = ["RECORD_FILE", "enter", "give"]

#: Where the supervisor records what the sandbox enforced (the executor reads it back).
RECORD_FILE = "sandbox.json"

_NAMESPACES = {"user": 0x10000000, "mnt": 0x00020000, "ipc": 0x08000000}
_CLONE_NEWPID = 0x20000000
_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAP_VERSION_3 = 0x20080522


def enter(
    spec: Mapping[str, Any],
    *,
    workdir: str,
    env: Mapping[str, str],
    mounts: Sequence[Mapping[str, Any]] = (),
    values: Mapping[str, bytes] | None = None,
) -> None:
    """Put the rest of this task in its sandbox; return inside it (see the module docstring).

    Args:
        spec: The task's sandbox (`LocalExecutor`'s payload): `bwrap` (its path), `version`,
            `holder` (cat's path), `uid`, `readable`, `hidden`, `home`, `read`, `write`,
            `python_path`, `limits` (`cpu` cores, `memory` bytes; 0 for none).
        workdir: The task's folder: its working directory inside.
        env: The task's whole environment inside.
        mounts: Its kfp-kubernetes mounts (`Mount.to_payload()` dicts).
        values: The bytes of the secret and config map files those mounts show, by path.

    Raises:
        SandboxError: bubblewrap could not make the sandbox (its message is quoted).
        OSError: The system refused to join it or to fork.
    """
    root = os.geteuid() == 0
    uid = int(spec.get("uid") or 0) if root else os.getuid()
    write = [str(p) for p in spec.get("write") or ()]
    volumes = [str(m["source"]) for m in mounts if m.get("source") and not m.get("read_only")]
    for mount in mounts:
        if mount.get("fresh") and mount.get("source"):  # scratch space starts empty
            shutil.rmtree(str(mount["source"]), ignore_errors=True)
    if root:
        give([*write, *volumes], uid)
    view = View(user_namespace=not root).base()
    view.read_only(*python_paths(), *(spec.get("python_path") or ()))
    view.read_only(*(spec.get("readable") or ()))
    view.hide([str(spec.get("home") or ""), *(spec.get("hidden") or ())])
    view.own([str(p) for p in spec.get("read") or ()], write)
    view.volumes(mounts, values or {})
    namespaces = _start(spec, view)
    limits = dict(spec.get("limits") or {})
    baseline = _address_space()
    record = {
        "tool": f"bubblewrap {spec.get('version') or ''}".strip(),
        "uid": uid,
        "user_namespace": not root,
        "pid_namespace": True,
        "enforced": _describe(limits, baseline),
    }
    own = [*write, *(str(p) for p in spec.get("read") or ())]
    scanned = [p for p in write if p != spec.get("workspace")]
    holder, hold = namespaces.pop("holder"), namespaces.pop("hold")
    said = namespaces.pop("said")
    _join(namespaces)
    os.chdir(workdir)
    task = os.fork()
    if task == 0:
        os.close(hold)
        os.close(said)
        _inside(uid=uid if root else None, limits=limits, baseline=baseline)
        os.environ.clear()
        os.environ.update(env)
        return
    _supervise(task, hold, holder, after=lambda: _close(scanned, own, workdir, record))


def _close(
    scanned: Sequence[str], own: Sequence[str], workdir: str, record: dict[str, Any]
) -> None:
    """Once the sandbox has ended: no link the task left under `scanned` leads outside its own
    paths, and its record says what the sandbox enforced (written now, where the task can no
    longer change it)."""
    remove_escapes(scanned, own)
    path = os.path.join(workdir, RECORD_FILE)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    with os.fdopen(os.open(path, flags, 0o644), "w", encoding="utf-8") as fh:
        json.dump(record, fh)


def give(paths: Sequence[str], uid: int) -> None:
    """Make the task's writable paths its uid's (a root engine made them), and what is in
    them; a folder that is its uid's already is taken to be so throughout."""
    for path in paths:
        os.makedirs(path, exist_ok=True)
        if os.lstat(path).st_uid == uid:
            continue
        os.chown(path, uid, uid, follow_symlinks=False)
        for folder, dirs, files in os.walk(path):
            for name in [*dirs, *files]:
                with contextlib.suppress(OSError):
                    os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)


def _start(spec: Mapping[str, Any], view: View) -> dict[str, int]:
    """Start bubblewrap with `view` around the holder; once the view is complete, open the
    holder's namespaces. Returns them by name, with `holder` (bubblewrap's process id) and
    `hold` (the holder's input: closing it ends the sandbox)."""
    hold_r, hold_w = os.pipe()
    ready_r, ready_w = os.pipe()
    info_r, info_w = os.pipe()
    said_r, said_w = os.pipe()
    os.write(hold_w, b".")  # echoed by the holder once it runs: the view is complete
    os.set_inheritable(info_w, True)
    program = str(spec["bwrap"])
    # The holder is the PID namespace's init (`--as-pid-1`): one process fewer to start, and
    # when it exits the kernel ends whatever is left in the namespace.
    holder_path = str(spec.get("holder") or "cat")
    argv = [program, *view.argv, "--as-pid-1", "--info-fd", str(info_w), "--", holder_path]
    try:
        # Spawned, not a Popen: this process waits for it itself (`_supervise`).
        holder = os.posix_spawn(
            program,
            argv,
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, hold_r, 0),
                (os.POSIX_SPAWN_DUP2, ready_w, 1),
                (os.POSIX_SPAWN_DUP2, said_w, 2),
            ],
        )
    finally:
        for fd in (hold_r, ready_w, info_w, said_w):
            os.close(fd)
        view.close()
    try:
        ready = os.read(ready_r, 1)
        info = b""
        while chunk := os.read(info_r, 4096):
            info += chunk
        said = b"" if ready else os.read(said_r, 65536)
    finally:
        os.close(ready_r)
        os.close(info_r)
    if not ready:
        os.close(said_r)
        os.close(hold_w)
        _, status = os.waitpid(holder, 0)
        text = said.decode(errors="replace").strip() or f"exit status {status}"
        raise SandboxError(f"bubblewrap could not make the task's sandbox: {text}")
    child = int(json.loads(info)["child-pid"])
    # `said_r` stays open while the sandbox lives: bubblewrap's stderr must not break.
    found: dict[str, int] = {"holder": holder, "hold": hold_w, "said": said_r}
    for name in (*_NAMESPACES, "pid"):
        path = f"/proc/{child}/ns/{name}"
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino != os.stat(f"/proc/self/ns/{name}").st_ino:
                found[name] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    return found


def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
    return libc


def _join(namespaces: dict[str, int]) -> None:
    """Join the sandbox's namespaces (user first: it gives the right to join the others; PID
    last: it takes effect for the children forked after)."""
    libc = _libc()
    try:
        for name in ("user", "mnt", "ipc", "pid"):
            fd = namespaces.get(name)
            if fd is None:
                continue
            kind = _NAMESPACES.get(name, _CLONE_NEWPID)
            if libc.setns(fd, kind) != 0:
                code = ctypes.get_errno()
                why = os.strerror(code)
                raise OSError(code, f"cannot join the sandbox's {name} namespace: {why}")
    finally:
        for fd in namespaces.values():
            os.close(fd)


def _inside(*, uid: int | None, limits: Mapping[str, float], baseline: int) -> None:
    """In the task: die with the supervisor, drop every privilege, apply the limits.

    (A supervisor that died before the first line took the sandbox with it: bubblewrap dies
    with its parent, and its PID namespace with bubblewrap.)
    """
    libc = _libc()
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if uid is not None:
        _drop_bounding(libc)
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # from root: every capability is gone with it
    else:
        _drop_capabilities(libc)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot set no_new_privs")
    memory = int(limits.get("memory") or 0)
    if memory > 0:
        import resource

        cap = baseline + memory
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    cpus = _cpus(float(limits.get("cpu") or 0))
    if cpus:
        os.sched_setaffinity(0, cpus)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _drop_bounding(libc: Any) -> None:
    """Empty the capability bounding set: nothing this process runs can ever gain one."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            last = int(fh.read())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)


def _drop_capabilities(libc: Any) -> None:
    """Give up every capability the sandbox's user namespace gave this process, for good."""
    _drop_bounding(libc)
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"cannot drop the sandbox's capabilities: {os.strerror(code)}")


def _address_space() -> int:
    """This process's address space in bytes (what a fork of it starts with)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _cpus(cores: float) -> set[int]:
    """The CPUs a task limited to `cores` may run on (the first whole number of them)."""
    if cores <= 0:
        return set()
    allowed = sorted(os.sched_getaffinity(0))
    wanted = max(1, -(-int(cores * 1000) // 1000))
    return set(allowed[:wanted]) if wanted < len(allowed) else set()


def _describe(limits: Mapping[str, float], baseline: int) -> dict[str, str]:
    """What the task's limits become here, in words (for its record)."""
    enforced = {}
    memory = int(limits.get("memory") or 0)
    if memory > 0:
        enforced["memory"] = (
            f"RLIMIT_AS {memory} bytes above the {baseline} bytes the warm interpreter maps"
        )
    cpus = _cpus(float(limits.get("cpu") or 0))
    if cpus:
        enforced["cpu"] = f"{len(cpus)} CPU{'s' if len(cpus) > 1 else ''} (sched_setaffinity)"
    elif float(limits.get("cpu") or 0) > 0:
        enforced["cpu"] = "not enforced: the limit is at least every CPU this process may use"
    return enforced


def _supervise(task: int, hold: int, holder: int, *, after: Callable[[], None]) -> NoReturn:
    """Wait for the task, end the sandbox, call `after`, exit as the task did."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    status = 0
    while True:
        try:
            pid, status = os.waitpid(task, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == task:
            break
    os.close(hold)  # the holder reads end of file: the sandbox and what is left in it end
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(holder, 0)
    try:
        after()
    except Exception as exc:  # the task's failure, said in its log, not a crash of ours
        print(f"headwater: closing the task's sandbox failed: {exc}", file=sys.stderr)
        if os.waitstatus_to_exitcode(status) == 0:
            status = 1 << 8
    sys.stdout.flush()
    sys.stderr.flush()
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        with contextlib.suppress(OSError, ValueError):
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        code = 128 - code
    os._exit(code)
