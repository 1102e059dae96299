"""Collecting a finished task's outputs: executor_output.json, OutputPath files, artifacts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from headwater.task import Launch, Outputs


class OutputError(Exception):
    """A task exited 0 but did not produce what it declared."""


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
        params[name] = _read_parameter(path, launch.output_types.get(name, "STRING"))
    artifacts: dict[str, list[dict[str, Any]]] = {}
    updates = written.get("artifacts") or {}
    for name, spec in (outputs_spec.get("artifacts") or {}).items():
        declared = spec["artifacts"]
        produced = (updates.get(name) or {}).get("artifacts") or []
        merged = []
        for i, art in enumerate(declared):
            art = dict(art)
            if i < len(produced):
                # Metadata only: a URI the component set is ignored, so that every artifact
                # stays inside the pipeline root (and remote outputs keep their remote URI).
                art["metadata"] = {**art.get("metadata", {}), **(produced[i].get("metadata") or {})}
            merged.append(art)
        artifacts[name] = merged
    return Outputs(params, artifacts)


def _read_parameter(path: Path, parameter_type: str) -> Any:
    text = path.read_text(encoding="utf-8")
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
            f"output parameter file {path} holds {text[:60]!r}, not a {parameter_type} in JSON"
        ) from exc
