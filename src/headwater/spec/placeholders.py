"""Resolve KFP container placeholders (`{{$...}}`, Concat, IfPresent) against an ExecutorInput.

The grammar is what `kfp/dsl/placeholders.py` emits; where kfp.local and KFP's Go launcher
(`launcher_v2.go`, `getPlaceholders`) disagree, we follow the launcher:

* Parameters render as the launcher renders `google.protobuf.Value`: strings raw, `true`/
  `false`, numbers in Go's shortest `%f` form (`3.0` -> `3`), lists/dicts as compact JSON.
* `{{$}}` and `{{$.inputs.artifacts['x']}}` are compact JSON of the ExecutorInput node they
  address: the whole message, or that input's `{"artifacts": [...]}`.
* `.json_escape[N]` (from google-cloud-pipeline-components) ends any placeholder or stands
  alone for the ExecutorInput: the value is JSON-string-escaped N times (`[0]`: unchanged).
* A parameter whose value is `None` counts as absent, as in kfp.local: IfPresent takes Else
  and a bare placeholder for it raises `PipelineSpecError`.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from headwater.errors import PipelineSpecError, UnsupportedFeatureError
from headwater.spec.types import protojson

_WORKSPACE_MOUNT_PATH = "/kfp-workspace"  # kfp.dsl.constants; importing kfp here is slow
_REMOTE_MOUNTS = (("gs://", "/gcs/"), ("s3://", "/s3/"), ("minio://", "/minio/"))

# `{{$` must be followed by `}}` or `.`: other `{{$...}}` text (a Go template variable in a
# shell script, say) is not ours and stays literal, as the backend leaves it.
_TOKEN = re.compile(r"\{\{\$((?:\..*?)?)\}\}")
_ESCAPE = re.compile(r"(?P<core>.*?)\.json_escape\[(?P<times>\d+)\]")
_IO = re.compile(
    r"\.(?P<side>inputs|outputs)\.(?P<kind>parameters|artifacts)"
    r"\[(?P<q>['\"])(?P<name>.*?)(?P=q)\]"
    r"(?:\.(?P<attr>path|uri|metadata|output_file))?"
    r"(?:\[(?P<kq>['\"])(?P<key>.*?)(?P=kq)\])?"
)
_VERTEX_ONLY = re.compile(r"\.pipeline_(google_cloud_(project_id|location)|persistent_resource_id)")


@dataclass(frozen=True)
class PlaceholderContext:
    """Everything a task's placeholders can refer to.

    `executor_input` is the task's ExecutorInput as JSON; each other field is the value of
    the placeholder named in its comment. `workspace_path` is also the root for artifacts
    whose metadata marks them `_kfp_workspace`; an empty `output_metadata_uri` falls back to
    the ExecutorInput's `outputs.outputFile`, as kfp.local does.
    """

    executor_input: dict[str, Any]
    job_name: str = ""  # {{$.pipeline_job_name}}
    job_resource_name: str = ""  # {{$.pipeline_job_resource_name}}
    job_uuid: str = ""  # {{$.pipeline_job_uuid}}
    task_name: str = ""  # {{$.pipeline_task_name}}
    task_uuid: str = ""  # {{$.pipeline_task_uuid}}
    pipeline_root: str = ""  # {{$.pipeline_root}}
    create_time_utc: str = ""  # {{$.pipeline_job_create_time_utc}}
    schedule_time_utc: str = ""  # {{$.pipeline_job_schedule_time_utc}}
    workspace_path: str = ""  # {{$.workspace_path}}
    output_metadata_uri: str = ""  # {{$.outputMetadataUri}}


def resolve_args(args: Sequence[str], ctx: PlaceholderContext) -> list[str]:
    """Resolve a container's command or args list.

    Args:
        args: The compiled `command` or `args`: strings holding `{{$...}}` placeholders, or
            JSON `{"Concat": [...]}` / `{"IfPresent": {"InputName", "Then", "Else"}}`
            (nestable; Then/Else a string, a structure or a list).
        ctx: The task's ExecutorInput and run identity.

    Returns:
        The argv; an IfPresent element may contribute zero or several arguments.

    Raises:
        PipelineSpecError: A malformed structure, an unknown placeholder, or a placeholder
            for an input that has no value.
        UnsupportedFeatureError: A placeholder only Vertex AI Pipelines can resolve.
    """
    resolved: list[str] = []
    for arg in args:
        if arg.startswith(('{"Concat":', '{"IfPresent":')):
            try:
                structure = json.loads(arg)
            except json.JSONDecodeError as exc:
                raise PipelineSpecError(f"malformed structured placeholder {arg!r}: {exc}") from exc
            resolved.extend(_expand(structure, ctx))
        else:
            resolved.append(resolve_string(arg, ctx))
    return resolved


def resolve_string(value: str, ctx: PlaceholderContext) -> str:
    """Resolve placeholders inside one string (constant parameter values, importer metadata).

    Substituted text is not scanned again: a value containing `{{$...}}` passes unchanged.

    Raises:
        PipelineSpecError: An unknown placeholder, or one for an input that has no value.
        UnsupportedFeatureError: A placeholder only Vertex AI Pipelines can resolve.
    """
    return _TOKEN.sub(lambda match: _resolve_token(match.group(1), ctx), value)


def resolve_value(value: Any, ctx: PlaceholderContext) -> Any:
    """Resolve placeholders in every string inside nested lists and dicts (keys included)."""
    if isinstance(value, str):
        return resolve_string(value, ctx)
    if isinstance(value, list):
        return [resolve_value(item, ctx) for item in value]
    if isinstance(value, dict):
        return {resolve_value(k, ctx): resolve_value(v, ctx) for k, v in value.items()}
    return value


def artifact_path(uri: str) -> str:
    """Local path for an artifact URI, mapped the way `kfp.dsl.Artifact.path` maps it.

    `gs://b/k` -> `/gcs/b/k`, `s3://` -> `/s3/`, `minio://` -> `/minio/`, `oci://a/b` ->
    `/oci/a_b`; `file:///p` -> `/p` (no percent-decoding); anything else is returned as is.
    """
    for prefix, mount in _REMOTE_MOUNTS:
        if uri.startswith(prefix):
            return mount + uri[len(prefix) :]
    if uri.startswith("oci://"):
        return "/oci/" + uri[len("oci://") :].replace("/", "_")
    if uri.startswith("file://"):
        return uri[len("file://") :]
    return uri


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _render(value: Any) -> str:
    """Render one value as the Go launcher renders a `google.protobuf.Value`."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):  # before int: bool is an int subclass
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):  # strconv.FormatFloat(v, 'f', -1, 64)
        return format(Decimal(repr(value)).normalize(), "f")
    return _dumps(protojson(value))


def _section(ctx: PlaceholderContext, side: str, key: str) -> dict[str, Any]:
    part = ctx.executor_input.get(side) or {}
    value = part.get(key) or {}
    if not isinstance(value, dict):
        raise PipelineSpecError(f"ExecutorInput {side}.{key} must be an object, got {value!r}")
    return value


def _output_file(ctx: PlaceholderContext) -> str:
    path = (ctx.executor_input.get("outputs") or {}).get("outputFile")
    if not isinstance(path, str):
        raise PipelineSpecError(f"ExecutorInput outputs.outputFile is {path!r}, not a path")
    return path


_SIMPLE: dict[str, Callable[[PlaceholderContext], str]] = {
    "": lambda c: _dumps(c.executor_input),
    ".outputs.output_file": _output_file,
    ".outputMetadataUri": lambda c: c.output_metadata_uri or _output_file(c),
    ".pipeline_job_name": lambda c: c.job_name,
    ".pipeline_job_resource_name": lambda c: c.job_resource_name,
    ".pipeline_job_uuid": lambda c: c.job_uuid,
    ".pipeline_task_name": lambda c: c.task_name,
    ".pipeline_task_uuid": lambda c: c.task_uuid,
    ".pipeline_root": lambda c: c.pipeline_root,
    ".pipeline_job_create_time_utc": lambda c: c.create_time_utc,
    ".pipeline_job_schedule_time_utc": lambda c: c.schedule_time_utc,
    ".workspace_path": lambda c: c.workspace_path,
}
_SUPPORTED_FORMS = (
    *(f"{{{{${key}}}}}" for key in _SIMPLE),
    "{{$.inputs.parameters['x']}}",
    "{{$.outputs.parameters['x'].output_file}}",
    "{{$.inputs|outputs.artifacts['x']}} with optional .path|.uri|.metadata|.metadata['k']",
    "any of these with .json_escape[N] before the closing }}",
)


def _unknown(token: str) -> PipelineSpecError:
    return PipelineSpecError(
        f"unknown placeholder {token}; supported forms: {', '.join(_SUPPORTED_FORMS)}"
    )


def _resolve_token(body: str, ctx: PlaceholderContext) -> str:
    token = f"{{{{${body}}}}}"
    escape = _ESCAPE.fullmatch(body)
    core, times = (escape["core"], int(escape["times"])) if escape else (body, 0)
    value = _resolve_core(core, token, ctx)
    for _ in range(times):
        value = json.dumps(value, ensure_ascii=False)[1:-1]
    return value


def _resolve_core(core: str, token: str, ctx: PlaceholderContext) -> str:
    simple = _SIMPLE.get(core)
    if simple is not None:
        return simple(ctx)
    if _VERTEX_ONLY.fullmatch(core):
        raise UnsupportedFeatureError(f"{token} has a value only on Vertex AI Pipelines")
    io = _IO.fullmatch(core)
    if io is None:
        raise _unknown(token)
    side, kind, name, attr, key = io["side"], io["kind"], io["name"], io["attr"], io["key"]
    if kind == "parameters":
        if side == "inputs" and attr is None and key is None:
            return _render(_parameter(ctx, name, token))
        if side == "outputs" and attr == "output_file" and key is None:
            output = _section(ctx, "outputs", "parameters").get(name)
            if not isinstance(output, dict) or not isinstance(output.get("outputFile"), str):
                raise PipelineSpecError(f"{token}: the task has no output parameter {name!r}")
            return str(output["outputFile"])
    elif attr != "output_file" and (key is None or attr == "metadata"):
        return _artifact_value(ctx, side, name, attr, key, token)
    raise _unknown(token)


def _parameter(ctx: PlaceholderContext, name: str, token: str) -> Any:
    values = _section(ctx, "inputs", "parameterValues")
    if values.get(name) is None:
        present = sorted(k for k, v in values.items() if v is not None) or ["none"]
        raise PipelineSpecError(
            f"{token} needs input parameter {name!r}, which has no value for this task "
            f"(parameters with values: {', '.join(present)}); if the input is optional, "
            "put the argument inside dsl.IfPresentPlaceholder"
        )
    return values[name]


def _artifact_value(
    ctx: PlaceholderContext, side: str, name: str, attr: str | None, key: str | None, token: str
) -> str:
    entry = _section(ctx, side, "artifacts").get(name)
    artifacts = entry.get("artifacts") if isinstance(entry, dict) else None
    if not isinstance(artifacts, list):
        raise PipelineSpecError(f"{token} needs {side[:-1]} artifact {name!r}; the task has none")
    if attr is None:
        return _dumps({"artifacts": artifacts})
    if not artifacts:
        raise PipelineSpecError(f"{token}: {side[:-1]} artifact {name!r} has no artifact")
    first = artifacts[0]
    if attr == "uri":
        return str(first.get("uri", ""))
    metadata = first.get("metadata") or {}
    if attr == "path":
        path = artifact_path(str(first.get("uri", "")))
        # kfp.dsl.Artifact.path: artifacts the backend placed in the pipeline workspace.
        if metadata.get("_kfp_workspace") is True:
            root = ctx.workspace_path or _WORKSPACE_MOUNT_PATH
            path = posixpath.join(root, ".artifacts", path.lstrip("/"))
        return path
    if key is None:
        return _dumps(protojson(metadata))
    if key not in metadata:
        raise PipelineSpecError(f"{token}: no metadata key {key!r} (keys: {sorted(metadata)})")
    return _render(metadata[key])


def _is_present(ctx: PlaceholderContext, name: str) -> bool:
    if _section(ctx, "inputs", "parameterValues").get(name) is not None:
        return True
    entry = _section(ctx, "inputs", "artifacts").get(name)
    if isinstance(entry, dict) and entry.get("artifacts"):  # an empty list counts as absent
        return True
    # kfp lets IfPresent name an output too, and a task always has its outputs.
    return any(name in _section(ctx, "outputs", kind) for kind in ("parameters", "artifacts"))


def _expand(item: Any, ctx: PlaceholderContext) -> list[str]:
    if isinstance(item, str):
        return [resolve_string(item, ctx)]
    if isinstance(item, dict) and len(item) == 1:
        if isinstance(item.get("Concat"), list):
            parts = [_expand(part, ctx) for part in item["Concat"]]
            if any(len(args) > 1 for args in parts):  # kfp forbids list Then/Else in Concat
                raise PipelineSpecError(f"a part of {item!r} gives several arguments, not one")
            return ["".join(arg for args in parts for arg in args)]
        spec = item.get("IfPresent")
        if isinstance(spec, dict) and isinstance(spec.get("InputName"), str):
            branch = spec.get("Then") if _is_present(ctx, spec["InputName"]) else spec.get("Else")
            branches = branch if isinstance(branch, list) else [] if branch is None else [branch]
            return [arg for element in branches for arg in _expand(element, ctx)]
    raise PipelineSpecError(
        f"unsupported structured placeholder {item!r}; expected a string, "
        '{"Concat": [...]} or {"IfPresent": {"InputName": ..., "Then": ..., "Else": ...}}'
    )
