"""`CustomRuntime`: a user's handler class, in the manner of TorchServe and KServe handlers.

Serve one with `headwater serve NAME=package.module:Handler` (importable) or
`NAME=path/to/handler.py:Handler`. The class is built with no arguments; every method but
`predict` is optional::

    class Handler:
        # Declared tensors are checked and shown in the model metadata; without them any
        # inputs are passed on and the outputs are whatever postprocess returns.
        inputs = [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
        outputs = [{"name": "length", "datatype": "INT64", "shape": [-1]}]

        def load(self) -> None:                       # once, before the first request
            self.model = ...

        def preprocess(self, inputs: dict[str, np.ndarray]) -> Any:
            return inputs["text"]                     # default: the inputs dict itself

        def predict(self, data: Any) -> Any:          # required
            return [len(t) for t in data]

        def postprocess(self, result: Any) -> dict[str, Any] | Any:
            return {"length": result}                 # default: result as the first output

        def explain(self, inputs: dict[str, np.ndarray], **options: Any) -> dict[str, Any]:
            return {"attributions": ..., "feature_names": [...]}   # also "predictions"

Every input array has the batch dimension first; `predict` may be called from several
threads at once, so keep per-request state out of `self`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from headwater.errors import UserError
from headwater.serving.runtimes.base import Explanation, ModelMetadata, ModelRuntime
from headwater.serving.tensors import DATATYPES, TensorSpec

OUTPUT = "output-0"


class CustomRuntime(ModelRuntime):
    """Serves a handler class (see the module docstring)."""

    framework = "custom"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handler: Any = None

    def load(self) -> None:
        """Import the class, build it, call its `load()` and read its declared tensors."""
        spec = str(self.source.handler)
        cls = load_handler_class(spec)
        try:
            handler = cls()
            if callable(getattr(handler, "load", None)):
                handler.load()
        except UserError:
            raise
        except Exception as exc:
            raise UserError(
                f"handler {spec!r} failed to load: {type(exc).__name__}: {exc}".splitlines()[0]
            ) from exc
        inputs = _declared(getattr(handler, "inputs", None), spec, "inputs")
        outputs = _declared(getattr(handler, "outputs", None), spec, "outputs")
        self.handler = handler
        self.metadata = ModelMetadata(
            platform="custom",
            inputs=inputs,
            outputs=outputs,
            details={"handler": spec},
        )

    def predict(
        self, inputs: Mapping[str, np.ndarray], *, outputs: Sequence[str] | None = None
    ) -> dict[str, np.ndarray]:
        """preprocess, predict and postprocess; the outputs by name."""
        handler = self.handler
        data: Any = dict(inputs)
        if callable(getattr(handler, "preprocess", None)):
            data = handler.preprocess(data)
        result = handler.predict(data)
        if callable(getattr(handler, "postprocess", None)):
            result = handler.postprocess(result)
        found = self._named(result)
        return {k: v for k, v in found.items() if outputs is None or k in outputs}

    def explain(
        self, inputs: Mapping[str, np.ndarray], *, options: Mapping[str, Any]
    ) -> Explanation:
        """The handler's own `explain(inputs, **options)`, if it has one."""
        if not callable(getattr(self.handler, "explain", None)):
            return super().explain(inputs, options=options)
        found = self.handler.explain(dict(inputs), **options)
        if not isinstance(found, dict) or "attributions" not in found:
            raise UserError(
                f"handler {self.source.handler!r}: explain() must return a dict with "
                f"'attributions', got {type(found).__name__}"
            )
        names = found.get("feature_names")
        predictions = found.get("predictions")
        if predictions is None:
            predictions = next(iter(self.predict(inputs).values()), np.empty(0))
        return Explanation(
            method=str(found.get("method", "custom")),
            predictions=np.asarray(predictions),
            attributions=np.asarray(found["attributions"]),
            feature_names=[str(n) for n in names] if names else None,
        )

    def unload(self) -> None:
        """Call the handler's `unload()`, if it has one, and drop it."""
        if callable(getattr(self.handler, "unload", None)):
            self.handler.unload()
        self.handler = None
        super().unload()

    def _named(self, result: Any) -> dict[str, np.ndarray]:
        if isinstance(result, dict):
            return {str(k): np.asarray(v) for k, v in result.items()}
        declared = self.metadata.output_names
        return {declared[0] if declared else OUTPUT: np.asarray(result)}


def load_handler_class(spec: str) -> type:
    """The class `"package.module:Class"` or `"path/to/file.py:Class"` names.

    Raises:
        UserError: The module or file cannot be loaded, or has no such class (the message
            lists the classes it has).
    """
    from headwater.loading import load_class

    module_name, _, name = spec.rpartition(":")
    if not module_name or not name:
        raise UserError(f"a handler is 'package.module:Class' or 'file.py:Class', got {spec!r}")
    found = load_class(spec, role="handler")
    if not callable(getattr(found, "predict", None)):
        raise UserError(f"handler class {spec!r} has no predict() method")
    return found


def _declared(found: Any, spec: str, what: str) -> tuple[TensorSpec, ...]:
    """A handler's `inputs`/`outputs` declaration as tensor specs."""
    if found is None:
        return ()
    tensors = []
    for item in found if isinstance(found, list | tuple) else [found]:
        ok = (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and item.get("datatype") in DATATYPES
            and isinstance(item.get("shape"), list | tuple)
            and all(isinstance(d, int) and not isinstance(d, bool) for d in item["shape"])
        )
        if not ok:
            raise UserError(
                f"handler {spec!r} declares {what} {item!r}: each must be "
                f"{{'name': str, 'datatype': one of {', '.join(DATATYPES)}, 'shape': [int, ...]}}"
            )
        tensors.append(TensorSpec(item["name"], item["datatype"], tuple(item["shape"])))
    return tuple(tensors)
