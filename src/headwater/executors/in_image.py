"""The in-task side of a task that runs in its container image.

The task process stays on the host and supervises the container: it has already staged the
task's inputs and applied its kfp-kubernetes plan (`launcher.run_task`), then runs
`<runtime> run --rm` attached, with its stdout and stderr the task's log (masked as on the
host), and settles the outputs after the container exited 0. Its exit code is the task's.

What the container sees (the mounts design):

* Paths as on the host: the task's directory (its parameter outputs, ExecutorInput and
  output, staged remote artifacts), the directory of its output artifacts, the run's
  workspace (read-write) and each local input artifact (read-only) are bind-mounted at the
  paths KFP's placeholders resolved to, so `command` and `args` run exactly as resolved, as
  `kfp.local`'s DockerRunner mounts its pipeline root.
* kfp-kubernetes volumes, secrets and config maps as volumes at their mount paths (secrets
  read-only); scratch volumes as tmpfs where KFP asks for memory.
* Its environment: the component's `env`, the secrets and config maps given as variables
  (passed by name, so no value is ever on a command line), the run's own variables, and the
  GPUs it was given, renumbered from 0 as the container sees them.
* A lightweight Python component (`containers: always`) runs KFP's executor from this
  machine's `kfp` package, mounted read-only at `/headwater/kit` (it needs nothing beyond the
  standard library when `_KFP_RUNTIME` is set), and its `packages_to_install` from an
  environment pip installed into that image once (cached under
  `$HEADWATER_HOME/containers/packages`, keyed by the image's id).

A signal that ends the task (terminate, Ctrl-C, a kfp-kubernetes deadline) stops and removes
its container first. If the task process is killed outright, its executor removes the
container by its labels (`containers.remove`), and a sweep removes what a dead executor left.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from headwater.errors import ContainerError
from headwater.paths import local_path
from headwater.task import Launch

#: Where KFP's executor and installed packages are inside a container.
KIT = "/headwater/kit"
PACKAGES = "/headwater/packages"
PIP = "/headwater/pip"

#: Where the task records the image id it resolved itself (the engine reads it back).
CONTAINER_FILE = "container.json"
#: Variables the runtime reads itself: passed with their values on its command line.
_RUNTIME_OWN = re.compile(
    r"(HOME|PATH|TMPDIR|USER|LOGNAME|SHELL|REGISTRY_AUTH_FILE|"
    r"(XDG|DOCKER|CONTAINER|CONTAINERS|PODMAN|BUILDAH|STORAGE|LD)_\w*)"
    r"|(?i:(http|https|no|all)_proxy)"
)

_child: subprocess.Popen[bytes] | None = None
_host_env: dict[str, str] | None = None
_name = ""
_runtime = ""
_kind = ""


def run_in_image(payload: dict[str, Any], env: dict[str, str], host_env: dict[str, str]) -> int:
    """Run the task in its image and return its exit code.

    Args:
        payload: The task's payload; `payload["in_image"]` says how (see
            `LocalExecutor._payload`).
        env: The variables the container gets (names and values).
        host_env: The environment the runtime itself runs with (this machine's, not the
            task's: a task's HOME or DOCKER_HOST must not move the runtime's storage).

    Raises:
        ContainerError: No runtime here, or the image cannot be found or pulled.
    """
    global _child, _name, _runtime, _host_env, _kind
    from headwater.executors import containers

    spec = payload["in_image"]
    _host_env = host_env
    with _as_host(host_env):
        runtime = spec["runtime"] or containers.find_runtime()
    if runtime is None:
        raise ContainerError(
            f"task runs in image {spec['image']!r} and no container runtime is found on "
            f"{os.uname().nodename}: install Podman or Docker there, or run with --containers never"
        )
    ref = spec["ref"]
    record = os.path.join(payload["workdir"], CONTAINER_FILE)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(record)  # an earlier attempt's
    if not spec["digest"]:  # pulled and resolved here: absent for the engine, or a Dask worker
        with _as_host(host_env):
            ref = containers.ensure_image(runtime, spec["image"], spec["pull"])[0]
        print(f"headwater: image {spec['image']} is {ref} here", file=sys.stderr, flush=True)
        with open(record, "w", encoding="utf-8") as fh:
            json.dump({"digest": ref}, fh)
    # From here a signal that ends the task removes its container (or its packages' one).
    _runtime, _name, _kind = runtime, f"{spec['name']}-pip", spec.get("kind") or ""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
        signal.signal(sig, _stop)
    mounts = [m for m in spec["mounts"] if not m[0] or os.path.exists(m[0])]
    env = dict(env)
    if spec["python"]:
        packages = _packages(runtime, ref, spec, host_env)
        env["PYTHONPATH"] = os.pathsep.join([KIT, *([PACKAGES] if packages else [])])
        mounts.append([spec["kit"], f"{KIT}/kfp", True])
        if packages:
            mounts.append([packages, PACKAGES, True])
    argv = run_argv(runtime, ref, spec, mounts, env)
    _name = spec["name"]
    sys.stdout.flush()
    sys.stderr.flush()
    passed = {k: v for k, v in env.items() if not _RUNTIME_OWN.fullmatch(k)}
    _child = subprocess.Popen(argv, env={**host_env, **passed}, stdin=subprocess.DEVNULL)
    code = _child.wait()
    if code == 125:
        # The runtime's own failure (it said why on stderr, in the log): not the task's code.
        raise ContainerError(
            f"{_kind or containers.kind(runtime)} could not run image {spec['image']!r} (exit code "
            f"{code}): see the task's log for the runtime's message"
        )
    return code


def run_argv(
    runtime: str,
    ref: str,
    spec: dict[str, Any],
    mounts: list[list[Any]],
    env: dict[str, str],
    *,
    user: tuple[int, int] | None = None,
) -> list[str]:
    """The runtime's `run` command line for one task (values of `env` are not on it), for
    `user` (uid, gid; default this process's)."""
    from headwater.executors import containers

    # Asked once by the executor (`container_spec`): not a `--version` per task.
    docker = (spec.get("kind") or containers.kind(runtime)) == "docker"
    uid, gid = user if user is not None else (os.getuid(), os.getgid())
    argv = [runtime, "run", "--rm", "--name", spec["name"]]
    for key, value in spec["labels"].items():
        argv += ["--label", f"{key}={value}"]
    if docker and uid != 0:
        # Docker's daemon runs the container as the image's user (often root): files it
        # writes into the user's tree must stay theirs to delete.
        argv += ["--user", f"{uid}:{gid}"]
    if spec.get("cpu_limit"):
        argv += ["--cpus", f"{spec['cpu_limit']:g}"]
    if spec.get("memory_limit"):
        argv += ["--memory", str(int(spec["memory_limit"]))]
    gpus = spec.get("gpus") or []
    if gpus:
        if docker:  # quoted: Docker reads the value as CSV, and "1" alone as a count
            argv += ["--gpus", f'"device={",".join(gpus)}"']
        else:
            for gpu in gpus:  # CDI names, as `nvidia-ctk cdi generate` writes them
                argv += ["--device", f"nvidia.com/gpu={gpu}"]
    for source, target, read_only in sorted(mounts, key=lambda m: str(m[1]).count("/")):
        if "," in f"{source}{target}":
            raise ContainerError(
                f"cannot mount {source or target!r} into the container: the path has a comma, "
                "which the runtime's --mount cannot take; use a path without one"
            )
        if source:
            argv += ["--mount", f"type=bind,source={source},target={target}"]
            argv[-1] += ",ro" if read_only else ""
        else:
            argv += ["--tmpfs", str(target)]
    for key in sorted(env):
        if _RUNTIME_OWN.fullmatch(key):
            # A name the runtime reads itself (HOME, DOCKER_HOST...): its value goes here,
            # so that the runtime keeps its own.
            argv += ["-e", f"{key}={env[key]}"]
        else:
            argv += ["-e", key]  # the value comes from the runtime's environment, not argv
    argv += [*spec["args"], ref, *spec["argv"]]
    return argv


def _packages(runtime: str, ref: str, spec: dict[str, Any], host_env: dict[str, str]) -> str | None:
    """The environment of the task's `packages_to_install` installed in its image, or None."""
    reqs = spec.get("requirements") or []
    if not reqs:
        return None
    from headwater import config
    from headwater.executors.containers import kind
    from headwater.executors.packages import environment

    # Docker runs it as the image's user (often root): what it installs stays the user's.
    docker = (spec.get("kind") or kind(runtime)) == "docker"
    user = ["--user", f"{os.getuid()}:{os.getgid()}"] if docker else []

    def pip(work: str, names: Sequence[str]) -> list[str]:
        # The index options' variables by name: their values (URLs that may hold a password)
        # come from the runtime's environment, never its command line.
        return [
            runtime, "run", "--rm", "--name", _name, "--network=host",
            *(user if os.getuid() else []),
            *[part for k, v in spec["labels"].items() for part in ("--label", f"{k}={v}")],
            "-v", f"{work}:{work}:rw", "-v", f"{spec['pip']}:{PIP}/pip:ro",
            "-e", f"PYTHONPATH={PIP}", "-e", "PIP_NO_CACHE_DIR=1",
            *[part for name in names for part in ("-e", name)], *spec["args"], ref,
            "python3", "-m", "pip",
        ]  # fmt: skip

    root = config.containers_dir() / "packages"
    with _as_host(host_env):  # pip's container is run by the runtime, as this machine's
        found = environment(reqs, spec.get("index_options") or (), root=root, scope=ref, pip=pip)
    print(f"headwater: packages_to_install in image {spec['image']} from {found}", file=sys.stderr)
    return str(found)


@contextlib.contextmanager
def _as_host(host_env: dict[str, str]) -> Iterator[None]:
    """Run what is inside with this machine's environment, not the task's: the runtime's
    commands must not see a task's HOME, PATH or CONTAINER_HOST. (The task process is one
    thread here.)"""
    task_env = dict(os.environ)
    os.environ.clear()
    os.environ.update(host_env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(task_env)


def _stop(signum: int, _frame: object) -> None:
    """End the container before this process ends the way the signal says."""
    from headwater.executors.containers import remove_command

    with contextlib.suppress(Exception):
        subprocess.run(
            [*remove_command(_runtime, _kind), _name],
            env=_host_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
            check=False,
        )
    if _child is not None:
        with contextlib.suppress(Exception):
            _child.kill()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def container_spec(
    launch: Launch,
    payload: dict[str, Any],
    component_input: dict[str, Any],
    *,
    runtime: str,
    labels: dict[str, str],
) -> dict[str, Any]:
    """The engine's side: what the task process needs to run `launch` in its image.

    Args:
        launch: The attempt; `launch.in_image` is set.
        payload: Its payload as made so far (its argv or Python source and args).
        component_input: The ExecutorInput the component sees (local paths).
        runtime: The runtime's program.
        labels: The container's labels (its owner, run and task).
    """
    import importlib.util

    from headwater.executors.packages import index_options, requirements

    spec = launch.in_image
    assert spec is not None
    workdir = str(launch.workdir)
    outputs = component_input["outputs"]
    mounts: list[list[Any]] = [
        [workdir, workdir, False],
        [launch.placeholders.workspace_path, launch.placeholders.workspace_path, False],
    ]
    # A local pipeline root, read-write, as kfp.local mounts it: a component may put its
    # outputs anywhere under it (`dsl.get_uri()`, a URI it sets), and the engine honours that.
    # A sandboxed run's container gets its own outputs' folders only, as its host tasks do.
    root = local_path(launch.placeholders.pipeline_root)
    if root and launch.sandbox is None:
        mounts.append([os.path.abspath(root), os.path.abspath(root), False])
    written = {
        os.path.dirname(path)
        for slot in (outputs.get("artifacts") or {}).values()
        for art in slot["artifacts"]
        if (path := local_path(art["uri"]))
    }
    mounts += [
        [d, d, False] for d in sorted(written) if not any(_inside(d, str(m[0])) for m in mounts)
    ]
    # Inputs read-only, wherever they are (under the root too: a task cannot change them).
    read = {
        path
        for slot in (component_input["inputs"].get("artifacts") or {}).values()
        for art in slot["artifacts"]
        if art.get("uri") and (path := local_path(art["uri"])) and os.path.isabs(path)
    }
    mounts += [[p, p, True] for p in sorted(read) if not _inside(p, workdir)]
    env: dict[str, str] = {}
    gpus = [g for g in launch.device_env.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
    if gpus:  # the container sees only its GPUs, numbered from 0
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(gpus)))
    module = os.path.join(workdir, "ephemeral_component.py")
    if spec.python:
        argv = [
            "python3", "-m", "kfp.dsl.executor_main", "--component_module_path", module,
            *payload["args"],
        ]  # fmt: skip
        env.update(_KFP_RUNTIME="true", PYTHONDONTWRITEBYTECODE="1")
    else:
        argv = list(payload["argv"])

    def package_dir(name: str) -> str:
        found = importlib.util.find_spec(name)
        locations = list(found.submodule_search_locations or []) if found else []
        return locations[0] if locations else ""

    name = "headwater-" + "-".join(
        [launch.placeholders.job_uuid[:8], str(launch.task_id), str(launch.attempt)]
    )
    from headwater.executors.containers import kind

    return {
        "runtime": runtime,
        "kind": kind(runtime),
        "image": spec.image,
        "ref": spec.ref,
        "digest": spec.digest,
        "pull": spec.pull,
        "python": spec.python,
        # A sandboxed run's container gains no privilege from a setuid program in its image.
        "args": [*(["--security-opt", "no-new-privileges"] if launch.sandbox else []), *spec.args],
        "name": f"{name}-{os.urandom(3).hex()}",
        "labels": labels,
        "mounts": mounts,
        "cpu_limit": spec.cpu_limit,
        "memory_limit": spec.memory_limit,
        "gpus": gpus,
        "env": env,
        "argv": argv,
        "module": module,
        "kit": package_dir("kfp") if spec.python else "",
        "pip": package_dir("pip") if spec.python else "",
        "requirements": requirements(launch.container) if spec.python else [],
        "index_options": _hosts(index_options(launch.container)) if spec.python else [],
    }


def _hosts(options: list[str]) -> list[str]:
    """pip's options with each `--trusted-host` a host[:port], as pip documents it: KFP
    writes the index's URL there, which an image's older pip or Python may refuse."""
    from urllib.parse import urlsplit

    fixed = list(options)
    for i, value in enumerate(fixed[1:], start=1):
        if fixed[i - 1] == "--trusted-host" and "://" in value:
            fixed[i] = urlsplit(value).netloc or value
    return fixed


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")
