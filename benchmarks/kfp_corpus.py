#!/usr/bin/env python
"""KFP's own pure-Python test pipelines, run through ``headwater run``: do they end as KFP intends?

The corpus is read from a checkout (or ``git archive`` export) of kubeflow/pipelines; nothing of
it is copied here. Every ``*.py`` under ``test_data/sdk_compiled_pipelines/valid/`` (recursively)
is a candidate; it is in the *pure-Python corpus* when

* it defines at least one ``@dsl.pipeline``, and
* every component it uses is a lightweight Python function component (``@dsl.component``) that
  needs nothing beyond the standard library and kfp, so it runs without a cluster and without
  container images or a package index. Excluded, with the reason printed under ``--list``:
  container components (``@dsl.container_component``, ``ContainerSpec``), components loaded from
  YAML (``load_component_from_*``), importers (``dsl.importer``: they need an existing artifact
  URI, mostly ``gs://``), Google Cloud Pipeline Components, ``packages_to_install`` and
  notebook components (both install packages from an index at run time).

At kubeflow/pipelines 7b70c7b (2026-08-21) that is 83 of 152 files. A pipeline may still use
kfp-kubernetes settings (secrets, PVCs, pod metadata), accelerators and a custom
``base_image``: Headwater ignores the image, and what it does with the rest is part of what is
measured.

Each pipeline runs as ``python -m headwater run FILE --pipeline NAME --json [--param ...]`` in
a subprocess with a fresh ``HEADWATER_HOME`` and a fresh working directory, with a timeout.
``NAME`` is the pipeline the file's own ``__main__`` block compiles (else Headwater's default:
the outermost pipeline). Pipelines whose parameters have no defaults, or whose defaults would
take long (a 15-minute nap), get arguments from ``CASES``; the values are KFP's own where its
tests give them (``sdk/python/test/local_execution/local_execution_test.py``). Pipelines that
read kfp-kubernetes secrets get them in ``$HEADWATER_HOME/secrets/NAME/KEY`` with the values
KFP's backend end-to-end tests create (``backend/test/end2end/pipeline_e2e_test.go``).

"As KFP intends" means: the run ends in the state KFP's own tests expect (``SUCCEEDED`` unless
``CASES`` says otherwise, with a one-line reason: e.g. ``failing/`` is meant to fail and its exit
handlers still to run), the task states ``CASES`` names hold, and the pipeline outputs ``CASES``
names have the expected values. Anything else is a miss, classified as

* ``WRONG-STATE``: the run ended, in the other state or with a task in the wrong state;
* ``WRONG-OUTPUT``: the run ended as expected, with a wrong output value;
* ``REFUSED``: exit 2 (Headwater refused the pipeline or its arguments; the stderr line is shown);
* ``CRASH``: no JSON result (a traceback, a signal);
* ``TIMEOUT``: the run took longer than ``--timeout`` seconds;
* ``HOST-WRITE``: a pipeline that mounts a volume (``/data``, ``/mnt/my_vol``) created that
  path on this machine instead (tasks run as the benchmark's user; as root they can): the path
  is removed again, so that the next pipeline cannot pass on its files;
* ``HOST-PATH``: such a path already exists here, so a pass would prove nothing: not run.

Optionally (``--kfp-local``) each pipeline also runs under ``kfp.local``
(``SubprocessRunner(use_venv=False)``, ``raise_on_error=False``, components made with
``install_kfp_package=False`` so no task pip-installs kfp) for a side-by-side count: a pipeline
ends as intended there when the pipeline call returns (or, for one expected to fail, when a task
failed) and the named outputs match; kfp.local has no task states to check.

``--containers`` runs the *container corpus* instead: the files left out only for container
components or components loaded from YAML, with ``headwater run --containers auto`` (their
images must be present or pullable; see RESULTS.md for the stand-ins used where no registry is
reachable).

Usage::

    python benchmarks/kfp_corpus.py --kfp-repo PATH [--ir] [--only SUBSTR]... [--timeout 120]
        [--jobs 1] [--kfp-local] [--containers] [--list] [--json] [--markdown] [-v]

``PATH`` is the repository root (with ``test_data/``), e.g. exported from a bare clone with
``mkdir -p /tmp/kfp && git --git-dir=PIPELINES.git archive HEAD test_data/sdk_compiled_pipelines
| tar -x -C /tmp/kfp``. ``--ir`` runs the compiled IR checked in beside each ``.py`` instead (as
KFP's backend e2e tests upload it; 77 of the 83 have one). Exit status 0 when every pipeline
ends as intended, 1 otherwise.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _common import base_machine_info, heading, kfp_version, load_average, progress, tail

CORPUS_DIR = Path("test_data/sdk_compiled_pipelines/valid")

# A name used anywhere in a file (as a name, an attribute or an import) that takes it out of
# the pure-Python corpus, and why.
EXCLUDING_NAMES = {
    "container_component": "container component",
    "ContainerSpec": "container component",
    "load_component_from_file": "component loaded from YAML",
    "load_component_from_text": "component loaded from YAML",
    "load_component_from_url": "component loaded from YAML",
    "importer": "importer (needs an existing artifact URI)",
    "notebook_component": "notebook component (pip-installs nbclient/ipykernel)",
}

#: The exclusions that `--containers` runs: tasks that need their images.
CONTAINER_REASONS = {"container component", "component loaded from YAML"}

# Secrets the corpus reads through kfp-kubernetes, with the values KFP's backend e2e tests
# create (pipeline_e2e_test.go: test-secret-1/2/3); the others are the secret names the
# pipelines themselves use, with values their assertions accept.
SECRETS = {
    "test-secret-1": {"username": "user1"},
    "test-secret-2": {"password": "psw1"},
    "test-secret-3": {"password": "psw2"},
}


@dataclass(frozen=True)
class Case:
    """What one pipeline needs and what KFP intends it to end as."""

    why: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    state: str = "SUCCEEDED"
    tasks: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    pipeline: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    timeout: float | None = None
    host_paths: tuple[str, ...] = ()
    volumes: tuple[str, ...] = ()  # existing PVCs: $HEADWATER_HOME/volumes/NAME, made first
    artifact_text: dict[str, str] = field(default_factory=dict)  # output artifact -> its bytes


_EXIT_RUNS = "the guarded task fails the run; the exit handler still runs and succeeds"
_PVC = "a PVC made by CreatePVC, mounted at /data, shared by the tasks"
# Where a pipeline mounts a volume. Run without one, its tasks would use (and, as root, create)
# the host's own directory and could pass for the wrong reason: see _guard_host_paths.
_DATA = ("/data",)

# Keyed by the path under test_data/sdk_compiled_pipelines/valid/. Pipelines not listed run with
# their defaults and are meant to succeed. In `args` and `files`, "{tmp}" is the run's own
# temporary directory; `files` are created there before the run.
CASES: dict[str, Case] = {
    "failing/fail_v2.py": Case(
        "KFP's e2e suite expects every valid/failing/ run to fail",
        state="FAILED",
        tasks={"fail": "FAILED"},
    ),
    "failing/pipeline_with_exit_handler.py": Case(
        _EXIT_RUNS,
        state="FAILED",
        tasks={"fail-op": "FAILED", "print-op": "SUCCEEDED"},
    ),
    "failing/pipeline_with_multiple_exit_handlers.py": Case(
        _EXIT_RUNS + " (all three handlers, the other two bodies too)",
        state="FAILED",
        tasks={
            "fail-op": "FAILED",
            "print-op": "SUCCEEDED",
            "print-op-3": "SUCCEEDED",
            "print-op-4": "SUCCEEDED",
            "print-op-5": "SUCCEEDED",
            "print-op-6": "SUCCEEDED",
        },
    ),
    "pipeline_with_task_final_status.py": Case(
        _EXIT_RUNS + ", given PipelineTaskFinalStatus",
        state="FAILED",
        tasks={"fail-op": "FAILED", "exit-op": "SUCCEEDED"},
    ),
    "pipeline_as_exit_task.py": Case(
        "the exit handler is a nested pipeline; it sees state FAILED and notifies",
        state="FAILED",
        tasks={
            "fail-op": "FAILED",
            "conditional-notification.get-run-state": "SUCCEEDED",
            "conditional-notification.print-op": "SUCCEEDED",
        },
    ),
    "pipeline_with_task_using_ignore_upstream_failure.py": Case(
        "fail_op fails the run; print_op ignores the upstream failure and runs with its default",
        state="FAILED",
        tasks={"fail-op": "FAILED", "print-op": "SUCCEEDED"},
    ),
    "local_execution/local_execution_pipeline_with_ignore_upstream_failure.py": Case(
        "upstream fails the run (KFP's test: raise_on_error=False); the cleanup task still runs",
        args={"marker_path": "{tmp}/marker.txt"},
        state="FAILED",
        tasks={"fail-always": "FAILED", "write-marker": "SUCCEEDED"},
    ),
    "local_execution/local_execution_pipeline_with_retry.py": Case(
        "fails once, the retry succeeds (KFP's local_execution_test args and output)",
        args={"counter_path": "{tmp}/retry.count"},
        outputs={"Output": "attempt=2"},
    ),
    "local_execution/local_execution_pipeline_with_exit_handler.py": Case(
        "the exit task sees SUCCEEDED", args={"message": "hi"}
    ),
    "local_execution/local_execution_pipeline_with_oneof.py": Case(
        "KFP's local_execution_test", args={"pick_a": True}, outputs={"Output": "selected:A"}
    ),
    "local_execution/local_execution_pipeline_with_k8s_only_methods.py": Case(
        "limits and an accelerator type are warned about and ignored locally (KFP's test)",
        args={"message": "hello"},
        outputs={"Output": "hello"},
    ),
    "local_execution/pipeline_with_collected_artifacts.py": Case(
        "KFP's local_execution_test", outputs={"Output": "0,1,2"}
    ),
    "essential/component_with_env_variable.py": Case(
        "set_env_variable reaches the task (KFP's local_execution_test)",
        outputs={"Output": "env_var_value"},
    ),
    "env_var.py": Case(
        "reads a named env var and fails if unset; KFP's proxy e2e test passes one that is set",
        args={"env_var": "HW_KFP_CORPUS_ENV"},
        outputs={"Output": "set-by-kfp-corpus"},
    ),
    "essential/lightweight_python_functions_pipeline.py": Case(
        "required message (KFP's e2e passes a random string)", args={"message": "hello"}
    ),
    "essential/lightweight_python_functions_with_outputs.py": Case(
        "KFP's local_execution_test args",
        args={
            "first_message": "Hello",
            "second_message": " World",
            "first_number": 10,
            "second_number": 20,
        },
    ),
    "pipeline_with_parallelfor_pipeline_param.py": Case(
        "KFP's local_execution_test args",
        args={"prefix": "test-prefix", "loop_parameter": ["a", "b"]},
    ),
    "pipeline_with_metadata_fields.py": Case(
        "a string and an input Dataset (a local file), joined into the output Dataset",
        args={"string": "hello ", "in_dataset": "{tmp}/in_dataset.txt"},
        files={"in_dataset.txt": "world"},
        artifact_text={"Output": "hello world"},
    ),
    "pvc_mount.py": Case(
        "an existing PVC by name (an empty volume made first), mounted at /data",
        args={"pvc_name": "my-pvc"},
        host_paths=_DATA,
        volumes=("my-pvc",),
    ),
    "pvc_mount_subpath.py": Case(
        "an existing PVC by name (made first), two subPaths mounted at /data",
        args={"pvc_name": "my-pvc"},
        host_paths=_DATA,
        volumes=("my-pvc",),
    ),
    "pipeline_with_volume.py": Case(_PVC, host_paths=_DATA),
    "pipeline_with_volume_long_name.py": Case(_PVC, host_paths=_DATA),
    "pipeline_with_volume_no_cache.py": Case(_PVC, host_paths=_DATA),
    "parallel_and_nested/parallel_for_mount_pvc.py": Case(_PVC, host_paths=_DATA),
    "pipeline_with_secret_as_volume.py": Case(
        "secret test-secret-1 as files under /mnt/my_vol", host_paths=("/mnt/my_vol",)
    ),
    "take_nap.py": Case("naps naptime_secs (default 900 s): 1 s here", args={"naptime_secs": 1}),
    "take_nap_pipeline_root.py": Case(
        "as take_nap; its pipeline_root s3://change/me is a placeholder to change: a local root",
        args={"naptime_secs": 1},
        flags=("--pipeline-root", "{tmp}/root"),
    ),
    "log_streaming.py": Case("prints in a loop for 60 s", timeout=180.0),
    "create_pod_metadata_complex.py": Case(
        "task_c reads POD_TASK_ANNOTATION, which nothing sets: None != '' fails it on KFP's"
        " backend too; tasks a and b see their labels and annotations",
        state="FAILED",
        tasks={
            "validate-pod-metadata": "SUCCEEDED",
            "validate-pod-metadata-2": "SUCCEEDED",
            "validate-no-pod-metadata": "FAILED",
        },
    ),
    "conditional_producer_and_consumers.py": Case(
        "the compiler declares the Collected output LIST while the value is the sum (10):"
        " KFP's backend does not check pipeline output types",
        outputs={"Output": 10},
    ),
    "nested_with_parameters.py": Case(
        "Collected over two nested loops: 2x + 2y",
        outputs={"Output": [[4, 6, 8], [6, 8, 10], [8, 10, 12]]},
    ),
    "parameters_complex.py": Case("3 x 12 + 3 x 90", outputs={"Output": 306}),
    "pipeline_producer_consumer.py": Case(
        "nested pipelines in nested loops: 3 x (2 + 4 + 6)", outputs={"Output": 36}
    ),
    "local_execution/pipeline_with_caching.py": Case("add_one(1)", outputs={"Output": 2}),
    "pythonic_artifacts_with_list_of_artifacts.py": Case(
        "dsl.get_uri() datasets made in a loop, collected and joined",
        artifact_text={"Output": "Hello, world!"},
    ),
    "pythonic_artifacts_with_multiple_returns.py": Case(
        "a NamedTuple of dsl.get_uri() datasets: the first half of 'Hello, world'",
        artifact_text={"Output": "Hello,"},
    ),
    "critical/pythonic_artifacts_test_pipeline.py": Case(
        "a pythonic Dataset made at dsl.get_uri(), read downstream with its metadata"
    ),
    "critical/pipeline_with_artifact_custom_path.py": Case(
        "Artifact.set_path('/tmp/out_dataset'): the bytes reach the downstream task"
    ),
    # The container corpus (--containers): arguments for pipelines without defaults.
    "critical/two_step_pipeline_containerized.py": Case(
        "a text in, cat in the second step", args={"text": "hello"}
    ),
    "pipeline_with_parallelfor_parallelism.py": Case(
        "a loop over a pipeline input list", args={"loop_parameter": ["a", "b", "c"]}
    ),
    "sequential_v1.py": Case("two echoes", args={"param1": "one", "param2": "two"}),
    "sequential_v2.py": Case(
        "gsutil cat of a gs:// URL, then echo (needs Google Cloud Storage)",
        args={"url": "gs://ml-pipeline-playground/shakespeare1.txt"},
    ),
    "pipeline_with_various_io_types.py": Case(
        "an input artifact given as a local file",
        args={"input1": "in", "input3": "{tmp}/in.txt"},
        files={"in.txt": "input three"},
    ),
}


@dataclass
class Entry:
    """One candidate file: in the corpus or not, and the pipeline to run."""

    rel: str
    path: Path
    excluded: list[str]
    pipelines: list[str]
    compiled: str | None
    ir: Path | None = None  # the compiled IR checked in beside it, as KFP's e2e tests upload


@dataclass
class Outcome:
    """How one pipeline ended, against how it was meant to."""

    rel: str
    verdict: str  # OK, WRONG-STATE, WRONG-OUTPUT, REFUSED, CRASH, TIMEOUT
    state: str | None
    seconds: float
    detail: str = ""
    kfp_local: str | None = None  # OK / MISS / None (not run)
    kfp_local_detail: str = ""
    outputs: dict[str, Any] = field(default_factory=dict)
    tasks: dict[str, str] = field(default_factory=dict)


def _names(tree: ast.AST) -> tuple[set[str], set[str], bool]:
    names: set[str] = set()
    modules: set[str] = set()
    packages = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update(alias.name for alias in node.names)
            modules.update(alias.name for alias in node.names)
            if isinstance(node, ast.ImportFrom) and node.module:
                modules.add(node.module)
        elif isinstance(node, ast.keyword) and node.arg == "packages_to_install":
            packages = True
    return names, modules, packages


def _pipelines(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                func = deco.func if isinstance(deco, ast.Call) else deco
                if (isinstance(func, ast.Attribute) and func.attr == "pipeline") or (
                    isinstance(func, ast.Name) and func.id == "pipeline"
                ):
                    found.append(node.name)
    return found


def _compiled(tree: ast.Module) -> str | None:
    """The pipeline the file's own `Compiler().compile(...)` call compiles, if it has one."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "compile"
        ):
            target: ast.expr | None = None
            for kw in node.keywords:
                if kw.arg == "pipeline_func":
                    target = kw.value
            if target is None and node.args:
                target = node.args[0]
            if isinstance(target, ast.Name):
                return target.id
    return None


def _checked_in_ir(path: Path) -> Path | None:
    for name in (f"{path.stem}.yaml", f"{path.stem}_compiled.yaml"):
        if (path.parent / name).is_file():
            return path.parent / name
    return None


def discover(repo: Path) -> list[Entry]:
    """Every candidate .py file of the corpus directory, classified."""
    base = repo / CORPUS_DIR
    if not base.is_dir():
        raise SystemExit(f"kfp_corpus: no {CORPUS_DIR} under {repo}: pass the repository root")
    entries = []
    for path in sorted(base.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        names, modules, packages = _names(tree)
        excluded = sorted({why for name, why in EXCLUDING_NAMES.items() if name in names})
        if any(m.startswith("google_cloud_pipeline_components") for m in modules):
            excluded.append("Google Cloud Pipeline Components")
        if packages:
            excluded.append("packages_to_install")
        pipelines = _pipelines(tree)
        if not pipelines:
            excluded.append("no @dsl.pipeline")
        compiled = _compiled(tree)
        entries.append(
            Entry(
                rel=path.relative_to(base).as_posix(),
                path=path,
                excluded=excluded,
                pipelines=pipelines,
                compiled=compiled if compiled in pipelines else None,
                ir=_checked_in_ir(path),
            )
        )
    return entries


def _write_secrets(home: Path) -> None:
    """The secrets, as `headwater secrets set` stores them: `secrets/NAME/KEY`, 0700 and 0600."""
    for name, data in SECRETS.items():
        folder = home / "secrets" / name
        folder.mkdir(parents=True, exist_ok=True)
        for path in (home / "secrets", folder):
            path.chmod(0o700)
        for key, value in data.items():
            target = folder / key
            target.write_text(value, encoding="utf-8")
            target.chmod(0o600)


def _check(case: Case, result: dict[str, Any]) -> tuple[str, str]:
    state = result.get("state")
    tasks = {t.get("name"): t.get("state") for t in result.get("tasks") or []}
    problems = []
    if state != case.state:
        problems.append(f"run {state}, expected {case.state}")
    for name, want in case.tasks.items():
        if tasks.get(name) != want:
            problems.append(f"task {name} {tasks.get(name)}, expected {want}")
    if problems:
        return "WRONG-STATE", "; ".join(problems)
    outputs = result.get("outputs") or {}
    for name, want in case.outputs.items():
        if outputs.get(name) != want:
            return "WRONG-OUTPUT", f"output {name} = {outputs.get(name)!r}, expected {want!r}"
    return "OK", ""


def _check_artifacts(case: Case, result: dict[str, Any]) -> tuple[str, str]:
    """Read each named output artifact where its recorded URI says it is (a local root)."""
    outputs = result.get("outputs") or {}
    for name, want in case.artifact_text.items():
        art = outputs.get(name)
        uri = art.get("uri") if isinstance(art, dict) else None
        if not isinstance(uri, str):
            return "WRONG-OUTPUT", f"output artifact {name} = {art!r}: no URI"
        path = Path(uri.removeprefix("file://"))
        try:
            got = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return "WRONG-OUTPUT", f"output artifact {name}: cannot read {uri}: {exc}"
        if got != want:
            return "WRONG-OUTPUT", f"output artifact {name} holds {got[:60]!r}, expected {want!r}"
    return "OK", ""


def _failed_tasks(result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(t["name"], t) for t in result.get("tasks") or [] if t.get("state") == "FAILED"]


def _error(task: dict[str, Any]) -> str:
    return _format_error(task.get("error"))


def _format_error(error: Any) -> str:
    if isinstance(error, dict):
        kind = error.get("error_type") or error.get("type") or ""
        text = f"{kind}: {error.get('message', '')}" if kind else str(error.get("message", error))
        return text[:200]
    return str(error or "")[:200]


def _fill(value: Any, tmp: Path) -> Any:
    """`value` with "{tmp}" replaced by the run's temporary directory, in strings and lists."""
    if isinstance(value, str):
        return value.replace("{tmp}", str(tmp))
    if isinstance(value, list):
        return [_fill(v, tmp) for v in value]
    return value


def _prepare(case: Case, tmp: Path) -> dict[str, Any]:
    for name, content in case.files.items():
        (tmp / name).write_text(content, encoding="utf-8")
    return {name: _fill(value, tmp) for name, value in case.args.items()}


def _task_errors(home: Path, result: dict[str, Any]) -> dict[str, str]:
    """Failed tasks' errors, from the JSON result or else from the run's task directories."""
    errors = {name: _error(task) for name, task in _failed_tasks(result) if task.get("error")}
    run_dir = home / "runs" / str(result.get("run_id"))
    for path in sorted(run_dir.glob("**/error.json")):
        name = path.parent.relative_to(run_dir / "tasks").as_posix()
        if name in errors or any(name in e for e in errors):
            continue
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        errors[name] = f"{record.get('error_type', '')}: {record.get('message', '')}"[:200]
    return errors


_HOST_PATHS_LOCK = threading.Lock()


def run_headwater(entry: Entry, timeout: float, verbose: bool, ir: bool = False) -> Outcome:
    """Run one pipeline through the CLI; guard the host paths its volumes would mount over."""
    case = CASES.get(entry.rel, Case())
    if not case.host_paths:
        return _run_headwater(entry, case, timeout, verbose, ir)
    present = [p for p in case.host_paths if os.path.lexists(p)]
    if present:
        detail = f"{', '.join(present)} exists on this machine: remove it, then rerun"
        return Outcome(entry.rel, "HOST-PATH", None, 0.0, detail)
    with _HOST_PATHS_LOCK:
        outcome = _run_headwater(entry, case, timeout, verbose, ir)
        made = [p for p in case.host_paths if os.path.lexists(p)]
        written = [p for p in made if not os.path.isdir(p) or os.listdir(p)]
        for path in made:
            # The run created it (it was absent just before): remove it so that the next
            # pipeline mounting there does not pass on this one's files.
            shutil.rmtree(path, ignore_errors=True)
    notes = []
    if written:
        outcome.verdict = "HOST-WRITE"
        notes.append(f"wrote to the host's {', '.join(written)} instead of a volume (removed)")
    elif made:
        notes.append(f"left an empty {', '.join(made)} on the host (removed)")
    outcome.detail = "; ".join(notes + ([outcome.detail] if outcome.detail else []))
    return outcome


#: Arguments added to every `headwater run` (`--headwater-args`, e.g. "--executor dask").
HEADWATER_ARGS: list[str] = []


def _run_headwater(entry: Entry, case: Case, timeout: float, verbose: bool, ir: bool) -> Outcome:
    """Run one pipeline through the CLI, in a fresh home and working directory."""
    if ir and entry.ir is None:
        return Outcome(entry.rel, "NO-IR", None, 0.0, "no compiled IR beside it")
    with tempfile.TemporaryDirectory(prefix="hw-kfp-corpus-") as tmp_name:
        tmp = Path(tmp_name)
        home = tmp / "home"
        work = tmp / "cwd"
        home.mkdir()
        work.mkdir()
        _write_secrets(home)
        for volume in case.volumes:
            (home / "volumes" / volume).mkdir(parents=True)
        args = _prepare(case, tmp)
        source = entry.ir if ir and entry.ir else entry.path
        command = [sys.executable, "-m", "headwater", "run", str(source), "--json"]
        pipeline = case.pipeline or entry.compiled
        if pipeline and not ir:
            command += ["--pipeline", pipeline]
        for name, value in args.items():
            # A STRING parameter takes the text as typed; anything else is parsed as JSON.
            text = value if isinstance(value, str) else json.dumps(value)
            command += ["--param", f"{name}={text}"]
        command += [_fill(flag, tmp) for flag in case.flags]
        command += HEADWATER_ARGS
        env = dict(os.environ, HEADWATER_HOME=str(home), HW_KFP_CORPUS_ENV="set-by-kfp-corpus")
        for var in ("HEADWATER_METADATA_URL", "HEADWATER_PIPELINE_ROOT"):
            env.pop(var, None)
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                command,
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=case.timeout or timeout,
            )
        except subprocess.TimeoutExpired:
            return Outcome(entry.rel, "TIMEOUT", None, time.perf_counter() - start)
        seconds = time.perf_counter() - start
        if verbose:
            progress(f"--- {entry.rel}: exit {proc.returncode}\n{tail(proc.stderr, 30)}")
        lines = proc.stdout.strip().splitlines()
        result: dict[str, Any] | None = None
        if lines:
            try:
                result = json.loads(lines[-1])
            except ValueError:
                result = None
        if proc.returncode == 2:
            return Outcome(entry.rel, "REFUSED", None, seconds, _last_line(proc.stderr))
        if not isinstance(result, dict) or proc.returncode not in (0, 1):
            detail = f"exit {proc.returncode}: {_last_line(proc.stderr)}"
            return Outcome(entry.rel, "CRASH", None, seconds, detail)
        verdict, detail = _check(case, result)
        if verdict == "OK" and case.artifact_text:
            verdict, detail = _check_artifacts(case, result)
        if verdict != "OK":
            errors = _task_errors(home, result)
            run_error = _format_error(result.get("error"))
            if run_error and run_error not in errors.values():
                detail += f"; run: {run_error}"
            detail += "".join(f"; {name}: {error}" for name, error in errors.items())
    tasks = {str(t.get("name")): str(t.get("state")) for t in result.get("tasks") or []}
    outputs = result.get("outputs") or {}
    return Outcome(
        entry.rel, verdict, result.get("state"), seconds, detail, outputs=outputs, tasks=tasks
    )


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else ""


# Runs one pipeline under kfp.local in a child interpreter: argv = file, pipeline, args JSON,
# expected state, outputs JSON. Prints OK or MISS and a reason on its last line.
_KFP_LOCAL_DRIVER = r"""
import functools, json, sys, warnings
warnings.simplefilter("ignore")
from kfp import dsl, local
dsl.component = functools.partial(dsl.component, install_kfp_package=False)
import importlib.util
path, name, args, want_state, want_outputs = sys.argv[1:6]
args, want_outputs = json.loads(args), json.loads(want_outputs)
local.init(runner=local.SubprocessRunner(use_venv=False), raise_on_error=False,
           pipeline_root="./root", workspace_root="./ws")
sys.path.insert(0, str(__import__("pathlib").Path(path).parent))
spec = importlib.util.spec_from_file_location("corpus_pipeline", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from kfp.dsl.graph_component import GraphComponent
found = {k: v for k, v in vars(module).items() if isinstance(v, GraphComponent)}
func = found.get(name) if name else None
if func is None:
    func = list(found.values())[-1]
from kfp.local import pipeline_orchestrator
failures = []
report_failure = pipeline_orchestrator.log_and_maybe_raise_for_failure
def record_failure(*a, **k):
    failures.append("failed: " + " inside ".join(k.get("fail_stack") or []))
    return report_failure(*a, **k)
pipeline_orchestrator.log_and_maybe_raise_for_failure = record_failure
try:
    task = func(**args)
except Exception as exc:
    print("MISS" if want_state == "SUCCEEDED" else "OK", type(exc).__name__, str(exc)[:200])
    sys.exit(0)
if failures:
    print("MISS" if want_state == "SUCCEEDED" else "OK", failures[-1][:200])
    sys.exit(0)
if want_state != "SUCCEEDED":
    print("MISS the pipeline succeeded; expected a failure")
    sys.exit(0)
outputs = {}
if want_outputs:
    try:
        outs = task.outputs
    except Exception:
        outs = {"Output": task.output}
    for key, value in want_outputs.items():
        if outs.get(key) != value:
            print("MISS output", key, repr(outs.get(key)), "expected", repr(value))
            sys.exit(0)
print("OK")
"""


def run_kfp_local(entry: Entry, timeout: float) -> tuple[str, str]:
    """Run one pipeline under kfp.local; (OK|MISS, why)."""
    case = CASES.get(entry.rel, Case())
    if case.host_paths:
        return "MISS", "not run: kfp.local has no volumes, its tasks would write the host's paths"
    with tempfile.TemporaryDirectory(prefix="kfp-local-corpus-") as tmp:
        command = [
            sys.executable,
            "-c",
            _KFP_LOCAL_DRIVER,
            str(entry.path),
            case.pipeline or entry.compiled or "",
            json.dumps(_prepare(case, Path(tmp))),
            case.state,
            json.dumps(case.outputs),
        ]
        try:
            proc = subprocess.run(
                command,
                cwd=tmp,
                env=dict(os.environ, HW_KFP_CORPUS_ENV="set-by-kfp-corpus"),
                capture_output=True,
                text=True,
                timeout=case.timeout or timeout,
            )
        except subprocess.TimeoutExpired:
            return "MISS", "timeout"
    last = _last_line(proc.stdout)
    if last.startswith("OK"):
        return "OK", last[2:].strip()
    if last.startswith("MISS"):
        return "MISS", last[4:].strip()
    return "MISS", f"exit {proc.returncode}: {_last_line(proc.stderr)}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kfp-repo", type=Path, required=True, help="kubeflow/pipelines root")
    parser.add_argument("--only", action="append", default=[], help="run paths containing this")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per pipeline")
    parser.add_argument("--jobs", type=int, default=1, help="pipelines at once")
    parser.add_argument("--kfp-local", action="store_true", help="also run under kfp.local")
    parser.add_argument(
        "--headwater-args",
        default="",
        metavar="ARGS",
        help="added to every headwater run, e.g. '--executor dask --scheduler tcp://HOST:8786'",
    )
    parser.add_argument(
        "--ir", action="store_true", help="run the compiled IR checked in beside each .py"
    )
    parser.add_argument(
        "--containers",
        action="store_true",
        help="run the container corpus instead (container components and components loaded "
        "from YAML, nothing else excluded) with --containers auto",
    )
    parser.add_argument("--list", action="store_true", help="list the corpus and exclusions")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--markdown", action="store_true", help="a pasteable markdown report")
    parser.add_argument("-v", "--verbose", action="store_true", help="show each run's stderr")
    opts = parser.parse_args(argv)
    HEADWATER_ARGS[:] = shlex.split(opts.headwater_args)

    entries = discover(opts.kfp_repo.resolve())
    corpus = [e for e in entries if not e.excluded]
    if opts.containers:
        corpus = [e for e in entries if e.excluded and set(e.excluded) <= CONTAINER_REASONS]
        HEADWATER_ARGS[:0] = ["--containers", "auto"]
    if opts.list:
        for e in entries:
            mark = "IN " if not e.excluded else "out"
            print(f"{mark} {e.rel}  {', '.join(e.excluded) or (e.compiled or '')}")
        which = "container" if opts.containers else "pure-Python"
        print(f"{len(corpus)} of {len(entries)} files in the {which} corpus")
        return 0
    runnable = {e.rel for e in entries if set(e.excluded) <= CONTAINER_REASONS}
    unknown = sorted(set(CASES) - runnable)
    if unknown:
        progress(f"kfp_corpus: CASES names files not in the corpus: {', '.join(unknown)}")
    selected = [e for e in corpus if not opts.only or any(s in e.rel for s in opts.only)]
    load_start = load_average()

    def one(entry: Entry) -> Outcome:
        outcome = run_headwater(entry, opts.timeout, opts.verbose, opts.ir)
        if opts.kfp_local:
            outcome.kfp_local, outcome.kfp_local_detail = run_kfp_local(entry, opts.timeout)
        progress(f"{outcome.verdict:<12} {outcome.seconds:6.1f}s  {entry.rel}  {outcome.detail}")
        return outcome

    with ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        outcomes = list(pool.map(one, selected))

    ok = sum(o.verdict == "OK" for o in outcomes)
    local_ok = sum(o.kfp_local == "OK" for o in outcomes)
    summary: dict[str, Any] = {
        "kfp_repo": str(opts.kfp_repo),
        "kfp_commit": _repo_commit(opts.kfp_repo),
        "corpus": len(corpus),
        "source": "checked-in compiled IR" if opts.ir else "the .py files",
        "ran": sum(o.verdict != "NO-IR" for o in outcomes),
        "as_intended": ok,
        "verdicts": dict(Counter(o.verdict for o in outcomes)),
        "kfp_local_as_intended": local_ok if opts.kfp_local else None,
        "machine": {**base_machine_info(), "kfp": kfp_version()},
        "load": f"{load_start} -> {load_average()}",
        "pipelines": [asdict(o) for o in outcomes],
    }
    if opts.json:
        print(json.dumps(summary))
    else:
        _print_report(summary, outcomes, opts.markdown, opts.kfp_local)
    return 0 if ok == len(outcomes) else 1


def _repo_commit(repo: Path) -> str:
    try:
        proc = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except OSError:
        return "unknown"
    return proc.stdout.strip() or "unknown (not a git checkout)"


def _print_report(
    summary: dict[str, Any], outcomes: list[Outcome], markdown: bool, with_local: bool
) -> None:
    h = heading(markdown)
    print(f"{h}KFP pure-Python test pipelines through `headwater run`")
    print()
    for key, value in summary["machine"].items():
        print(f"- {key}: {value}")
    print(f"- kubeflow/pipelines: {summary['kfp_commit']} ({summary['kfp_repo']})")
    print(f"- load average: {summary['load']}")
    print(f"- ran: {summary['source']}")
    print()
    cols = ["pipeline", "headwater", "state", "s"] + (["kfp.local"] if with_local else [])
    cols.append("detail")
    if markdown:
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
    for o in outcomes:
        row = [o.rel, o.verdict, o.state or "-", f"{o.seconds:.1f}"]
        if with_local:
            row.append(o.kfp_local or "-")
        detail = o.detail
        if with_local and o.kfp_local != "OK" and o.kfp_local_detail:
            detail = f"{detail} [kfp.local: {o.kfp_local_detail}]".strip()
        row.append(detail.replace("|", "/"))
        if markdown:
            print("| " + " | ".join(row) + " |")
        else:
            print(f"{row[0]:<70} {row[1]:<12} {row[2]:<10} {row[3]:>6}  " + "  ".join(row[4:]))
    print()
    line = f"as KFP intends: {summary['as_intended']} of {summary['ran']}"
    if summary["ran"] != summary["corpus"]:
        line += f" run (corpus: {summary['corpus']})"
    if with_local:
        line += f"; kfp.local: {summary['kfp_local_as_intended']} of {len(outcomes)}"
    print(line + f"  {summary['verdicts']}")


if __name__ == "__main__":
    sys.exit(main())
