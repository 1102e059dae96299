"""Trigger conditions: KFP's CEL expressions, compiled and evaluated by a real CEL engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from headwater.errors import ConditionError


@dataclass(frozen=True)
class Condition:
    """A compiled `triggerPolicy.condition`.

    The KFP compiler emits expressions over `inputs.parameter_values['name']`, with `int()`,
    `double()`, comparisons, `&&` and `!()`; cel-python implements the whole language, so
    anything a hand-written IR adds (`||`, `in`, `size()`) works too.
    """

    expression: str
    _program: Any = field(repr=False, compare=False)

    def evaluate(self, parameter_values: dict[str, Any]) -> bool:
        """Evaluate against a task's resolved input parameters.

        Raises:
            ConditionError: The expression fails at run time or does not yield a bool.
        """
        import celpy
        import celpy.adapter
        import celpy.evaluation

        values = {"parameter_values": _as_protobuf_values(parameter_values)}
        activation = {"inputs": celpy.adapter.json_to_cel(values)}
        try:
            result = self._program.evaluate(activation)
        except celpy.evaluation.CELEvalError as exc:
            raise ConditionError(
                f"condition {self.expression!r} failed: {exc.args[0] if exc.args else exc}"
            ) from exc
        except RecursionError as exc:
            raise ConditionError(
                f"condition {self.expression!r:.80} nests too deeply to evaluate: simplify it"
            ) from exc
        if isinstance(result, celpy.evaluation.CELEvalError):
            raise ConditionError(f"condition {self.expression!r} failed: {result.args[0]}")
        if not isinstance(result, bool | celpy.celtypes.BoolType):
            raise ConditionError(
                f"condition {self.expression!r} gave {result!r}, not a bool: "
                "a trigger condition must be a boolean expression"
            )
        return bool(result)


def _as_protobuf_values(value: Any) -> Any:
    """Turn every number into a double, as `google.protobuf.Value` holds it in KFP's backend.

    The compiler relies on this: it wraps NUMBER_INTEGER channels in `int(...)` and int literals
    compared with doubles in `double(...)`, which only type-checks in CEL when values are doubles.
    """
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list | tuple):
        return [_as_protobuf_values(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_protobuf_values(v) for k, v in value.items()}
    return value


def compile_condition(expression: str, *, task: str) -> Condition:
    """Compile a CEL condition, naming the task when it is not valid CEL.

    Raises:
        ConditionError: The expression does not parse.
    """
    import celpy
    import celpy.celparser

    env = celpy.Environment()
    try:
        ast = env.compile(expression)
        if _depth(ast) > MAX_DEPTH:
            raise RecursionError  # refused here, not when a run evaluates it
        program = env.program(ast)
    except RecursionError as exc:
        raise ConditionError(
            f"task {task!r} has a condition that nests too deeply ({len(expression)} "
            f"characters; at most {MAX_DEPTH} levels of syntax): simplify it"
        ) from exc
    except celpy.celparser.CELParseError as exc:
        lines = str(exc).splitlines()
        column = lines[1].index("^") + 1 if len(lines) > 1 and "^" in lines[1] else None
        where = f" at column {column}" if column else ""
        hint = "fix the condition in the pipeline"
        if expression.count("'") % 2:
            hint += " (the KFP compiler does not escape a quote inside a string literal)"
        raise ConditionError(
            f"task {task!r} has a condition that is not valid CEL{where}: {expression!r}; {hint}"
        ) from exc
    return Condition(expression, program)


#: Deepest syntax tree a condition may have. cel-python evaluates recursively, a few frames a
#: level, and fails past ~500 levels; what the KFP compiler writes (nested dsl.If, `&&` chains)
#: stays under 100.
MAX_DEPTH = 300


def _depth(tree: Any) -> int:
    """Depth of a lark syntax tree, without recursion."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in getattr(node, "children", ()))
    return deepest
