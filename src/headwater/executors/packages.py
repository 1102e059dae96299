"""`packages_to_install`: check them against this environment, or install them once, cached.

Headwater never runs a component's `pip install` prelude (it would reinstall kfp into the
user's environment). Instead the requirements are checked against what is installed here; with
`--install-packages`, the missing ones go into a directory keyed by the requirement set under
`$HEADWATER_HOME/envs/`, installed once and put first on the task's `sys.path` and on the
`PYTHONPATH` of every process the task starts. pip's output is kept there (`install.log`)
and shown at the top of the log of every task that uses them; a failed install fails with
pip's own `ERROR:` lines.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from headwater import config
from headwater.errors import MissingPackagesError, UserError
from headwater.spec.ir import PipelineIR

#: pip's output, kept in the directory it installed into.
INSTALL_LOG = "install.log"
_PIP_INSTALL = re.compile(r"python3 -m pip install (.*?)(?:&&|$)", re.S)
_OPTIONS_WITH_VALUE = {
    "--index-url",
    "-i",
    "--extra-index-url",
    "--trusted-host",
    "-f",
    "--find-links",
}
#: What KFP's prelude installs for itself (`kfp`, pinned or not; not `kfp-kubernetes`).
_KFP_OWN = re.compile(r"(kfp|typing-extensions)($|[=<>!~\[;\s])")


def requirements(container: dict[str, Any]) -> list[str]:
    """The `packages_to_install` in a lightweight component's command (kfp itself excluded)."""
    command = [str(c) for c in container.get("command") or []]
    if len(command) < 3 or command[:2] != ["sh", "-c"] or "pip install" not in command[2]:
        return []
    found: list[str] = []
    for segment in _PIP_INSTALL.findall(command[2]):
        tokens = shlex.split(segment)
        skip = False
        for token in tokens:
            if skip:
                skip = False
                continue
            if token in _OPTIONS_WITH_VALUE:
                skip = True
                continue
            if token.startswith("-") or _KFP_OWN.match(token):
                continue
            found.append(token)
    return found


def missing(reqs: list[str]) -> list[str]:
    """The requirements this interpreter does not satisfy."""
    if not reqs:
        return []
    # Imported here: most pipelines install nothing, and `headwater run` starts faster without.
    import importlib.metadata

    from packaging.requirements import InvalidRequirement, Requirement

    absent = []
    for text in reqs:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            absent.append(text)  # a URL or VCS requirement: only pip can tell
            continue
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            version = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            absent.append(text)
            continue
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            absent.append(text)
    return absent


def prepare_packages(ir: PipelineIR, *, install: bool) -> tuple[str, ...]:
    """Check every executor's packages; install the missing ones when allowed.

    Returns:
        Directories to put first on tasks' `sys.path` and `PYTHONPATH` (empty when nothing
        was missing).

    Raises:
        MissingPackagesError: Packages are missing and `install` is False.
    """
    absent: dict[str, list[str]] = {}
    for label, executor in ir.executors.items():
        container = executor.get("container")
        if container:
            for req in missing(requirements(container)):
                absent.setdefault(req, []).append(label.removeprefix("exec-"))
    if not absent:
        return ()
    reqs = sorted(absent)
    if not install:
        where = "; ".join(f"{r} (for {', '.join(c)})" for r, c in absent.items())
        raise MissingPackagesError(
            f"packages_to_install not installed here: {where}. Install them "
            f"(pip install {' '.join(shlex.quote(r) for r in reqs)}) or run with "
            "--install-packages"
        )
    return (str(_environment(reqs)),)


def python_path_for(container: dict[str, Any], *, install: bool) -> tuple[str, ...]:
    """One task's `packages_to_install`, resolved where it runs (a Dask worker, say).

    Returns:
        Directories to put first on the task's `sys.path` ((), when nothing is missing).

    Raises:
        MissingPackagesError: Packages are missing here and `install` is False.
    """
    reqs = sorted(missing(requirements(container)))
    if not reqs:
        return ()
    if not install:
        raise MissingPackagesError(
            f"packages_to_install not installed here: {', '.join(reqs)}. Install them "
            f"(pip install {' '.join(shlex.quote(r) for r in reqs)}) or run with "
            "--install-packages"
        )
    return (str(_environment(reqs)),)


def _environment(reqs: list[str]) -> Path:
    """The directory holding `reqs`, installed once per requirement set (and per host)."""
    digest = hashlib.sha256("\n".join(reqs).encode()).hexdigest()[:16]
    target = config.envs_dir() / digest
    if (target / ".complete").exists():
        return target
    with _INSTALLING:  # two tasks of one worker needing the same set: install it once
        if not (target / ".complete").exists():
            _install(reqs, target)
    return target


_INSTALLING = threading.Lock()


def _install(reqs: list[str], target: Path) -> None:
    """pip-install `reqs` into `target`, which is marked complete only once they all are."""
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"cannot install packages_to_install into {str(target)!r}: "
            f"{exc.strerror or exc}: make it writable, or set HEADWATER_HOME to a writable "
            "directory"
        ) from exc
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "--target",
            str(target),
            *reqs,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    output = proc.stdout or ""
    # Kept beside the packages: each task that uses them shows it in its log (`launcher`).
    with contextlib.suppress(OSError):
        (target / INSTALL_LOG).write_text(f"$ pip install {' '.join(reqs)}\n{output}")
    if proc.returncode != 0:
        lines = output.strip().splitlines()
        errors = [line for line in lines if line.startswith("ERROR:")] or lines[-1:]
        raise UserError(f"installing {' '.join(reqs)} failed: {' '.join(errors) or 'pip failed'}")
    (target / ".complete").touch()
