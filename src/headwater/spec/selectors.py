"""The IR's references to values: task inputs and DAG outputs, checked for shape.

The engine reads these selectors raw (`TaskSpec.parameter_inputs`, `DagSpec.output_parameters`
...), so each function here checks that a selector has the one form the engine expects and
returns the mapping unchanged. Whether the tasks and keys they name exist is checked once the
whole pipeline is parsed (`validate.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from headwater.spec import _read as read

_OUT_PARAM = "outputParameterKey"
_OUT_ARTIFACT = "outputArtifactKey"
_SUBTASK = "producerSubtask"


def _selector(raw: Any, path: str, output_key: str, producer: str = "producerTask") -> None:
    """Check a `{producerTask, output...Key}` reference to a task's output."""
    sel = read.mapping(raw, path)
    for key in (producer, output_key):
        read.text(read.required(sel, key, path), f"{path}.{key}")


def dag_output_parameters(raw: Any, path: str) -> Mapping[str, Mapping[str, Any]]:
    """`dag.outputs.parameters`: each a `valueFromParameter` or a `valueFromOneof` of them."""
    outputs = read.named(raw, path)
    for name, spec in outputs.items():
        where = f"{path}.{name}"
        spec = read.mapping(spec, where)
        if "valueFromParameter" in spec:
            _selector(
                spec["valueFromParameter"], f"{where}.valueFromParameter", _OUT_PARAM, _SUBTASK
            )
        elif "valueFromOneof" in spec:
            oneof = read.node(spec["valueFromOneof"], where, "valueFromOneof")
            sels = f"{where}.valueFromOneof.parameterSelectors"
            for i, sel in enumerate(read.sequence(oneof.get("parameterSelectors"), sels)):
                _selector(sel, f"{sels}[{i}]", _OUT_PARAM, _SUBTASK)
        else:
            read.malformed(where, "'valueFromParameter' or 'valueFromOneof'", dict(spec))
    return outputs


def dag_output_artifacts(raw: Any, path: str) -> Mapping[str, Mapping[str, Any]]:
    """`dag.outputs.artifacts`: each a list of `artifactSelectors`."""
    outputs = read.named(raw, path)
    for name, spec in outputs.items():
        sels = f"{path}.{name}.artifactSelectors"
        spec = read.mapping(spec, f"{path}.{name}")
        for i, sel in enumerate(read.sequence(spec.get("artifactSelectors"), sels)):
            _selector(sel, f"{sels}[{i}]", _OUT_ARTIFACT, _SUBTASK)
    return outputs


def parameter_inputs(raw: Any, path: str) -> Mapping[str, Mapping[str, Any]]:
    """A task's `inputs.parameters`: each a constant, a DAG input, a task output or a status."""
    inputs = read.named(raw, path)
    for name, sel in inputs.items():
        where = f"{path}.{name}"
        sel = read.mapping(sel, where)
        if "runtimeValue" in sel:
            read.node(sel["runtimeValue"], where, "runtimeValue")
        elif "componentInputParameter" in sel:
            read.text(sel["componentInputParameter"], where, "componentInputParameter")
        elif "taskOutputParameter" in sel:
            _selector(sel["taskOutputParameter"], f"{where}.taskOutputParameter", _OUT_PARAM)
        elif "taskFinalStatus" in sel:
            status = read.mapping(sel["taskFinalStatus"], where, "taskFinalStatus")
            read.text(read.required(status, "producerTask", where), where, "producerTask")
        else:
            read.malformed(
                where,
                "one of 'runtimeValue', 'componentInputParameter', 'taskOutputParameter', "
                "'taskFinalStatus'",
                dict(sel),
            )
        if sel.get("parameterExpressionSelector"):
            expression = read.text(
                sel["parameterExpressionSelector"], where, "parameterExpressionSelector"
            )
            if not expression.lstrip().startswith(("parseJson(string_value)", "string_value")):
                read.malformed(
                    f"{where}.parameterExpressionSelector",
                    "an expression over string_value or parseJson(string_value)",
                    expression,
                )
    return inputs


def artifact_inputs(raw: Any, path: str) -> Mapping[str, Mapping[str, Any]]:
    """A task's `inputs.artifacts`: each a DAG input or a task output."""
    inputs = read.named(raw, path)
    for name, sel in inputs.items():
        where = f"{path}.{name}"
        sel = read.mapping(sel, where)
        if "componentInputArtifact" in sel:
            read.text(sel["componentInputArtifact"], where, "componentInputArtifact")
        elif "taskOutputArtifact" in sel:
            _selector(sel["taskOutputArtifact"], f"{where}.taskOutputArtifact", _OUT_ARTIFACT)
        else:
            read.malformed(where, "'componentInputArtifact' or 'taskOutputArtifact'", dict(sel))
    return inputs
