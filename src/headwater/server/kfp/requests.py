"""KFP's request bodies, read and checked: what a run or recurring run is submitted with, an
uploaded pipeline file, and the small typed fields around them.

Everything here raises `InvalidArgumentError` (a 400 with KFP's error body) naming the field
and what it should be; nothing is stored before a request has been read whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import TYPE_CHECKING, Any

from headwater.errors import InvalidArgumentError, UserError
from headwater.spec.documents import check_document
from headwater.spec.loader import ir_yaml_loader

if TYPE_CHECKING:
    from headwater.spec.ir import PipelineIR

__all__ = [
    "Submission",
    "body_object",
    "parse_ir",
    "spec_name",
    "submission",
    "text",
    "uploaded_spec",
]


def body_object(body: Any) -> dict[str, Any]:
    """The request body as a JSON object."""
    if not isinstance(body, dict):
        raise InvalidArgumentError("the request body must be a JSON object")
    return body


def text(doc: Mapping[str, Any], name: str, *, required: bool = False) -> str:
    """A string field; "" when absent."""
    value = doc.get(name)
    if value is None or value == "":
        if required:
            raise InvalidArgumentError(f"{name} is required")
        return ""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{name} must be a string, got {value!r}")
    return value


def parse_ir(doc: Any) -> PipelineIR:
    """A submitted `pipeline_spec` (the IR, or `{pipeline_spec, platform_spec}` as
    `kfp.Client` sends a package with a platform spec) as the pipeline Headwater runs.

    Raises:
        InvalidArgumentError: It is not a PipelineSpec Headwater runs.
    """
    from headwater.spec.ir import parse_pipeline

    if not isinstance(doc, Mapping):
        raise InvalidArgumentError("pipeline_spec must be a JSON object (a compiled PipelineSpec)")
    spec: Any = doc
    platforms: Any = None
    if "root" not in doc and isinstance(doc.get("pipeline_spec"), Mapping):
        spec = doc["pipeline_spec"]
        platform = doc.get("platform_spec")
        # KFP's PlatformSpec message is `{platforms: {kubernetes: ...}}`.
        platforms = platform.get("platforms", platform) if isinstance(platform, Mapping) else None
    try:
        return parse_pipeline(spec, platforms or None)
    except UserError as exc:
        raise InvalidArgumentError(f"invalid pipeline_spec: {exc}") from exc


def spec_name(ir: PipelineIR, fallback: str) -> str:
    """The name a pipeline's IR gives it, or `fallback`."""
    info = ir.raw.get("pipelineInfo")
    name = info.get("name") if isinstance(info, Mapping) else None
    return name if isinstance(name, str) and name else fallback


def uploaded_spec(content_type: str, raw: bytes) -> tuple[PipelineIR, str]:
    """The pipeline in a multipart `uploadfile` (YAML or JSON; a platform spec as a second
    YAML document goes with it) and the file's name."""
    import yaml

    if not content_type.startswith("multipart/form-data"):
        raise InvalidArgumentError(
            "upload a pipeline as multipart/form-data with the file in 'uploadfile'"
        )
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw
    )
    for part in message.iter_parts():
        if part.get_param("name", header="content-disposition") != "uploadfile":
            continue
        data = part.get_payload(decode=True)
        if not isinstance(data, bytes):
            raise InvalidArgumentError("the 'uploadfile' part holds no file")
        name = part.get_filename() or "pipeline.yaml"
        if name.endswith((".zip", ".tar.gz", ".tgz")):
            raise InvalidArgumentError(
                f"{name}: upload the compiled .yaml or .json, not an archive"
            )
        try:
            docs = [d for d in yaml.load_all(data, Loader=ir_yaml_loader()) if d is not None]
        except (yaml.YAMLError, RecursionError, ValueError) as exc:
            raise InvalidArgumentError(f"{name} is not YAML or JSON: {exc}") from exc
        if not docs or not isinstance(docs[0], dict):
            raise InvalidArgumentError(f"{name} holds no pipeline spec")
        check_document(docs, what=name)
        spec: dict[str, Any] = docs[0]
        if len(docs) > 1 and isinstance(docs[1], dict):
            spec = {"pipeline_spec": docs[0], "platform_spec": docs[1]}
        return parse_ir(spec), name
    raise InvalidArgumentError("the upload has no 'uploadfile' part: send the pipeline file in it")


@dataclass
class Submission:
    """What a run (or a recurring run's runs) is submitted with, checked for shape.

    Exactly one of `ir` (an inline spec) and `pipeline_id` (a version reference; an empty
    `version_id` means the pipeline's newest version) is set.
    """

    display_name: str
    description: str = ""
    ir: PipelineIR | None = None
    pipeline_id: str = ""
    version_id: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    pipeline_root: str = ""
    experiment_id: str = ""
    namespace: str = ""


def submission(doc: Mapping[str, Any]) -> Submission:
    """A `V2beta1Run` or `V2beta1RecurringRun` request's pipeline, runtime config, names and
    experiment."""
    spec, ref = doc.get("pipeline_spec"), doc.get("pipeline_version_reference")
    if (spec is None) == (ref is None):
        raise InvalidArgumentError(
            "send exactly one of pipeline_spec and pipeline_version_reference"
        )
    found = Submission(
        display_name=text(doc, "display_name", required=True),
        description=text(doc, "description"),
        experiment_id=text(doc, "experiment_id"),
        namespace=text(doc, "namespace"),
    )
    if spec is not None:
        found.ir = parse_ir(spec)
    else:
        if not isinstance(ref, dict) or not text(ref, "pipeline_id"):
            raise InvalidArgumentError("pipeline_version_reference needs a pipeline_id")
        found.pipeline_id = text(ref, "pipeline_id")
        found.version_id = text(ref, "pipeline_version_id")
    config = doc.get("runtime_config") or {}
    if not isinstance(config, Mapping):
        raise InvalidArgumentError("runtime_config must be an object {parameters, pipeline_root}")
    params = config.get("parameters") or {}
    if not isinstance(params, Mapping):
        raise InvalidArgumentError("runtime_config.parameters must be an object of name: value")
    root = config.get("pipeline_root") or ""
    if not isinstance(root, str):
        raise InvalidArgumentError("runtime_config.pipeline_root must be a string (a path or URL)")
    found.parameters, found.pipeline_root = dict(params), root
    return found
