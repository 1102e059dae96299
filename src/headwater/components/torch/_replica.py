"""One replica of a PyTorchJob: the process that runs the training function, and its handle.

`python -m headwater.components.torch._replica SPEC.json` is one replica. The spec (JSON)
names the target (`"pkg.module:function"` or `"path/to/file.py:function"`), its keyword
arguments, the pid of the process that started it and, for rank 0, where to write the
function's return value as JSON. The rendezvous variables (MASTER_ADDR, RANK...) come in the
environment. A replica whose parent goes away kills itself and its process group, so no
replica outlives its launcher, even one killed with SIGKILL.

`ReplicaProcess` starts one replica in its own process group (`job.launch` locally, and the
Dask task on each worker), streams its output lines from reader threads, keeps the tail of
each stream for error messages, and stops the whole group: SIGTERM, then SIGKILL.

`remote_replica` is the Dask task of a replica on another worker: it unpacks the job's files
(`pack`) in the worker's scratch space, rewrites the paths in the arguments to the copies
(`moved`), runs a `ReplicaProcess`, sends its lines to the job's topic, and stops it when the
job's stop event is set. Workers import this module; it imports neither torch nor
distributed until a function needs them.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from headwater._deps import require

#: Lines kept from each of a replica's streams for the error message.
TAIL_LINES = 40
#: Longest line passed on at once: a progress bar redrawn with `\r` never ends its line.
_MAX_LINE = 16 * 1024
_PARENT_POLL_S = 0.5
#: How long stopped replicas get after SIGTERM, and how often a remote one looks for the stop.
STOP_GRACE_S = 3.0
POLL_S = 0.25
#: Lines a remote replica holds between two flushes to the job's topic before it drops some.
_MAX_BUFFERED_LINES = 2000


def target_path(target: str) -> str | None:
    """The Python file a `"path/to/file.py:function"` target names, or None for a module."""
    module = target.rpartition(":")[0]
    return module if module.endswith(".py") or "/" in module or os.sep in module else None


def _load(target: str) -> Callable[..., Any]:
    from headwater.errors import UserError
    from headwater.loading import code_file, load_file, split

    module_name, name = split(target)
    path = target_path(target)
    if path is not None:
        found_file = code_file(path)
        module = load_file(found_file) if found_file.suffix == ".py" else _source(found_file)
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise UserError(
                f"cannot import {module_name!r} for {target!r} ({exc}); install it where the "
                "replicas run, or pass the code as a file ('path/to/file.py:function')"
            ) from exc
    found = getattr(module, name, None)
    if not callable(found):
        raise UserError(f"{target!r}: {module_name!r} has no function {name!r}")
    return found  # type: ignore[no-any-return]


def _source(path: Path) -> Any:
    """The module in `path`, a Python file without the `.py` a KFP artifact's path lacks."""
    import hashlib
    import importlib.machinery
    import importlib.util

    from headwater.errors import UserError

    resolved = path.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    name = f"headwater_user_code_{resolved.name}_{digest}"
    loader = importlib.machinery.SourceFileLoader(name, str(resolved))
    spec = importlib.util.spec_from_loader(name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(resolved.parent))  # so it may import its siblings
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except Exception as exc:
        raise UserError(
            f"loading {path.name!r} failed: {type(exc).__name__}: {exc}".splitlines()[0]
        ) from exc
    return module


def _watch_parent(parent: int) -> None:
    """Kill this replica's process group once `parent` is gone (its pid is not our ppid)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_POLL_S)
        os.killpg(os.getpgrp(), signal.SIGKILL)

    threading.Thread(target=watch, name="headwater-parent-watch", daemon=True).start()


def main(argv: list[str]) -> int:
    """Run the replica that the spec file `argv[0]` describes; return its exit status."""
    from headwater.errors import UserError

    spec = json.loads(Path(argv[0]).read_text())
    if os.getpgrp() == os.getpid():  # only a group leader may take its group down with it
        _watch_parent(int(spec["parent"]))
    try:
        function = _load(spec["target"])
    except UserError as exc:
        print(f"headwater: {exc}", file=sys.stderr, flush=True)
        return 2
    torch = sys.modules.get("torch")
    threads = int(os.environ.get("OMP_NUM_THREADS") or 0)
    if torch is not None and threads > 0:
        torch.set_num_threads(threads)
    try:
        result = function(**spec["kwargs"])
    except Exception:
        traceback.print_exc()
        return 1
    sys.stdout.flush()
    if spec.get("result"):
        try:
            text = json.dumps(result)
        except (TypeError, ValueError) as exc:
            print(
                f"TypeError: rank 0 returned a {type(result).__name__}, which is not "
                f"JSON-serialisable ({exc}); return numbers, strings, lists or dicts",
                file=sys.stderr,
                flush=True,
            )
            return 1
        partial = Path(spec["result"] + ".partial")
        partial.write_text(text)
        partial.replace(spec["result"])
    return 0


class ReplicaProcess:
    """One replica process in its own process group, its output streamed line by line.

    Args:
        rank: The replica's rank (names it in the lines passed on).
        spec_path: The replica's spec file (see the module's docstring).
        env: The replica's whole environment.
        on_line: Called from a reader thread with (rank, line) for every output line.
        on_exit: Called from a waiter thread with (rank, exit code) once the process ended
            and its streams were read to the end.
        cwd: The replica's working directory (None: this one).
    """

    def __init__(
        self,
        rank: int,
        spec_path: Path,
        env: Mapping[str, str],
        on_line: Callable[[int, str], None],
        on_exit: Callable[[int, int], None] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.rank = rank
        self.stderr_tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.stdout_tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.stopped = False  # signalled by `stop` while it still ran
        self.ended_at: float | None = None  # time.time() when it exited
        self._on_line = on_line
        self._on_exit = on_exit
        argv = [sys.executable, "-m", "headwater.components.torch._replica", str(spec_path)]
        self.proc = subprocess.Popen(
            argv,
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self._readers = [
            threading.Thread(target=self._read, args=(stream, tail), daemon=True)
            for stream, tail in (
                (self.proc.stdout, self.stdout_tail),
                (self.proc.stderr, self.stderr_tail),
            )
        ]
        for reader in self._readers:
            reader.start()
        threading.Thread(target=self._wait, name=f"replica-{rank}-wait", daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self, stream: IO[bytes] | None, tail: deque[str]) -> None:
        if stream is None:
            return
        with stream:
            while chunk := stream.readline(_MAX_LINE):
                line = chunk.decode("utf-8", errors="replace").rstrip("\r\n")
                tail.append(line)
                with contextlib.suppress(Exception):  # a failing log must not stop the reader
                    self._on_line(self.rank, line)

    def _wait(self) -> None:
        code = self.proc.wait()
        self.ended_at = time.time()
        for reader in self._readers:  # a child still holding the pipe must not block the end
            reader.join(timeout=2.0)
        if self._on_exit is not None:
            self._on_exit(self.rank, code)

    def last_error_line(self) -> str:
        """The replica's last line on stderr (else on stdout), or "" if it wrote nothing."""
        for tail in (self.stderr_tail, self.stdout_tail):
            for line in reversed(tail):
                if line.strip():
                    return line.strip()
        return ""

    def signal_group(self, sig: signal.Signals) -> None:
        """Send `sig` to the replica's process group (what it started, too)."""
        if self.proc.poll() is None:
            self.stopped = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)


def stop_all(replicas: Iterable[ReplicaProcess], grace_s: float = 3.0) -> None:
    """Stop every replica's process group: SIGTERM, then SIGKILL what outlives `grace_s`.

    Returns once every replica process has ended (its exit code is then known).
    """
    chosen = list(replicas)
    for replica in chosen:
        replica.signal_group(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for replica in chosen:
        with contextlib.suppress(subprocess.TimeoutExpired):
            replica.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    for replica in chosen:
        # Also what a replica left behind in its group after it ended.
        replica.signal_group(signal.SIGKILL)
        replica.proc.wait()


# Dask: the task that runs one replica on a worker, with the job's files.


def write_spec(path: Path, target: str, kwargs: Any, result: Path | None) -> Path:
    """Write a replica's spec file (see the module's docstring) to `path`; return `path`.

    The replica's parent is this process; `result` is None for every rank but 0.
    """
    spec = {
        "target": target,
        "kwargs": kwargs,
        "parent": os.getpid(),
        "result": str(result) if result is not None else "",
    }
    path.write_text(json.dumps(spec))
    return path


def pack(paths: Sequence[str]) -> bytes:
    """`paths` (files or directories) as one tar: the i-th as `i/<its name>`."""
    buffer = io.BytesIO()
    # Links are followed: a link out of a dataset directory would not unpack safely.
    with tarfile.open(fileobj=buffer, mode="w", dereference=True) as tar:
        for i, path in enumerate(paths):
            tar.add(path, arcname=f"{i}/{_name(path)}", recursive=True)
    return buffer.getvalue()


def _name(path: str) -> str:
    return Path(path).resolve().name or "input"


def moves_for(paths: Sequence[str], root: str) -> list[tuple[str, str]]:
    """(old, new) prefixes: each path as given and absolute -> its copy under `root`."""
    moves: list[tuple[str, str]] = []
    for i, path in enumerate(paths):
        new = os.path.join(root, str(i), _name(path))
        for old in dict.fromkeys((os.path.normpath(path), os.path.abspath(path))):
            moves.append((old, new))
    return moves


def moved(value: Any, moves: Sequence[tuple[str, str]]) -> Any:
    """`value` with every string naming a moved path (or a path under one) rewritten."""
    if isinstance(value, str):
        for candidate in dict.fromkeys((value, os.path.normpath(value) if value else value)):
            for old, new in moves:
                if candidate == old or candidate.startswith(old.rstrip("/") + "/"):
                    return new + candidate[len(old) :]
        return value
    if isinstance(value, dict):
        return {k: moved(v, moves) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [moved(v, moves) for v in value]
    return value


def covered(path: str, paths: Sequence[str]) -> bool:
    """Whether `path` is one of `paths` or inside one of them."""
    return bool(moved(path, moves_for(paths, "/")) != path)


def moved_target(target: str, moves: Sequence[tuple[str, str]]) -> str:
    path = target_path(target)
    if path is None:
        return target
    return f"{moved(path, moves)}:{target.rpartition(':')[2]}"


def remote_replica(spec: dict[str, Any], blob: bytes | None) -> dict[str, Any]:
    """One replica on this Dask worker: the Dask task of each remote rank.

    Unpacks the job's files into the worker's scratch space, starts the replica process,
    sends its output lines to the job's topic (`log_event`), and stops it when the job's
    stop event is set or this task is cancelled.

    Returns:
        exit (code, or None when never started), stopped (ended by the job), last (its last
        line of output), tail (its last lines of stderr), ended (time.time()), result (rank
        0's JSON text) and worker.
    """
    distributed = distributed_module()
    worker = distributed.get_worker()
    key = worker.get_current_task()
    stop = distributed.Event(spec["stop"])
    rank, topic = int(spec["rank"]), str(spec["topic"])
    outcome: dict[str, Any] = {"exit": None, "stopped": True, "last": "", "ended": time.time()}
    outcome.update(result=None, worker=str(worker.address))
    if stop.is_set():
        return outcome
    workdir = Path(worker.local_directory) / "headwater-job" / f"{spec['job']}-rank-{rank}"
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        moves: list[tuple[str, str]] = []
        if blob is not None:
            with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
                tar.extractall(workdir / "files", filter="data")
            moves = moves_for(spec["files"], str(workdir / "files"))
        result = workdir / "result.json"
        spec_path = write_spec(
            workdir / "spec.json",
            moved_target(spec["target"], moves),
            moved(spec["kwargs"], moves),
            result if rank == 0 else None,
        )
        lines: list[str] = []
        dropped = [0]
        lock = threading.Lock()

        def on_line(_: int, line: str) -> None:
            with lock:
                lines.append(line)
                if len(lines) > _MAX_BUFFERED_LINES:
                    del lines[0]
                    dropped[0] += 1

        def flush() -> None:
            with lock:
                batch = lines[:]
                lines.clear()
                if dropped[0]:
                    batch.insert(0, f"[{dropped[0]} lines dropped: more than the log can carry]")
                    dropped[0] = 0
            if batch:
                worker.log_event(topic, {"rank": rank, "lines": batch})

        drained = threading.Event()
        env = {**os.environ, **spec["env"]}
        replica = ReplicaProcess(
            rank, spec_path, env, on_line, lambda r, c: drained.set(), cwd=workdir
        )
        worker.log_event(topic, {"rank": rank, "started": replica.pid})
        try:
            while replica.proc.poll() is None:
                if stop.wait(timeout=POLL_S) or cancelled_task(worker, key):
                    break
                flush()
        finally:
            stop_all([replica], STOP_GRACE_S)  # also what it left running in its group
        drained.wait(timeout=5.0)
        flush()
        outcome.update(
            exit=replica.proc.returncode,
            stopped=replica.stopped,
            last=replica.last_error_line(),
            tail=list(replica.stderr_tail or replica.stdout_tail),
            ended=replica.ended_at or time.time(),
        )
        if replica.proc.returncode == 0 and result.exists():
            outcome["result"] = result.read_text()
        return outcome
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def distributed_module() -> Any:
    """`distributed`, or a MissingDependencyError naming the extra."""
    return require("distributed", "dask", "pytorch_job on Dask (HEADWATER_DASK_SCHEDULER is set)")


def cancelled_task(worker: Any, key: Any) -> bool:
    """Whether the scheduler released this task (its client, the launcher, went away)."""
    try:
        task = worker.state.tasks.get(key)
    except Exception:  # a worker of another make: rely on the stop event alone
        return False
    return task is None or task.state in ("cancelled", "released")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
