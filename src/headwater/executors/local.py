"""`LocalExecutor`: tasks as forked processes of a warm fork server on this machine."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import queue
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Collection
from traceback import format_exception
from typing import IO, Any

from headwater import config
from headwater.errors import ContainerError, HeadwaterError, HeadwaterSystemError
from headwater.executors.base import Executor
from headwater.executors.containers import python_program
from headwater.executors.launcher import ERROR_FILE
from headwater.executors.outputs import collect_outputs, output_plan
from headwater.executors.prestart import PrestartedServer, leave_spare, server_env, start_server
from headwater.executors.staging import stage_remote
from headwater.outcome import OUTCOME_FILE, read_failed
from headwater.processes import process_start
from headwater.spec.placeholders import resolve_args
from headwater.task import Launch, TaskError, TaskResult


class LocalExecutor(Executor):
    """Run each attempt in its own process, forked from a server that has imported KFP.

    A fresh interpreter importing KFP costs 0.1-1 s; a fork of a warm one costs a millisecond
    or two. Each task is still its own process (and process group), so a crash, a leak or
    `os._exit` in one task cannot touch the engine or another task, and nothing a task starts
    outlives it. The server starts in the background as soon as the executor is made, while
    the engine is still loading the pipeline; `headwater run` starts it even earlier, before the
    engine has imported itself, and the executor adopts it (`server`, see `prestart`).
    """

    name = "local"

    def __init__(
        self,
        *,
        server: PrestartedServer | None = None,
        sandboxed: bool = False,
        spare: bool = False,
    ) -> None:
        self._host = socket.gethostname()
        #: Leave a warm fork server for this process's next run when this one shuts down.
        self._spare = spare
        #: Tasks run in sandboxes (`headwater.sandbox`): the fork server, which every task is
        #: a copy of, has none of this process's secrets, and only sandboxed tasks run here.
        self.sandboxed = sandboxed
        adopted = None if server is None else server.adopt(sandboxed=sandboxed)
        if adopted is None:
            self._base_env = server_env(sandboxed)
            self._server = start_server(self._base_env)
        else:
            self._server, self._base_env = adopted
        if self._server.stdin is None or self._server.stdout is None:  # never, with PIPE
            raise HeadwaterSystemError("the task fork server started without its pipes")
        self._requests: IO[bytes] = self._server.stdin
        self._replies: IO[bytes] = self._server.stdout
        # Where a task that fails before its own directory exists writes its error record.
        self._spool = tempfile.mkdtemp(prefix="headwater-task-errors-")
        self._events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="headwater-forkserver", daemon=True)
        self._reader.start()
        # Keyed by a submission number, never reused: an exit reported late for a task of an
        # earlier run (one that was cancelled) can never be taken for a task of this one.
        self._launches: dict[int, Launch] = {}
        self._pids: dict[int, int] = {}
        self._submissions = itertools.count(1)
        self._preloaded: set[str] = set()
        self._used = False
        self._lock = threading.Lock()
        # Containers of tasks in their images carry this, the fork server's identity.
        self._owner = f"{self._host}/{self._server.pid}/{process_start(self._server.pid)}"
        self._found_runtime: str | None = None
        self._swept = False
        # The container each task in its image ran in, by task id (for its result).
        self._containers: dict[int, dict[str, str]] = {}

    def _read(self) -> None:
        for line in self._replies:
            try:
                self._events.put(json.loads(line))
            except ValueError:
                continue
        self._events.put({"closed": True})

    def submit(self, launch: Launch) -> None:
        """Hand `launch` to the fork server and return at once.

        Directories and files are made by the task process, not here: on this path every
        millisecond the engine spends is a millisecond no other task can start.
        """
        submission = next(self._submissions)
        self._launches[submission] = launch
        try:
            payload = self._payload(launch)
        except Exception as exc:  # any of it is this task's failure, not the engine's
            # A placeholder that does not resolve, an artifact that cannot be staged: the task
            # fails with the reason, as if it had run, and the run goes on.
            self._events.put({"id": submission, "error": _record(exc, exit_code=None)})
            return
        payload["error_spool"] = os.path.join(self._spool, f"{submission}.json")
        self._used = True
        request = json.dumps({"id": submission, "payload": payload}) + "\n"
        try:
            self._requests.write(request.encode())
            self._requests.flush()
        except (BrokenPipeError, OSError) as exc:
            raise HeadwaterSystemError(f"the task fork server has exited: {exc}") from exc

    def _payload(self, launch: Launch) -> dict[str, Any]:
        if (launch.sandbox is not None) != self.sandboxed and launch.in_image is None:
            from headwater.errors import SandboxError

            raise SandboxError(
                f"task {launch.name!r} is {'' if launch.sandbox else 'not '}to be sandboxed, and "
                f"this executor's tasks are {'' if self.sandboxed else 'not '}: make a "
                f"LocalExecutor(sandboxed={launch.sandbox is not None}) for its run"
            )
        # The server inherited our environment; send it again only if it has changed since
        # (never to sandboxed tasks: they get what `sandbox.policy.inherited_env` keeps).
        changed = not self.sandboxed and os.environ != self._base_env
        full_env = dict(os.environ) if changed else None
        component_input, downloads, uploads = stage_remote(launch)
        program = python_program(launch.container)
        plan = None
        if program is not None or uploads:
            # The task settles its output artifacts itself once the component succeeded:
            # URIs the component set, custom paths, uploads to a remote root.
            plan, component_input = output_plan(
                launch.executor_input,
                component_input,
                launch.placeholders.pipeline_root,
                python=program is not None,
            )
        placeholders = launch.placeholders
        if component_input is not launch.executor_input:
            placeholders = dataclasses.replace(placeholders, executor_input=component_input)
        if plan is not None:
            # Only runs whose tasks have output artifacts pay for it, once, in the server.
            self._preload("headwater.executors.outputs")
        if downloads or uploads:
            self._preload("headwater.artifacts.fsspec_store", "s3fs")
        outputs = component_input["outputs"]
        seen_artifacts = [
            art["uri"] for spec in outputs["artifacts"].values() for art in spec["artifacts"]
        ]
        payload: dict[str, Any] = {
            "log_path": str(launch.log_path),
            "log_limit": launch.log_limit,
            "attempt": launch.attempt,
            "workdir": str(launch.workdir),
            "dirs": [str(launch.workdir / "outputs"), *map(os.path.dirname, seen_artifacts)],
            "stale": sorted(
                {launch.executor_input["outputs"]["outputFile"], outputs["outputFile"]}
            ),
            # An earlier attempt's output files must not leak into this attempt's artifacts.
            "clear": seen_artifacts,
            "env": full_env,
            "env_update": {"PYTHONUNBUFFERED": "1", **launch.env, **launch.device_env},
            "python_path": list(launch.python_path),
            "downloads": downloads,
            "outputs": plan,
            "artifact_root": launch.placeholders.pipeline_root,
            "platform": None if launch.platform is None else launch.platform.to_payload(),
        }
        if program is not None:
            source, args = program
            payload.update(kind="python", source=source, args=resolve_args(args, placeholders))
        else:
            argv = resolve_args(launch.container.get("command") or [], placeholders)
            argv += resolve_args(launch.container.get("args") or [], placeholders)
            if argv and argv[0] in ("python3", "python") and launch.in_image is None:
                # Images run their own python3; here that is this environment's interpreter.
                argv[0] = sys.executable
            payload.update(kind="command", argv=argv, executor_input=component_input)
        if launch.in_image is not None:
            payload["python_path"] = []  # the image's packages, not this machine's
            payload["in_image"] = self._in_image(launch, payload, component_input)
        elif launch.sandbox is not None:
            from headwater.executors.sandboxed import REQUESTS_FILE, sandbox_spec

            # Imported once, in the server: not a few milliseconds in every task.
            self._preload("headwater.sandbox.join", "headwater.sandbox.policy")

            payload["sandbox"] = sandbox_spec(launch, payload, component_input)
            requests = str(launch.workdir / REQUESTS_FILE)
            payload["env_update"][config.TASK_REQUESTS_ENV] = requests
            payload["stale"].append(requests)
        return payload

    def _in_image(
        self, launch: Launch, payload: dict[str, Any], component_input: dict[str, Any]
    ) -> dict[str, Any]:
        """What the task process needs to run `launch` in its image (`executors.in_image`)."""
        from headwater.executors import containers
        from headwater.executors.in_image import container_spec

        spec = launch.in_image
        assert spec is not None
        if launch.sandbox is not None:
            from headwater.executors.sandboxed import check_inputs

            check_inputs(launch, component_input)  # its inputs are mounted: its own only
        runtime = spec.runtime or self._runtime()
        if not self._swept:
            self._swept = True  # what a killed executor of this machine left, once
            threading.Thread(target=_sweep, args=(runtime,), daemon=True).start()
        self._containers[launch.task_id] = {
            "runtime": runtime, "image": spec.image, "digest": spec.digest,
        }  # fmt: skip
        return container_spec(
            launch,
            payload,
            component_input,
            runtime=runtime,
            labels={
                containers.LABEL_OWNER: self._owner,
                containers.LABEL_RUN: launch.placeholders.job_uuid,
                containers.LABEL_TASK: str(launch.task_id),
            },
        )

    def _runtime(self) -> str:
        """This machine's runtime, for launches that did not name one (they ran elsewhere)."""
        from headwater.executors import containers

        if self._found_runtime is None:
            found = containers.find_runtime()
            if found is None:
                raise ContainerError(
                    f"this task runs in its image and no container runtime is found on "
                    f"{self._host}: install Podman or Docker there, or run with --containers never"
                )
            self._found_runtime = found
        return self._found_runtime

    def _preload(self, *modules: str) -> None:
        """Have the fork server import `modules` once, so tasks do not each import them."""
        wanted = [m for m in modules if m not in self._preloaded]
        if not wanted:
            return
        self._preloaded.update(wanted)
        # A server that has died is reported by the request that follows.
        with contextlib.suppress(OSError):
            self._requests.write((json.dumps({"import": wanted}) + "\n").encode())

    def wait(self, timeout: float | None) -> list[TaskResult]:
        """Wait up to `timeout` s for attempts to end; return each ended one's result."""
        if not self._launches:
            return []
        results: list[TaskResult] = []
        block = True
        while True:
            try:
                event = self._events.get(block=block, timeout=timeout if block else None)
            except queue.Empty:
                return results
            block = False
            if "closed" in event:
                raise HeadwaterSystemError("the task fork server exited unexpectedly")
            if "pid" in event:
                if event["id"] in self._launches:
                    self._pids[event["id"]] = event["pid"]
            elif "exit" in event or "error" in event:
                self._pids.pop(event["id"], None)
                launch = self._launches.pop(event["id"], None)
                if launch is None:
                    continue  # a task cancelled earlier
                if "error" in event:
                    error = _task_error(launch, event["error"], None)
                    result = TaskResult(launch.task_id, error=error)
                else:
                    result = self._result(launch, event["id"], event["exit"])
                    if event["exit"] < 0 and launch.in_image is not None:
                        # Killed outright: its container (Docker's, say) may still run.
                        self._remove_containers([launch], every=False)
                result.worker = self._host
                result.container = _container(launch, self._containers.pop(launch.task_id, None))
                if launch.sandbox is not None and launch.in_image is None:
                    from headwater.executors.sandboxed import read_back

                    result.sandbox, result.requests = read_back(launch, ok=result.ok)
                results.append(result)

    def _result(self, launch: Launch, submission: int, exitcode: int) -> TaskResult:
        if exitcode == 0:
            try:
                outputs = collect_outputs(launch)
            except Exception as exc:  # whatever it wrote, the task failed
                error = _task_error(launch, _record(exc, exit_code=0), 0)
                return TaskResult(launch.task_id, error=error)
            failed = read_failed(launch.workdir / OUTCOME_FILE)
            if failed is not None:  # the task's own words, as an error record's are
                (failed,) = _masked(launch, failed)
            return TaskResult(launch.task_id, outputs=outputs, failed_outcome=failed)
        spooled = os.path.join(self._spool, f"{submission}.json")
        for path in (launch.workdir / ERROR_FILE, spooled):
            try:
                with open(path, encoding="utf-8") as fh:
                    record = json.load(fh)
            except (OSError, ValueError):
                continue
            if isinstance(record, dict) and record:
                return TaskResult(launch.task_id, error=_task_error(launch, record, exitcode))
        if exitcode < 0:
            message = f"killed by {signal.Signals(-exitcode).name}"
        else:
            message = f"exited with code {exitcode}"
        return TaskResult(launch.task_id, error=_error(launch, "ExitCode", message, exitcode))

    def running(self) -> int:
        """Attempts in flight."""
        return len(self._launches)

    def cancel(self, task_ids: Collection[int] | None = None) -> None:
        """Terminate every running task (or those of `task_ids`) and what it started.

        SIGTERM to each task's process group first; a group still alive after a grace period
        gets SIGKILL. What a task started outside its group is killed by the fork server as
        soon as the task has ended (see `forkserver`). Cancelled tasks are never reported.
        """
        chosen = {
            s
            for s, launch in self._launches.items()
            if task_ids is None or launch.task_id in task_ids
        }
        # Pids reported but not read yet belong to tasks that must be stopped too.
        deadline = time.monotonic() + 1.0
        while any(s not in self._pids for s in chosen) and time.monotonic() < deadline:
            try:
                event = self._events.get(timeout=0.05)
            except queue.Empty:
                continue
            if "pid" in event and event["id"] in self._launches:
                self._pids[event["id"]] = event["pid"]
            elif "exit" in event or "error" in event:
                if event["id"] in chosen or event["id"] not in self._launches:
                    self._launches.pop(event["id"], None)
                else:
                    self._events.put(event)  # another task's end: reported by `wait`
                    time.sleep(0.01)
        groups = [self._pids[s] for s in chosen if s in self._pids]
        for pid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5.0
        while groups and time.monotonic() < deadline:
            groups = [pid for pid in groups if _group_alive(pid)]
            if groups:
                time.sleep(0.02)
        for pid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        self._remove_containers(
            [self._launches[s] for s in chosen if s in self._launches], every=task_ids is None
        )
        for submission in chosen:
            self._launches.pop(submission, None)
            self._pids.pop(submission, None)

    def _remove_containers(self, launches: list[Launch], *, every: bool) -> None:
        """Remove the containers of stopped tasks that ran in images (a task killed outright
        could not remove its own): all of this executor's, or those of `launches`."""
        from headwater.executors import containers

        for launch in launches:
            runtime = launch.in_image and (launch.in_image.runtime or self._found_runtime)
            if not runtime:
                continue
            with contextlib.suppress(HeadwaterError):
                task = None if every else str(launch.task_id)
                containers.remove(runtime, owner_label=self._owner, task=task)
            if every:
                return

    def shutdown(self, *, kill: bool = False) -> None:
        """Stop the fork server; with `kill`, terminate running tasks first."""
        if kill:
            self.cancel()
        if not self._requests.closed:
            with contextlib.suppress(OSError):
                self._requests.close()
        if not self._used:
            # Nothing ever ran here (an all-cached run): no need to let it finish warming up.
            self._server.kill()
        # The server exits as soon as its stdin closes (after stopping any task still running).
        self._server.wait()
        self._replies.close()
        shutil.rmtree(self._spool, ignore_errors=True)
        self._launches.clear()
        self._pids.clear()
        if self._spare and not sys.is_finalizing():
            leave_spare(sandboxed=self.sandboxed)


def _container(launch: Launch, known: dict[str, str] | None) -> dict[str, str] | None:
    """The container record of an attempt: the engine's, with the image id the task resolved
    itself when the engine had none (it pulled the image: `in_image.CONTAINER_FILE`)."""
    if known is None or known["digest"]:
        return known
    from headwater.executors.in_image import CONTAINER_FILE

    with contextlib.suppress(OSError, ValueError), open(launch.workdir / CONTAINER_FILE) as fh:
        return {**known, "digest": str(json.load(fh).get("digest") or "")}
    return known


def _sweep(runtime: str) -> None:
    from headwater.executors import containers

    with contextlib.suppress(HeadwaterError):
        containers.sweep(runtime)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _error(launch: Launch, kind: str, message: str, code: int | None) -> TaskError:
    return TaskError(launch.name, kind, message, exit_code=code, log_path=str(launch.log_path))


def _record(exc: BaseException, *, exit_code: int | None) -> dict[str, Any]:
    """The error record of a failure seen on the engine's side (the shape of `error.json`).

    Our own errors say what is wrong in their message; anything else keeps its traceback.
    """
    return {
        "error_type": type(exc).__name__,
        "message": str(exc),
        "traceback": "" if isinstance(exc, HeadwaterError) else "".join(format_exception(exc)),
        "exit_code": exit_code,
    }


def _masked(launch: Launch, *texts: str) -> tuple[str, ...]:
    """`texts` with the values of the task's secrets masked (read only when called: when
    the task failed, or said its outcome is a failure)."""
    masked = launch.platform.masked() if launch.platform is not None else None
    if not masked:
        return texts
    from headwater.platform.apply import secret_masker

    masker = secret_masker(masked)
    return texts if masker is None else tuple(masker.mask(text) for text in texts)


def _task_error(launch: Launch, record: dict[str, Any], exitcode: int | None) -> TaskError:
    # The task masked its own record; this masks what was said about it here (an output
    # parameter that does not parse is quoted).
    message, trace = _masked(
        launch, str(record.get("message") or ""), str(record.get("traceback") or "")
    )
    return TaskError(
        task=launch.name,
        error_type=str(record.get("error_type") or "Error"),
        message=message,
        traceback=trace,
        exit_code=exitcode,
        log_path=str(launch.log_path),
    )
