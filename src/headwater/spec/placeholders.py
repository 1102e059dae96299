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
        from decimal import Decimal  # only for floats: ~2 ms off every run's start

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


# -- validation at load time ----------------------------------------------------------------


@dataclass(frozen=True)
class PlaceholderNames:
    """The input and output names a placeholder may refer to (None: any name)."""

    input_parameters: frozenset[str] | None = None
    input_artifacts: frozenset[str] | None = None
    output_parameters: frozenset[str] | None = None
    output_artifacts: frozenset[str] | None = None

    def known(self, side: str, kind: str) -> frozenset[str] | None:
        """The names declared for `side` ("inputs"/"outputs") and `kind` ("parameters"/...)."""
        if side == "inputs":
            return self.input_parameters if kind == "parameters" else self.input_artifacts
        return self.output_parameters if kind == "parameters" else self.output_artifacts


_ANY_NAME = PlaceholderNames()


def check_args(args: Sequence[str], path: str, names: PlaceholderNames = _ANY_NAME) -> None:
    """Check a container's `command` or `args` without resolving it, as `resolve_args` reads it.

    Every placeholder must have a form `resolve_args` knows and name an input or output the
    component declares; Concat/IfPresent structures must be well formed. Checked when the
    pipeline loads, so a bad placeholder is one error before the run, not a failure inside it.

    Raises:
        PipelineSpecError: The first bad placeholder, with its JSON path.
    """
    for index, arg in enumerate(args):
        if "{{$" not in arg and not arg.startswith("{"):  # most arguments: plain text
            continue
        where = f"{path}[{index}]"
        if arg.startswith(('{"Concat":', '{"IfPresent":')):
            try:
                structure = json.loads(arg)
            except (ValueError, RecursionError) as exc:
                raise PipelineSpecError(
                    f"malformed structured placeholder at {where}: {arg!r:.80} is not JSON "
                    f"({exc}); use the form kfp.dsl.ConcatPlaceholder / IfPresentPlaceholder write"
                ) from exc
            _check_structure(structure, where, names, in_concat=False)
        else:
            check_string(arg, where, names)


def check_string(value: str, path: str, names: PlaceholderNames = _ANY_NAME) -> None:
    """Check every `{{$...}}` placeholder inside one string (see `check_args`).

    Raises:
        PipelineSpecError: An unknown form, or a name the component does not declare.
    """
    if "{{$" not in value:  # the common case: no placeholder at all
        return
    for match in _TOKEN.finditer(value):
        _check_token(match.group(1), path, names)


def check_value(value: Any, path: str, names: PlaceholderNames = _ANY_NAME) -> None:
    """`check_string` on every string inside nested lists and dicts (keys included)."""
    if isinstance(value, str):
        check_string(value, path, names)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_value(item, f"{path}[{index}]", names)
    elif isinstance(value, dict):
        for key, item in value.items():
            check_value(key, path, names)
            check_value(item, f"{path}.{key}", names)


def _check_token(body: str, path: str, names: PlaceholderNames) -> None:
    token = f"{{{{${body}}}}}"
    escape = _ESCAPE.fullmatch(body)
    core = escape["core"] if escape else body
    if core in _SIMPLE or _VERTEX_ONLY.fullmatch(core):
        # Vertex-only forms are refused when resolved: a task that never runs may hold them.
        return
    io = _IO.fullmatch(core)
    if io is None:
        raise _at(path, _unknown(token))
    side, kind, name, attr, key = io["side"], io["kind"], io["name"], io["attr"], io["key"]
    if kind == "parameters":
        valid = (side == "inputs" and attr is None) or (side == "outputs" and attr == "output_file")
        valid = valid and key is None
    else:
        valid = attr != "output_file" and (key is None or attr == "metadata")
    if not valid:
        raise _at(path, _unknown(token))
    declared = names.known(side, kind)
    if declared is not None and name not in declared:
        what = f"{side[:-1]} {kind[:-1]}"
        raise PipelineSpecError(
            f"placeholder {token} at {path} names {what} {name!r}, which the component does "
            f"not declare ({what}s: {', '.join(sorted(declared)) or 'none'})"
        )


def _check_structure(item: Any, path: str, names: PlaceholderNames, *, in_concat: bool) -> None:
    if isinstance(item, str):
        check_string(item, path, names)
        return
    if isinstance(item, dict) and len(item) == 1:
        if isinstance(item.get("Concat"), list):
            for index, part in enumerate(item["Concat"]):
                _check_structure(part, f"{path}.Concat[{index}]", names, in_concat=True)
            return
        spec = item.get("IfPresent")
        if isinstance(spec, dict) and isinstance(spec.get("InputName"), str):
            _check_if_present(spec, f"{path}.IfPresent", names, in_concat=in_concat)
            return
    raise PipelineSpecError(
        f"unsupported structured placeholder at {path}: {item!r:.120}; expected a string, "
        '{"Concat": [...]} or {"IfPresent": {"InputName": ..., "Then": ..., "Else": ...}}'
    )


def _check_if_present(
    spec: dict[str, Any], path: str, names: PlaceholderNames, *, in_concat: bool
) -> None:
    name = spec["InputName"]
    groups = [names.input_parameters, names.input_artifacts]
    groups += [names.output_parameters, names.output_artifacts]
    if all(group is not None for group in groups):
        declared = frozenset().union(*(g for g in groups if g is not None))
        if name not in declared:
            raise PipelineSpecError(
                f"IfPresent at {path} names input {name!r}, which the component does not "
                f"declare (inputs and outputs: {', '.join(sorted(declared)) or 'none'})"
            )
    for branch in ("Then", "Else"):
        value = spec.get(branch)
        where = f"{path}.{branch}"
        if value is None:
            continue
        if isinstance(value, list):
            if in_concat and len(value) > 1:  # `_expand` needs one argument per Concat part
                raise PipelineSpecError(
                    f"IfPresent at {path} inside a Concat gives several arguments in {branch}; "
                    "a Concat part must give exactly one"
                )
            for index, element in enumerate(value):
                _check_structure(element, f"{where}[{index}]", names, in_concat=in_concat)
        else:
            _check_structure(value, where, names, in_concat=in_concat)


def _at(path: str, error: PipelineSpecError) -> PipelineSpecError:
    return PipelineSpecError(f"{error} (at {path})")
