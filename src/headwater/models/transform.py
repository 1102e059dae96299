"""The transform a model's rows went through before training, as data: applied again at serving.

`preprocess` cleans raw rows (nulls filled with the column mean) and derives features from
them (the Higgs pipeline adds `jets_pt_sum` and `n_btag`), so the model it feeds takes more
columns than the rows the pipeline started from. It records what it did as a `Transform`,
small declarative JSON (column names, fill values, one named operation per derived
feature; no code), in `_transform.json` beside each split's parts (the leading underscore
keeps Parquet readers off it). `train_xgboost` stores it in the Model artifact's metadata,
and the model server applies it to raw rows before predicting, KServe's "transformer" without
a second service::

    {"format": "headwater.transform/1",
     "label": "label",
     "inputs": ["lepton_pT", ..., "m_wwbb"],              # the raw feature columns, in order
     "fill": {"m_bb": 1.02},                              # null -> value, before deriving
     "derived": [{"name": "jets_pt_sum", "op": "sum", "columns": ["jet1pt", ...]},
                 {"name": "n_btag", "op": "count_positive", "columns": ["jet1b-tag", ...]}]}

The model's features are `outputs`: `inputs` in order, then each derived feature not among
them (one that is replaces its column). Operations, on float64 copies of their columns, the
result rounded to float32:

* `sum`: the columns' sum, a null counting as 0 (pandas' `sum(axis=1)`).
* `count_positive`: how many of the columns are > 0 (a null is not).

`preprocess` (pandas) computes derived features with `derive`, the function serving uses, so
there is one implementation of each; a test runs both on the same rows and compares them.
A reader refuses a `format` it does not know rather than guess.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from headwater.errors import UserError

FORMAT = "headwater.transform/1"
#: The file beside a split's Parquet parts (ignored by the dataset readers: it starts with "_").
SPEC_FILE = "_transform.json"
#: The operations a derived feature may name (see the module docstring).
OPS = ("sum", "count_positive")


@dataclass(frozen=True)
class Derived:
    """One derived feature: `name` = `op` over `columns`."""

    name: str
    op: str
    columns: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "op": self.op, "columns": list(self.columns)}


@dataclass(frozen=True)
class Transform:
    """What turns a raw row into a row of the model's features (see the module docstring).

    Attributes:
        inputs: The raw feature columns, in the order a raw row gives them (no label).
        fill: Column -> the value a null in it becomes (before deriving).
        derived: The derived features, in the order they are made.
        label: The label column of the data it was made from (not an input).
    """

    inputs: tuple[str, ...]
    fill: Mapping[str, float] = field(default_factory=dict)
    derived: tuple[Derived, ...] = ()
    label: str = "label"

    @property
    def outputs(self) -> tuple[str, ...]:
        """The model's features: the inputs, then the derived features not among them."""
        known = set(self.inputs)
        return (*self.inputs, *(d.name for d in self.derived if d.name not in known))

    def to_json(self) -> dict[str, Any]:
        """The JSON form (see the module docstring)."""
        return {
            "format": FORMAT,
            "label": self.label,
            "inputs": list(self.inputs),
            "fill": {k: float(v) for k, v in self.fill.items()},
            "derived": [d.to_json() for d in self.derived],
        }

    @classmethod
    def from_json(cls, data: Any) -> Transform:
        """The transform `to_json` wrote.

        Raises:
            UserError: Not this format or version, or a field that does not add up (named).
        """
        if not isinstance(data, dict):
            raise UserError(f"a transform is a JSON object, got {type(data).__name__}")
        found = data.get("format")
        if found != FORMAT:
            raise UserError(
                f"transform format {found!r} is not one this Headwater reads ({FORMAT}); "
                "a newer Headwater wrote it? Upgrade Headwater to serve this model"
            )
        inputs = _names(data.get("inputs"), "inputs")
        fill = data.get("fill") or {}
        if not isinstance(fill, dict) or not all(
            k in inputs and isinstance(v, int | float) and not isinstance(v, bool)
            for k, v in fill.items()
        ):
            raise UserError(f"transform 'fill' must map input columns to numbers, got {fill!r}")
        derived = []
        for i, item in enumerate(data.get("derived") or []):
            if not isinstance(item, dict) or item.get("op") not in OPS:
                raise UserError(
                    f"transform derived[{i}] has op {_op(item)!r}; known ops: {', '.join(OPS)}"
                )
            columns = _names(item.get("columns"), f"derived[{i}].columns")
            absent = [c for c in columns if c not in inputs]
            name = item.get("name")
            if absent or not isinstance(name, str) or not name:
                raise UserError(
                    f"transform derived[{i}] ({name!r}) needs a name and columns among the "
                    f"inputs; these are not: {absent}"
                )
            derived.append(Derived(name, item["op"], tuple(columns)))
        return cls(
            tuple(inputs), {k: float(v) for k, v in fill.items()}, tuple(derived),
            str(data.get("label") or "label"),
        )  # fmt: skip

    def apply(self, rows: np.ndarray) -> np.ndarray:
        """Raw rows (one column per input, in order) as float32 rows of `outputs`.

        Raises:
            ValueError: `rows` is not 2-D with one column per input.
        """
        x = np.asarray(rows)
        if x.ndim != 2 or x.shape[1] != len(self.inputs):
            raise ValueError(
                f"raw rows have {len(self.inputs)} columns ({', '.join(self.inputs[:3])}, ...); "
                f"got shape {list(x.shape)}"
            )
        at = {name: i for i, name in enumerate(self.outputs)}
        out = np.empty((x.shape[0], len(self.outputs)), dtype=np.float32)
        out[:, : len(self.inputs)] = x
        for name, value in self.fill.items():
            column = out[:, at[name]]
            column[np.isnan(column)] = np.float32(value)
        for d in self.derived:
            out[:, at[d.name]] = derive(d.op, out[:, [at[c] for c in d.columns]])
        return out


def derive(op: str, block: np.ndarray) -> np.ndarray:
    """Operation `op` across the columns of `block` (rows x columns), as float32.

    Raises:
        ValueError: An unknown `op`.
    """
    wide = np.asarray(block, dtype=np.float64)
    if op == "sum":
        found: np.ndarray = np.nansum(wide, axis=1).astype(np.float32)
        return found
    if op == "count_positive":
        counted: np.ndarray = (wide > 0).sum(axis=1).astype(np.float32)
        return counted
    raise ValueError(f"unknown transform op {op!r} (known ops: {', '.join(OPS)})")


def dumps(transform: Transform) -> str:
    """The transform as the text of a `SPEC_FILE`."""
    return json.dumps(transform.to_json(), indent=2) + "\n"


def loads(text: str, *, where: str) -> Transform:
    """The transform in a `SPEC_FILE`'s text.

    Raises:
        UserError: Not JSON, or not a transform (the message names `where`).
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{where} is not JSON: {exc}") from exc
    try:
        return Transform.from_json(data)
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from exc


def _names(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise UserError(f"transform {what!r} must be a non-empty list of column names")
    return list(value)


def _op(item: Any) -> Any:
    return item.get("op") if isinstance(item, dict) else item


def describe(columns: Sequence[str], shown: int = 3) -> str:
    """`a, b, c, ..., z` for messages: the first `shown` names and the last."""
    names = list(columns)
    if len(names) <= shown + 1:
        return ", ".join(names)
    return f"{', '.join(names[:shown])}, ..., {names[-1]}"
