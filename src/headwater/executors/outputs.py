"""A task's outputs: where the component writes them, and what the engine reads back.

The URIs a component sets on its output artifacts are honoured as KFP's backend honours them
(`launcher_v2.go`: `mergeRuntimeArtifacts`, then `uploadOutputArtifacts`):

* `dsl.get_uri(suffix)` is `<task root>/<suffix>`, the directory of the task's own output
  artifacts under the pipeline root, because the component's `outputs.outputFile` lies there
  (as the KFP driver places it). A pythonic artifact return (`-> Model`), each item of a
  NamedTuple of artifacts, and each iteration of a loop that makes one this way, are recorded
  at the URI the component gave.
* `Artifact.set_path(p)` (a custom path): the bytes are taken from `p` and put at the
  artifact's URI.
* Any other URI is honoured if it is inside the pipeline root; one outside it is not where the
  run keeps its artifacts, so its bytes (if any) are copied to the URI the engine assigned,
  which is what is recorded. Either way the recorded URI is where the bytes are, under the
  pipeline root.

On a remote root the component works on a local mirror of its task root, which is uploaded
after it succeeded; the URIs it set are mapped back onto the remote task root.
"""

from __future__ import annotations

import json
import os
import posixpath
from pathlib import Path
from typing import Any

from headwater.errors import OutputError
from headwater.paths import is_remote_uri, resolve_inside
from headwater.task import Launch, Outputs

#: The ExecutorOutput KFP's executor writes in the task root, before the launcher settles it.
TASK_ROOT_OUTPUT = "executor_output.json"


def collect_outputs(launch: Launch) -> Outputs:
    """Read what one successful attempt produced.

    Lightweight Python components write `executor_output.json`; container components write
    nothing of the sort, so their parameters come from the `OutputPath` files and their
    artifacts are the URIs the engine assigned in the ExecutorInput.

    Raises:
        OutputError: A declared output parameter was not written.
    """
    outputs_spec = launch.executor_input["outputs"]
    written: dict[str, Any] = {}
    out_file = Path(outputs_spec["outputFile"])
    if out_file.is_file():
        try:
            written = json.loads(out_file.read_text(encoding="utf-8") or "{}")
        except ValueError as exc:
            raise OutputError(f"{out_file} is not valid JSON: {exc}") from exc
    params: dict[str, Any] = dict(written.get("parameterValues") or {})
    for name, spec in (outputs_spec.get("parameters") or {}).items():
        if name in params:
            continue
        path = Path(spec["outputFile"])
        if not path.is_file():
            raise OutputError(
                f"output parameter {name!r} was not written (expected a file at {path})"
            )
        params[name] = _read_parameter(name, path, launch.output_types.get(name, "STRING"))
    artifacts: dict[str, list[dict[str, Any]]] = {}
    updates = written.get("artifacts") or {}
    root = launch.placeholders.pipeline_root
    for name, spec in (outputs_spec.get("artifacts") or {}).items():
        declared = spec["artifacts"]
        produced = (updates.get(name) or {}).get("artifacts") or []
        merged = []
        for i, art in enumerate(declared):
            art = dict(art)
            if i < len(produced):
                art["metadata"] = {**art.get("metadata", {}), **(produced[i].get("metadata") or {})}
                # The task process settled the URI (`settle_outputs`); one outside the root
                # (a command that wrote its own ExecutorOutput) keeps the assigned URI.
                uri = produced[i].get("uri")
                if uri and uri != art["uri"] and within(uri, root):
                    art["uri"] = uri
            merged.append(art)
        artifacts[name] = merged
    return Outputs(params, artifacts)


def within(uri: str, root: str) -> bool:
    """True if `uri` lies strictly inside the pipeline root `root` (a directory or a URL; a
    local `uri` after resolving `..` and symlinks)."""
    if not root:
        return False
    if is_remote_uri(root):
        return uri.startswith(root.rstrip("/") + "/") and ".." not in uri.split("/")
    if is_remote_uri(uri):
        return False
    return resolve_inside(uri, [root], strict=True) is not None


def output_plan(
    executor_input: dict[str, Any],
    component_input: dict[str, Any],
    root: str,
    *,
    python: bool,
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """What the task process needs to settle its output artifacts, and its ExecutorInput.

    For a Python component the ExecutorInput's `outputs.outputFile` moves into the task root
    (the directory of its output artifacts), so that KFP's executor derives `dsl.get_uri()`
    from it, as on KFP's backend.

    Args:
        executor_input: The ExecutorInput as the engine made it (remote URIs stay remote).
        component_input: The one the component sees (remote URIs staged to local paths).
        root: The pipeline root.
        python: True for a lightweight Python component (run through KFP's executor).

    Returns:
        (the plan, or None for a task without output artifacts; the ExecutorInput to give
        the component)
    """
    declared = executor_input["outputs"].get("artifacts") or {}
    seen = component_input["outputs"].get("artifacts") or {}
    slots = {
        name: [seen[name]["artifacts"][0]["uri"], spec["artifacts"][0]["uri"]]
        for name, spec in declared.items()
        if spec.get("artifacts")
    }
    if not slots:
        return None, component_input
    first_seen, first_uri = next(iter(slots.values()))
    task_root = os.path.dirname(first_seen)
    if python:
        outputs = {**component_input["outputs"], "outputFile": f"{task_root}/{TASK_ROOT_OUTPUT}"}
        component_input = {**component_input, "outputs": outputs}
    plan = {
        "slots": slots,
        "task_root": task_root,
        "remote_task_root": posixpath.dirname(first_uri) if is_remote_uri(first_uri) else None,
        "root": root,
        "seen_output_file": component_input["outputs"]["outputFile"],
        "output_file": executor_input["outputs"]["outputFile"],
    }
    return plan, component_input


def settle_outputs(plan: dict[str, Any]) -> list[tuple[str, str]]:
    """In the task process, after the component succeeded: honour the URIs it set.

    Rewrites the component's ExecutorOutput (read from the task root) into the engine's
    `outputFile` with each artifact's final URI, and returns the copies that put the bytes
    there: `[(local source, destination URI)]`, for `ArtifactStore.upload`.
    """
    seen_file, out_file = plan["seen_output_file"], plan["output_file"]
    try:
        with open(seen_file, encoding="utf-8") as fh:
            written = json.load(fh)
    except FileNotFoundError:
        written = None
    except ValueError as exc:
        raise OutputError(f"{seen_file} is not valid JSON: {exc}") from exc
    produced_all = (written or {}).get("artifacts") or {}
    copies: list[tuple[str, str]] = []
    for name, (seen, assigned) in plan["slots"].items():
        produced = ((produced_all.get(name) or {}).get("artifacts") or [{}])[0]
        uri = str(produced.get("uri") or "")
        custom = str(produced.get("custom_path") or "")
        target = _target(uri, seen, assigned, plan)
        # Where the bytes are: the custom path, else the local path of the URI it set.
        source = custom or (uri if uri and not is_remote_uri(uri) else seen)
        source = os.path.abspath(source)
        if os.path.exists(source) and (is_remote_uri(target) or source != target):
            copies.append((source, target))
        if produced:
            produced["uri"] = target
            produced.pop("custom_path", None)
    if written is not None:
        with open(out_file, "w", encoding="utf-8") as fh:
            json.dump(written, fh)
        if os.path.abspath(seen_file) != os.path.abspath(out_file):
            os.unlink(seen_file)
    return copies


def _target(uri: str, seen: str, assigned: str, plan: dict[str, Any]) -> str:
    """The URI an output artifact is recorded at: the component's, if inside the root."""
    if not uri or uri == seen:
        return assigned
    if not is_remote_uri(uri):
        path = os.path.abspath(uri)
        remote = plan["remote_task_root"]
        if remote is not None:
            # The local mirror of the task root stands for the remote one.
            if within(path, plan["task_root"]):
                rel = os.path.relpath(path, plan["task_root"]).replace(os.sep, "/")
                return f"{remote}/{rel}"
            return assigned
        return path if within(path, plan["root"]) else assigned
    return uri if within(uri, plan["root"]) else assigned


def _read_parameter(name: str, path: Path, parameter_type: str) -> Any:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OutputError(
            f"output parameter {name!r} is not UTF-8 text ({path}: {exc.reason} at byte "
            f"{exc.start}): write it as text"
        ) from exc
    if parameter_type == "STRING":
        return text
    if parameter_type == "BOOLEAN":
        stripped = text.strip().lower()
        if stripped in ("true", "false"):
            return stripped == "true"
    try:
        return json.loads(text)
    except ValueError as exc:
        raise OutputError(
            f"output parameter {name!r} ({path}) holds {text[:60]!r}, not a {parameter_type} "
            "in JSON"
        ) from exc
