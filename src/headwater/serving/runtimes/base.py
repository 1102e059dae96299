"""`ModelRuntime`: the one interface between the server and a framework's model.

The server speaks to every model in named NumPy tensors, batch dimension first, so any
protocol (V1 instances, V2 typed tensors) and any batcher can drive any runtime::

    runtime = XGBoostRuntime(source)
    runtime.load()
    runtime.metadata.inputs            # (TensorSpec("input-0", "FP32", (-1, 30)),)
    runtime.predict({"input-0": x})    # {"predict": array of shape (n,)}
    runtime.explain({"input-0": x})    # Explanation(method="tree_shap", ...)
    runtime.unload()

`predict` must be safe to call from several threads at once: the server calls it from a
thread pool, never on its event loop. Rows are independent, so a batcher may concatenate the
inputs of several requests along the first axis and split the outputs back.

To serve another framework, subclass `ModelRuntime`, set `framework`, implement `load`
(reading `self.source.path`, then setting `self.metadata`) and `predict`, and optionally
`explain` and `unload`; register it in `headwater.serving.runtimes.RUNTIMES`::

    class OnnxRuntime(ModelRuntime):
        framework = "onnx"

        def load(self) -> None:
            import onnxruntime
            self.session = onnxruntime.InferenceSession(self.source.path)
            self.metadata = ModelMetadata(platform="onnx", inputs=..., outputs=...)

        def predict(self, inputs, *, outputs=None):
            names = list(outputs or self.metadata.default_outputs)
            return dict(zip(names, self.session.run(names, dict(inputs))))
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from headwater.serving.errors import InvalidInputError, ModelNotReadyError, NotSupportedError
from headwater.serving.source import ModelSource
from headwater.serving.tensors import TensorSpec


@dataclass(frozen=True)
class ModelMetadata:
    """What a loaded model takes and gives, as V2 model metadata shows it.

    Attributes:
        platform: The framework that runs it ("xgboost", "sklearn", "pytorch", "custom").
        inputs: The inputs, in order. Empty when the model does not declare them (a custom
            handler): then any inputs are passed on unchecked.
        outputs: Every output the model can give, in order.
        default_outputs: The outputs a request gets when it names none (default: all).
        feature_names: The names along the last axis of the single input (tabular models),
            so V1 instances may be objects keyed by feature, and explanations name features.
        details: Anything else the runtime knows (objective, device), for the server's log.
        parameters: What V2 model metadata shows under "parameters" (MLServer's field), when
            any: which rows the model takes (`input_form`) and the transform it applies.
    """

    platform: str
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()
    default_outputs: tuple[str, ...] = ()
    feature_names: tuple[str, ...] | None = None
    details: dict[str, Any] = field(default_factory=dict)
    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def output_names(self) -> tuple[str, ...]:
        """The names of every output."""
        return tuple(o.name for o in self.outputs)

    def input(self, name: str) -> TensorSpec | None:
        """The input called `name`, or None."""
        return next((i for i in self.inputs if i.name == name), None)

    def check_outputs(self, requested: Sequence[str] | None) -> tuple[str, ...] | None:
        """The outputs to compute for a request naming `requested` (None: the defaults).

        Raises:
            InvalidInputError: A name the model has no output of, or the same name twice.
        """
        if requested is None:
            return self.default_outputs or None
        known = self.output_names
        for name in requested:
            if known and name not in known:
                raise InvalidInputError(
                    f"the model has no output {name!r} (outputs: {', '.join(known)})"
                )
        if len(set(requested)) != len(requested):
            raise InvalidInputError(f"outputs name the same output twice: {list(requested)}")
        return tuple(requested)


@dataclass
class Explanation:
    """Attributions of a batch's predictions to its input features.

    Attributes:
        method: How they were computed ("tree_shap", "integrated_gradients", "occlusion").
        predictions: Per example, what the model predicted (or, for a classifier explained
            by Captum, the predicted class).
        attributions: Per example, one value per input feature, shaped like the input
            without its batch dimension (plus a class axis for a multi-class XGBoost model).
        feature_names: The names of the features along the last axis, when known.
        bias: Per example, what the attributions add to (TreeSHAP's expected value).
        targets: Per example, the output attributed (Captum).
        deltas: Integrated Gradients' convergence deltas.
    """

    method: str
    predictions: np.ndarray
    attributions: np.ndarray
    feature_names: list[str] | None = None
    bias: np.ndarray | None = None
    targets: list[int] | None = None
    deltas: list[float] | None = None


class ModelRuntime(abc.ABC):
    """One framework's way to load a model, predict, explain and unload.

    Args:
        source: What to load (`self.source.path` is local by the time `load` runs).
    """

    #: The framework this runtime serves (`ModelSource.framework`).
    framework: ClassVar[str] = ""

    def __init__(self, source: ModelSource) -> None:
        self.source = source
        self._metadata: ModelMetadata | None = None

    @property
    def metadata(self) -> ModelMetadata:
        """The loaded model's inputs and outputs.

        Raises:
            ModelNotReadyError: `load` has not run (or `unload` has).
        """
        if self._metadata is None:
            raise ModelNotReadyError(f"model {self.source.name!r} is not loaded")
        return self._metadata

    @metadata.setter
    def metadata(self, value: ModelMetadata) -> None:
        self._metadata = value

    @property
    def ready(self) -> bool:
        """True between `load` and `unload`."""
        return self._metadata is not None

    @abc.abstractmethod
    def load(self) -> None:
        """Load the model from `self.source` and set `self.metadata`.

        Raises:
            UserError: The files are not a model this runtime reads (the message says why).
        """

    @abc.abstractmethod
    def predict(
        self, inputs: Mapping[str, np.ndarray], *, outputs: Sequence[str] | None = None
    ) -> dict[str, np.ndarray]:
        """The named outputs for a batch of named inputs (batch dimension first).

        Args:
            inputs: Arrays already checked against `metadata.inputs` (names, datatypes,
                shapes) by the server.
            outputs: The outputs to compute, already checked; None for the defaults.

        Raises:
            UserError: Inputs the model cannot take (answered 400).
        """

    def explain(
        self, inputs: Mapping[str, np.ndarray], *, options: Mapping[str, Any]
    ) -> Explanation:
        """Attributions for a batch of named inputs.

        Args:
            inputs: As for `predict`.
            options: The request's explanation parameters (method, target, ...); a runtime
                refuses those it does not know.

        Raises:
            NotSupportedError: The runtime has no explainer (the default).
            InvalidInputError: An unknown or bad option.
        """
        raise NotSupportedError(
            f"model {self.source.name!r} ({self.framework}) has no explainer: explanations "
            "are served for XGBoost (TreeSHAP) and PyTorch (Captum) models, and for custom "
            "handlers that define explain()"
        )

    def unload(self) -> None:
        """Release the model; `ready` is False after. Override to free more (GPU memory)."""
        self._metadata = None

    def single_input(self, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        """The array of a model with one input (under whatever name it was checked)."""
        if len(inputs) != 1:
            raise InvalidInputError(
                f"model {self.source.name!r} takes one input; got {len(inputs)} "
                f"({', '.join(inputs)})"
            )
        return next(iter(inputs.values()))


def check_options(options: Mapping[str, Any], known: Sequence[str], *, what: str) -> None:
    """Refuse explanation options a runtime does not know, naming those it does.

    Raises:
        InvalidInputError: An unknown option.
    """
    unknown = sorted(set(options) - set(known))
    if unknown:
        allowed = ", ".join(known) if known else "none"
        raise InvalidInputError(
            f"{what} takes no parameter {', '.join(repr(u) for u in unknown)} "
            f"(parameters: {allowed})"
        )
