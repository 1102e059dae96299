"""The arguments of a user's LightningModule and LightningDataModule, typed from their signatures:
values from a pipeline (JSON numbers, strings, lists) coerced to what each `__init__` admits,
and the class built with them, naming the argument it refuses."""

from __future__ import annotations

import inspect
from typing import Any

from headwater.errors import UserError

__all__ = ["coerce", "construct"]


def coerce(target: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` with numeric and boolean strings turned into the numbers and booleans that
    `target`'s signature asks for.

    A KFP pipeline parameter inside a dict argument (`module_args={"lr": lr}`) reaches the
    task as a string, on Kubeflow as here; this undoes that where the signature is clear.
    """
    try:
        params = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return kwargs
    import typing

    try:
        # A class's own __init__, or the one it inherits (its annotations, not the class's).
        init = (
            next((vars(c)["__init__"] for c in target.__mro__ if "__init__" in vars(c)), target)
            if isinstance(target, type)
            else target
        )
        hints = typing.get_type_hints(init)
    except Exception:
        hints = {}
    out = dict(kwargs)
    for key, value in kwargs.items():
        param = params.get(key)
        if param is None or not isinstance(value, str):
            continue
        if key in hints:
            param = param.replace(annotation=hints[key])
        types, literals = _admits(param)
        if str in types or value in literals:
            continue
        text = value.strip()
        if bool in types and text.lower() in ("true", "false"):
            out[key] = text.lower() == "true"
            continue
        for kind in (int, float):
            try:
                number = kind(text)
            except ValueError:
                continue
            if kind in types or number in literals:
                out[key] = number
                break
    return out


def _admits(param: inspect.Parameter) -> tuple[set[Any], set[Any]]:
    """The types and literal values a parameter's annotation (else its default) admits; `str`
    among the types when it cannot tell."""
    import typing

    annotation = param.annotation
    if annotation is inspect.Parameter.empty:
        default = param.default
        kind = type(default)
        return ({kind} if kind in (bool, int, float) else {str}), set()
    if isinstance(annotation, str):
        return {str}, set()
    types: set[Any] = set()
    literals: set[Any] = set()
    pending = [annotation]
    while pending:
        item = pending.pop()
        origin = typing.get_origin(item)
        if origin is typing.Literal:
            literals.update(typing.get_args(item))
        elif origin is not None and typing.get_args(item) and origin in (typing.Union, _union()):
            pending.extend(typing.get_args(item))
        elif item is typing.Any:
            types.add(str)
        elif isinstance(item, type):
            types.add(item)
    if float in types:
        types.add(int)
    return types, literals


def _union() -> Any:
    import types

    return getattr(types, "UnionType", None)


def construct(cls: type, kwargs: dict[str, Any], what: str, name: str) -> Any:
    kwargs = coerce(cls, kwargs)
    try:
        inspect.signature(cls).bind(**kwargs)
    except TypeError as exc:
        accepted = ", ".join(
            p for p in inspect.signature(cls).parameters if p not in ("self", "args", "kwargs")
        )
        raise UserError(
            f"{name!r} rejects {what} {sorted(kwargs)}: {exc} (it takes: {accepted or 'nothing'})"
        ) from exc
    return cls(**kwargs)
