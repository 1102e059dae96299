"""`packages_to_install`: check them against this environment, or install them once, cached.

Headwater never runs a component's `pip install` prelude (it would reinstall kfp into the
user's environment). Instead the requirements are checked against what is installed here; with
`--install-packages`, the missing ones go into a directory keyed by the requirement set and
the index options (`pip_index_urls`, trusted hosts) under `$HEADWATER_HOME/envs/`, installed
once (one process at a time builds it in a private folder, published whole by one rename)
and put first on the task's `sys.path` and on the `PYTHONPATH` of every process the task
starts. pip's output is kept there (`install.log`)
and shown at the top of the log of every task that uses them; a failed install fails with
pip's own `ERROR:` lines.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater import config
from headwater.errors import MissingPackagesError, UserError
from headwater.spec.ir import PipelineIR

if TYPE_CHECKING:
    from headwater.sandbox.policy import SandboxPolicy

#: pip's output, kept in the directory it installed into.
INSTALL_LOG = "install.log"
#: Words that end a shell command (as KFP writes them, spaced).
_COMMAND_ENDS = frozenset({"&&", "||", ";", "|"})
#: pip's index options KFP writes, unquoted, for `pip_index_urls` / `pip_trusted_hosts`, each
#: with the variable that gives pip the same setting without a command line.
_INDEX_OPTIONS = {
    "--index-url": "PIP_INDEX_URL",
    "--extra-index-url": "PIP_EXTRA_INDEX_URL",
    "--trusted-host": "PIP_TRUSTED_HOST",
}
#: The flags KFP writes, unquoted, into every install.
_KFP_FLAGS = frozenset({"--quiet", "--no-warn-script-location"})
#: What KFP's prelude installs for itself (`kfp`, pinned or not; not `kfp-kubernetes`).
_KFP_OWN = re.compile(r"(kfp|typing-extensions)($|[=<>!~\[;\s])")


def requirements(container: dict[str, Any]) -> list[str]:
    """The `packages_to_install` in a lightweight component's command (kfp itself excluded).

    Raises:
        UserError: An entry is not a requirement (one that starts with `-`, which pip would
            read as an option), or the command cannot be read.
    """
    return _parse(container)[0]


def index_options(container: dict[str, Any]) -> list[str]:
    """The component's `pip_index_urls` and `pip_trusted_hosts` as pip's options, as KFP
    writes them into the command (`--index-url URL`, `--extra-index-url URL`,
    `--trusted-host HOST`), from the install of its own packages."""
    return _parse(container)[1]


def _parse(container: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The requirements and index options of the `pip install` commands in the component's
    `sh -c` script, each install running to the next `&&`, `;` or `||`.

    KFP writes each entry of `packages_to_install` as one quoted word and its own index
    options unquoted before them: a quoted word is a requirement and nothing else, and only
    unquoted options before the first requirement are options (an entry such as
    `--extra-index-url http://...` can never choose the index). The install KFP adds for
    itself (`kfp==V`, `--no-deps`, `typing-extensions`) is left out whole.
    """
    command = [str(c) for c in container.get("command") or []]
    if len(command) < 3 or command[:2] != ["sh", "-c"] or "pip install" not in command[2]:
        return [], []
    try:
        words = _shell_words(command[2])
    except ValueError as exc:  # an unbalanced quote: only the shell would know
        raise UserError(f"cannot read the component's install command: {exc}") from exc
    found: list[str] = []
    options: list[tuple[str, str]] = []
    for tokens in _installs(words):
        quoted = [text for text, q in tokens if q]
        if quoted and all(_KFP_OWN.match(t) or t == "--no-deps" for t in quoted):
            continue  # KFP's install of itself
        reqs: list[str] = []
        given: list[tuple[str, str]] = []
        i = 0
        while i < len(tokens):
            text, was_quoted = tokens[i]
            i += 1
            if not was_quoted and text in _KFP_FLAGS:
                continue
            if not was_quoted and text in _INDEX_OPTIONS and not reqs and i < len(tokens):
                given.append((text, tokens[i][0]))
                i += 1
                continue
            if text.strip().startswith("-"):
                raise UserError(
                    f"packages_to_install entry {text!r} is a pip option, not a requirement: "
                    "list only requirements there, and give indexes with pip_index_urls and "
                    "trusted hosts with pip_trusted_hosts"
                )
            if not _KFP_OWN.match(text):
                reqs.append(text)
        if reqs:  # the user's packages: their index is the one to use
            found += reqs
            options += [o for o in given if o not in options]
    return found, [part for pair in options for part in pair]


def _shell_words(script: str) -> list[tuple[str, bool]]:
    """The words of a POSIX shell script as the shell splits them, each with whether any of
    it was quoted (`'x'`, `"x"`, `\\x`). Raises ValueError for an unbalanced quote."""
    words: list[tuple[str, bool]] = []
    text: list[str] = []
    quoted, started, i = False, False, 0
    while i < len(script):
        char = script[i]
        if char in " \t\n":
            if started:
                words.append(("".join(text), quoted))
            text, quoted, started = [], False, False
        elif char == "'":
            end = script.find("'", i + 1)
            if end < 0:
                raise ValueError("no closing quotation")
            text.append(script[i + 1 : end])
            quoted = started = True
            i = end
        elif char == '"':
            i += 1
            while i < len(script) and script[i] != '"':
                if script[i] == "\\" and i + 1 < len(script) and script[i + 1] in '"\\$`':
                    i += 1
                text.append(script[i])
                i += 1
            if i >= len(script):
                raise ValueError("no closing quotation")
            quoted = started = True
        elif char == "\\" and i + 1 < len(script):
            i += 1
            if script[i] != "\n":
                text.append(script[i])
                quoted = started = True
        else:
            text.append(char)
            started = True
        i += 1
    if started:
        words.append(("".join(text), quoted))
    return words


def _installs(words: list[tuple[str, bool]]) -> Iterator[list[tuple[str, bool]]]:
    """The arguments of each `python3 -m pip install ...` among the script's words."""
    plain = [text for text, _ in words]
    for i in range(len(plain) - 3):
        if plain[i + 1 : i + 4] == ["-m", "pip", "install"] and plain[i].startswith("python"):
            end = i + 4
            while end < len(words) and not (plain[end] in _COMMAND_ENDS and not words[end][1]):
                end += 1
            yield words[i + 4 : end]


def _pairs(flat: list[str]) -> list[tuple[str, str]]:
    return list(zip(flat[::2], flat[1::2], strict=True))


def pip_environment(options: Sequence[str]) -> dict[str, str]:
    """pip's index options (`--index-url URL`...) as the variables pip reads them from, so
    that no URL (which may carry a password) is on a command line."""
    env: dict[str, list[str]] = {}
    for flag, value in _pairs(list(options)):
        env.setdefault(_INDEX_OPTIONS.get(flag, ""), []).append(value)
    env.pop("", None)
    return {name: " ".join(values) for name, values in env.items()}


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


def prepare_packages(
    ir: PipelineIR,
    *,
    install: bool,
    skip: Callable[[dict[str, Any]], bool] | None = None,
    scope: str = "",
    sandbox: SandboxPolicy | None = None,
) -> tuple[str, ...]:
    """Check every executor's packages; install the missing ones when allowed.

    Executors whose container `skip` says yes to (they run in their images, with packages
    installed there) are left out. `scope` (a namespace) keeps environments apart: what one
    namespace's pip install ran (a package's build runs its code) is never another's.
    With `sandbox`, pip runs in a sandbox that may write only the environment it builds.

    Returns:
        Directories to put first on tasks' `sys.path` and `PYTHONPATH` (empty when nothing
        was missing).

    Raises:
        MissingPackagesError: Packages are missing and `install` is False.
        UserError: pip failed (its `ERROR:` lines).
    """
    absent: dict[str, list[str]] = {}
    options: list[str] = []
    for label, executor in ir.executors.items():
        container = executor.get("container")
        if not container or (skip is not None and skip(container)):
            continue
        lacking = missing(requirements(container))
        for req in lacking:
            absent.setdefault(req, []).append(label.removeprefix("exec-"))
        if lacking:
            options = _merged(options, index_options(container))
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
    return (str(environment(reqs, options, scope=scope, sandbox=sandbox)),)


def python_path_for(
    container: dict[str, Any],
    *,
    install: bool,
    scope: str = "",
    sandbox: SandboxPolicy | None = None,
) -> tuple[str, ...]:
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
    options = index_options(container)
    return (str(environment(reqs, options, scope=scope, sandbox=sandbox)),)


def _merged(options: list[str], more: list[str]) -> list[str]:
    """Index options of several components as one install's: the first `--index-url`
    stays the index, any other becomes an `--extra-index-url`."""
    pairs = _pairs(options)
    for flag, value in _pairs(more):
        if flag == "--index-url" and any(f == "--index-url" for f, _ in pairs):
            flag = "--extra-index-url"
        if (flag, value) not in pairs and ("--index-url", value) not in pairs:
            pairs.append((flag, value))
    return [part for pair in pairs for part in pair]


def environment(
    reqs: list[str],
    options: Sequence[str] = (),
    *,
    root: Path | None = None,
    scope: str = "",
    pip: Callable[[str, Sequence[str]], list[str]] | None = None,
    sandbox: SandboxPolicy | None = None,
) -> Path:
    """The directory holding `reqs` installed with pip's index `options`, built once per
    requirement set and index (and per host).

    `root` (default `config.envs_dir()`), `scope` (part of the key) and `pip` (the command
    that runs pip, given the directory it installs into and the names of the variables
    that carry its index options; default this interpreter's pip) serve other
    interpreters: a container image's (`headwater.executors.in_image`). With `sandbox`,
    this interpreter's pip runs in a sandbox (`headwater.sandbox.command`).

    An environment is built in a private directory by one process at a time (a lock per
    set) and published whole, by one rename, with a manifest of what it holds; one that is
    not whole (a build killed midway, files gone since) is never used, and is built again.
    """
    key = "\n".join([*reqs, "--", *options, *([scope] if scope else [])])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    root = root or config.envs_dir()
    target = root / digest
    if _whole(target):
        return target
    with _INSTALLING, _locked(root, digest):
        if not _whole(target):
            _build(reqs, list(options), target, pip, sandbox)
    return target


_INSTALLING = threading.Lock()
#: Written last into a built environment: what it holds (`_whole` checks it before reuse).
COMPLETE = ".complete"


def _redacted(options: list[str]) -> list[str]:
    """`options` with any password in a URL replaced (the log is shown in every task's log)."""
    return [re.sub(r"(://)[^/@\s]+@", r"\1***@", option) for option in options]


def _whole(target: Path) -> bool:
    """True if `target` was published whole and still holds every top-level entry it did."""
    try:
        manifest = json.loads((target / COMPLETE).read_text())
        entries = set(os.listdir(target))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and set(manifest.get("entries", ())) <= entries


@contextlib.contextmanager
def _locked(root: Path, digest: str) -> Iterator[None]:
    """One builder of an environment at a time, across processes (released if it dies)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        handle = (root / f".{digest}.lock").open("a")
    except OSError as exc:
        raise UserError(
            f"cannot install packages_to_install into {str(root)!r}: {exc.strerror or exc}: "
            "make it writable, or set HEADWATER_HOME to a writable directory"
        ) from exc
    with handle:
        try:
            import fcntl
        except ImportError:  # Windows: one process's lock only
            yield
            return
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(
    reqs: list[str],
    options: list[str],
    target: Path,
    pip: Callable[[str, Sequence[str]], list[str]] | None = None,
    sandbox: SandboxPolicy | None = None,
) -> None:
    """pip-install `reqs` into a private directory, then publish it as `target` whole.

    The index options reach pip as variables, never on its command line; `--` before the
    requirements makes pip read each as a requirement, whatever it says.
    """
    root = target.parent
    # Holding the lock: whatever another builder of this set left is from a dead one.
    for leftover in (*root.glob(f".building-{target.name}-*"), target):
        shutil.rmtree(leftover, ignore_errors=True)
    work = root / f".building-{target.name}-{os.getpid()}"
    work.mkdir()
    variables = pip_environment(options)
    program = [sys.executable, "-m", "pip"] if pip is None else pip(str(work), sorted(variables))
    argv = [*program, "install", "--disable-pip-version-check", "--no-input"]
    argv += ["--target", str(work), "--", *reqs]
    if sandbox is not None and pip is None:
        from headwater.sandbox import command

        proc = command.run(argv, sandbox, writable=[str(work)], env=variables)
    else:
        proc = subprocess.run(
            argv,
            env={**os.environ, **variables},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
    output = proc.stdout or ""
    # Kept beside the packages: each task that uses them shows it in its log (`launcher`).
    shown = " ".join([*_redacted(options), *reqs])
    with contextlib.suppress(OSError):
        (work / INSTALL_LOG).write_text(f"$ pip install {shown}\n{output}")
    if proc.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        lines = output.strip().splitlines()
        errors = [line for line in lines if line.startswith("ERROR:")] or lines[-1:]
        raise UserError(f"installing {' '.join(reqs)} failed: {' '.join(errors) or 'pip failed'}")
    entries = sorted(os.listdir(work))
    manifest = {"requirements": reqs, "options": _redacted(options), "entries": entries}
    (work / COMPLETE).write_text(json.dumps(manifest))
    os.replace(work, target)  # one rename: the environment appears whole, or not at all
