"""Starting a run from the UI: find the pipeline, read its parameters, and (`headwater ui` on its
own: `control.LocalRuns`) launch it in a thread; `headwater server` queues it instead.

A pipeline is a path on the server's machine (.py, .yaml, .yml or .json) or uploaded content,
which is saved under `$HEADWATER_HOME/ui-uploads` by digest (so uploading the same file twice
keeps one copy) and then used like a path. Running an uploaded .py file runs its code on the
server, which is why the whole UI needs a token off loopback.
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.errors import InvalidArgumentError, NotFoundError, UserError

if TYPE_CHECKING:
    from headwater.spec.ir import PipelineIR

__all__ = ["form_of", "launch", "pipeline_form", "save_upload"]

SUFFIXES = (".py", ".yaml", ".yml", ".json")

#: A parameter's IR type -> the form field kind the page shows.
FIELD_KINDS = {
    "NUMBER_INTEGER": "int",
    "NUMBER_DOUBLE": "float",
    "BOOLEAN": "bool",
    "STRING": "str",
    "LIST": "list",
    "STRUCT": "dict",
}

#: How long `launch` waits for the new run to be visible in the store.
VISIBLE_WITHIN_S = 30.0


def save_upload(content: str, filename: str) -> Path:
    """Save uploaded pipeline text; its path under `$HEADWATER_HOME/ui-uploads`.

    Raises:
        InvalidArgumentError: The file name's suffix is not one of `SUFFIXES`.
    """
    from headwater import config

    suffix = Path(filename).suffix.lower()
    if suffix not in SUFFIXES:
        raise InvalidArgumentError(
            f"cannot run an upload named {filename!r}: expected one of {', '.join(SUFFIXES)}"
        )
    folder = config.home() / "ui-uploads"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha256(content.encode()).hexdigest()[:24]}{suffix}"
    if not path.exists():
        path.write_text(content, encoding="utf-8")
    return path


def pipeline_form(path: str, *, pipeline_name: str | None = None) -> dict[str, Any]:
    """The pipeline's name and its root parameters as form fields.

    Returns:
        `{"path", "pipeline", "parameters": [{"name", "type", "kind", "required", "default"}]}`
        where `kind` is int, float, bool, str, list or dict, and `default` is of that kind.

    Raises:
        UserError: The pipeline cannot be loaded (`PipelineLoadError`, `PipelineSpecError`).
    """
    from headwater.spec.loader import load_pipeline

    return {"path": path, **form_of(load_pipeline(path, pipeline_name=pipeline_name))}


def form_of(ir: PipelineIR) -> dict[str, Any]:
    """`{"pipeline", "parameters"}` of `pipeline_form`, for a loaded pipeline."""
    fields = [
        {
            "name": p.name,
            "type": p.type,
            "kind": FIELD_KINDS.get(p.type, "str"),
            "required": not (p.has_default or p.optional),
            "default": _declared(p.default, p.type, p.name) if p.has_default else None,
        }
        for p in ir.root.interface.input_parameters.values()
    ]
    return {"pipeline": ir.name, "parameters": fields}


def _declared(default: Any, parameter_type: str, name: str) -> Any:
    """A default as the pipeline declared it: the IR keeps every number as a double
    (`rounds: int = 100` compiles to `100.0`), so it is coerced to the declared type, as the
    engine does when a run uses it (`[1.0, 2.0]` in a list becomes `[1, 2]`)."""
    from headwater.errors import ParameterError
    from headwater.spec.types import coerce, protojson

    try:
        return coerce(
            protojson(default), parameter_type, name=name, what="the default of parameter"
        )
    except ParameterError:
        return default  # the loader checked it; an unknown type shows as stored


def launch(
    pipeline: str | PipelineIR,
    arguments: dict[str, Any],
    *,
    pipeline_name: str | None = None,
    metadata: str | None = None,
) -> str:
    """Start `headwater.run` on a daemon thread; the new run's id once the store shows it.

    Errors found before the run starts (a bad pipeline, an unknown or mistyped parameter)
    are raised here; later ones are the run's own (it ends FAILED).

    Raises:
        UserError: The pipeline or its arguments are invalid (nothing ran).
    """
    import headwater
    from headwater.engine.hooks import RunHooks

    started = threading.Event()
    outcome: dict[str, Any] = {}

    class Announce(RunHooks):
        def before_run(self, *, run: Any) -> None:
            outcome["run_id"] = run.run_id
            started.set()

    def go() -> None:
        try:
            headwater.run(
                pipeline,
                arguments,
                pipeline_name=pipeline_name,
                metadata=metadata,
                hooks=[Announce()],
            )
        except BaseException as exc:  # reported to the request that started it
            outcome.setdefault("error", exc)
        finally:
            started.set()

    label = Path(pipeline).name if isinstance(pipeline, str) else pipeline.name
    threading.Thread(target=go, name=f"headwater-ui-run-{label}", daemon=True).start()
    started.wait()
    run_id: str | None = outcome.get("run_id")
    if run_id is None:
        error = outcome.get("error")
        if isinstance(error, UserError):
            raise error
        raise UserError(f"the run did not start: {type(error).__name__}: {error}") from error
    _wait_visible(run_id, metadata)
    return run_id


def _wait_visible(run_id: str, metadata: str | None) -> None:
    """Poll until the run's record is in the store, so its page opens at once."""
    from headwater.api.runs import get_run

    deadline = time.monotonic() + VISIBLE_WITHIN_S
    while True:
        try:
            get_run(run_id, metadata=metadata)
            return
        except NotFoundError:
            if time.monotonic() > deadline:
                return  # the page will say so; the run itself goes on
            time.sleep(0.02)
