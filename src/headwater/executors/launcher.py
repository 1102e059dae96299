"""The in-task side: runs in a freshly forked process and executes one attempt of one task.

Lightweight Python components run through KFP's own executor (`kfp.dsl.executor_main`), never
through the `pip install` prelude their command carries; everything else is exec'd as a host
command with its placeholders already resolved. Any failure is written as a structured record
(`error.json`) beside the log so the engine can report type, message and traceback. A task
that succeeded may say its outcome is a failure in another file there (`headwater.outcome`).
A task given secrets masks their values in all three (`_mask_secrets`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import traceback
from typing import TYPE_CHECKING, Any

from headwater.errors import HeadwaterError, PipelineSpecError, PlatformError
from headwater.outcome import OUTCOME_ENV, OUTCOME_FILE

if TYPE_CHECKING:
    from headwater.platform.masking import Masker

ERROR_FILE = "error.json"

#: The values of the secrets this task was given, masked in its output and its error record.
_masker: Masker | None = None


def run_task(payload: dict[str, Any], output: int) -> None:
    """Entry point in the child; `output` is where its stdout and stderr go (the pipe the fork
    server passes on to the log). Never returns: the process exits with the task's code."""
    code = 1
    try:
        _redirect_output(output)
        sandbox = payload.get("sandbox")
        if sandbox is not None:  # an earlier attempt's links, before this process writes there
            from headwater.sandbox.links import remove_escapes

            scanned = [p for p in sandbox["write"] if p != sandbox.get("workspace")]
            remove_escapes(scanned, [*sandbox["write"], *sandbox["read"]])
        _prepare(payload)
        if payload.get("env") is not None:
            os.environ.clear()
            os.environ.update(payload["env"])
            os.environ["_KFP_RUNTIME"] = "true"
        host_env = dict(os.environ)  # what a container runtime runs with (`in_image`)
        os.environ.update(payload.get("env_update") or {})
        # Where the task may say its outcome is a failure (`headwater.outcome`).
        os.environ[OUTCOME_ENV] = os.path.join(payload["workdir"], OUTCOME_FILE)
        if sandbox is None:
            _extend_python_path(payload.get("python_path") or [])
        in_image = payload.get("in_image") is not None
        before = dict(os.environ)
        platform = payload.get("platform")
        whole_task = platform is not None and _apply_platform(payload, in_image, sandbox)
        if not whole_task and platform is not None:
            _mask_secrets(payload)
        if sandbox is not None and not whole_task:
            _enter_sandbox(payload, host_env)  # from here on, this process is inside
            _extend_python_path(payload.get("python_path") or [])
        _download(payload)
        if whole_task:
            code = 0  # CreatePVC / DeletePVC: the platform operation was the whole task
        elif in_image:
            code = _run_in_image(payload, before, host_env)
        elif payload["kind"] == "python":
            code = _run_python(payload)
        elif payload.get("outputs"):
            code = _run_command(payload)  # it must come back here to settle its outputs
        else:
            _exec_command(payload)
        if code == 0:
            _settle_outputs(payload)
    except SystemExit as exc:
        code = _exit_code(exc, payload)
    except BaseException as exc:  # a task's failure must never escape as ours
        code = 127 if isinstance(exc, FileNotFoundError) else 1
        _write_error(payload, exc, exit_code=code)
        if isinstance(exc, HeadwaterError):  # ours says what is wrong: one line, no trace
            print(f"headwater: {type(exc).__name__}: {exc}", file=sys.stderr)
        else:
            traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _prepare(payload: dict[str, Any]) -> None:
    """Make the task's directories and clear what an earlier attempt may have left."""
    workdir = payload["workdir"]
    os.makedirs(workdir, exist_ok=True)
    for path in payload.get("dirs") or ():
        os.makedirs(path, exist_ok=True)
    outputs = os.path.join(workdir, "outputs")
    made = [os.path.join(workdir, name) for name in (ERROR_FILE, OUTCOME_FILE)]
    for stale in [*made, *(payload.get("stale") or ())]:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stale)
    for path in payload.get("clear") or ():
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            with contextlib.suppress(OSError):
                os.unlink(path)
    for name in os.listdir(outputs) if os.path.isdir(outputs) else ():
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(outputs, name))
    if payload.get("executor_input") is not None:
        with open(os.path.join(workdir, "executor_input.json"), "w", encoding="utf-8") as fh:
            json.dump(payload["executor_input"], fh)


def _apply_platform(payload: dict[str, Any], in_image: bool, sandbox: Any) -> bool:
    """Give the task its kfp-kubernetes env, secret files and mounts (see headwater.platform);
    a task in its image gets the mounts as its container's volumes, a sandboxed one as its
    sandbox's (`_enter_sandbox`)."""
    from headwater.platform.apply import apply_platform, volume_mounts

    if in_image:
        payload["in_image"]["mounts"] += volume_mounts(payload["platform"])
    return apply_platform(payload, mount=not in_image and sandbox is None)


def _enter_sandbox(payload: dict[str, Any], host_env: dict[str, str]) -> None:
    """Go on inside the task's sandbox (`headwater.sandbox.join`), with the environment the
    task was given and what of the machine's a sandboxed task inherits, never more.

    The values of its secrets and config maps were read here, outside, where the store is:
    the sandbox shows copies of those it mounts.
    """
    from headwater.sandbox.join import enter
    from headwater.sandbox.policy import inherited_env

    env = inherited_env(host_env)
    for name, path in payload["sandbox"].get("secret_env") or ():
        try:
            with open(path, "rb") as fh:  # the namespace's storage credentials
                env[name] = fh.read().decode("utf-8", "surrogateescape").strip()
        except OSError as exc:
            raise PlatformError(
                f"cannot read ${name} of the namespace's storage secret: {exc.strerror or exc}"
            ) from exc
    env.update({k: v for k, v in os.environ.items() if host_env.get(k) != v})
    env.setdefault("HOME", "/tmp")
    env.setdefault("TMPDIR", "/tmp")
    mounts = list((payload.get("platform") or {}).get("mounts") or ())
    values: dict[str, bytes] = {}
    if mounts:
        from headwater.platform.apply import key_files

        for mount in mounts:
            if mount.get("read_only") and mount.get("source") and not mount.get("owned"):
                for path in key_files(mount["source"]):
                    with contextlib.suppress(OSError), open(path, "rb") as fh:
                        values[path] = fh.read()
    enter(payload["sandbox"], workdir=payload["workdir"], env=env, mounts=mounts, values=values)


def _run_in_image(payload: dict[str, Any], before: dict[str, str], host_env: dict[str, str]) -> int:
    """Run the task in its container image (see `headwater.executors.in_image`).

    The container's environment is the task's own (`env_update`), what its kfp-kubernetes
    plan set here since `before`, and where it may say its outcome; never the host's.
    """
    from headwater.executors.in_image import run_in_image

    spec = payload["in_image"]
    env = {**payload.get("env_update", {}), OUTCOME_ENV: os.environ[OUTCOME_ENV]}
    env.update({k: v for k, v in os.environ.items() if before.get(k) != v and k not in env})
    env.update(spec.get("env") or {})
    if spec["python"]:
        with open(spec["module"], "w", encoding="utf-8") as fh:
            fh.write(payload["source"])
    return run_in_image(payload, env, host_env)


def _mask_secrets(payload: dict[str, Any]) -> None:
    """From here on, mask the values of the task's secrets in all it writes and reports.

    Its output goes through a masking pump (see `headwater.executors.pump`): this process
    becomes the pump and a child of it goes on as the task.
    """
    global _masker
    from headwater.platform.apply import secret_masker

    _masker = secret_masker(payload["platform"].get("masked") or (), warn=True)
    if _masker is not None:
        from headwater.executors.pump import mask_output

        mask_output(_masker)


def _redirect_output(fd: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    # The fork server's stdin is not the user's; a task reading it must see end of file.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115


def _extend_python_path(entries: list[str]) -> None:
    """Put installed `packages_to_install` first on the import path of this task and its children.

    `sys.path` serves the component itself; `PYTHONPATH` serves every Python process it starts
    (a notebook's kernel, a `subprocess.run([sys.executable, ...])`), as a `pip install` into
    the task's image would on Kubernetes.
    """
    if not entries:
        return
    from headwater.executors.packages import INSTALL_LOG

    for entry in entries:
        with contextlib.suppress(OSError):
            with open(os.path.join(entry, INSTALL_LOG), errors="replace") as log:
                output = log.read()
            print(
                f"headwater: packages_to_install from {entry}; pip's output when it installed "
                f"them:\n{output.rstrip()}",
                file=sys.stderr,
                flush=True,
            )
    sys.path[:0] = [e for e in entries if e not in sys.path]
    inherited = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([*entries, *([inherited] if inherited else [])])


def _run_python(payload: dict[str, Any]) -> int:
    sys.dont_write_bytecode = True  # the component module is used once
    module_path = os.path.join(payload["workdir"], "ephemeral_component.py")
    with open(module_path, "w", encoding="utf-8") as fh:
        fh.write(payload["source"])
    sys.argv = ["executor_main", "--component_module_path", module_path, *payload["args"]]
    from kfp.dsl import executor_main

    try:
        executor_main.executor_main()
    except SystemExit as exc:
        return _exit_code(exc, payload)
    except BaseException as exc:
        _write_error(payload, exc, exit_code=1)
        traceback.print_exc()
        return 1
    return 0


def _exec_command(payload: dict[str, Any]) -> None:
    argv = _argv(payload)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe(argv[0], argv, os.environ)


def _argv(payload: dict[str, Any]) -> list[str]:
    argv: list[str] = payload["argv"]
    if not argv:
        raise PipelineSpecError(
            "the task's container has no command or args to run: give its ContainerSpec a command"
        )
    return argv


def _run_command(payload: dict[str, Any]) -> int:
    import subprocess

    argv = _argv(payload)
    sys.stdout.flush()
    sys.stderr.flush()
    return subprocess.call(argv, env=os.environ)


def _store(payload: dict[str, Any]) -> Any:
    from headwater.artifacts import store_for

    return store_for(payload["artifact_root"])


def _download(payload: dict[str, Any]) -> None:
    if payload.get("downloads"):
        store = _store(payload)
        for uri, local in payload["downloads"]:
            store.download(uri, local)


def _settle_outputs(payload: dict[str, Any]) -> None:
    """Record each output artifact where the component put it, and put the bytes there."""
    plan = payload.get("outputs")
    if not plan:
        return
    from headwater.executors.outputs import settle_outputs

    copies = settle_outputs(plan)
    if copies:
        store = _store(payload)
        for local, uri in copies:
            store.upload(local, uri)


def _exit_code(exc: SystemExit, payload: dict[str, Any]) -> int:
    """The exit code of a `sys.exit()`; a failing one is recorded with where it was called."""
    code = exc.code
    if code is None or code == 0:
        return 0
    if not isinstance(code, int):
        print(code, file=sys.stderr)
    _write_error(payload, exc, exit_code=code if isinstance(code, int) else 1)
    return code if isinstance(code, int) else 1


def _write_error(payload: dict[str, Any], exc: BaseException, *, exit_code: int) -> None:
    """Write the structured record the engine reports as this task's error.

    Beside the task's log; where that cannot be written (the task's directory could not be
    made), in the executor's spool, so that the reason still reaches the engine.
    """
    message = f"sys.exit({exc.code!r}) was called" if isinstance(exc, SystemExit) else str(exc)
    ours = isinstance(exc, HeadwaterError)
    trace = "" if ours else "".join(traceback.format_exception(exc))
    if _masker is not None:
        message, trace = _masker.mask(message), _masker.mask(trace)
    record = {
        "error_type": type(exc).__name__,
        "message": message,
        "traceback": trace,
        "exit_code": exit_code,
    }
    text = json.dumps(record)
    for path in (os.path.join(payload["workdir"], ERROR_FILE), payload.get("error_spool")):
        if not path:
            continue
        try:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            return
        except OSError:
            continue
