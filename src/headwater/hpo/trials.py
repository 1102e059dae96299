"""One tuning trial as a task that never fails: a train component wrapped to report its error.

A failed task inside a `dsl.ParallelFor` fails its iteration, the loop and everything
downstream of it, on Kubeflow as on Headwater, and `dsl.Collected` then has nothing to give:
one bad learning rate would end the tuning. `trial_component` makes a new lightweight
component from a train component's own compiled source, with one function added::

    def train_trial(trial: dict, <the train component's inputs but the parameters>) -> dict:
        try:
            value = train(..., hyperparameters=trial["parameters"])
        except Exception as exc:
            return {"trial_index": trial["trial_index"], "error": "ValueError: ..."}
        return {"trial_index": trial["trial_index"], "objective": value}

The wrapper keeps the train component's image, packages, inputs and output artifacts, so its
IR runs wherever the train component's did. Its traceback stays in the task's log. A trial
that failed (it raised, returned a value that is not a finite number, or metrics without the
objective, which it still returns for `complete_trials` to name) also marks its outcome a
failure (`headwater.outcome`), so that no later run is served it from the cache: the next run
tries it again.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import itertools
import linecache
import textwrap
from collections.abc import Mapping
from typing import Any

from headwater.errors import InvalidArgumentError
from headwater.outcome import OUTCOME_ENV

#: The output types a train component may return its objective (or its metrics) as.
_OBJECTIVE_TYPES = ("Float", "Integer", "Dict")
_EXECUTOR_MAIN = "kfp.dsl.executor_main"
_ERROR_CHARS = 500
_counter = itertools.count(1)

_WRAPPER = '''
def {wrapper}(trial: dict, {signature}) -> dict:
    """One tuning trial of `{func}`: `{{"trial_index", "objective"}}`, or its `"error"`."""
    import math
    import os
    import traceback

    parameters = dict(trial["parameters"])
    # Through KFP every number is a double: an int parameter's 16 arrives as 16.0.
    for key, kind in {types!r}.items():
        if kind == "int" and isinstance(parameters.get(key), float):
            parameters[key] = int(round(parameters[key]))
    index = int(trial["trial_index"])

    def failed(error):
        # The task succeeds, so that the tuning goes on; but its outcome is a failure, which
        # Headwater must never reuse from its cache (see headwater.outcome: this image may
        # not have Headwater, so the file is written here).
        path = os.environ.get({outcome_env!r})
        if path:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(error)
        return error

    print(f"trial {{index}}: {{parameters}}", flush=True)
    try:
        value = {func}({call})
    except Exception as exc:
        traceback.print_exc()
        error = f"{{type(exc).__name__}}: {{exc}}"[:{limit}]
        return {{"trial_index": index, "error": failed(error)}}
    values = value if isinstance(value, dict) else {{"objective": value}}
    objective = {objective!r}
    if objective is not None and isinstance(value, dict) and objective not in value:
        # Its metrics still go to complete_trials, which marks the trial failed in Ax and,
        # when no trial reported the objective, names the metrics they did report.
        failed(f"did not report the objective {{objective!r}} (reported {{sorted(value)!r}})")
    for name, number in values.items():
        if not isinstance(number, (int, float)) or not math.isfinite(number):
            error = f"{{name}} is {{number!r}}, not a finite number"
            return {{"trial_index": index, "error": failed(error)}}
    return {{"trial_index": index, "objective": value}}
'''


def trial_component(
    train: Any,
    *,
    parameters_input: str = "hyperparameters",
    parameter_types: Mapping[str, str] | None = None,
    objective: str | None = None,
) -> Any:
    """Wrap a lightweight Python train component so that a failed trial is a value.

    Args:
        train: A `@dsl.component` that takes the trial's parameters as the dict input
            `parameters_input` and returns its objective (a number, or a dict of metrics
            holding the objective) as its output `Output`.
        parameters_input: The name of that dict input.
        parameter_types: {name: "int" | "float" | ...} of the search space: int parameters
            are made ints again before the train function sees them.
        objective: The metric to optimize: a trial whose dict of metrics lacks it failed.

    Returns:
        A component taking `trial` (`{"trial_index", "parameters"}`) and the train
        component's other inputs, returning `{"trial_index", "objective"}` or
        `{"trial_index", "error"}`, with the train component's output artifacts.

    Raises:
        InvalidArgumentError: `train` is not a lightweight Python component, lacks the dict
            input, returns something else than its objective, or has an input named `trial`.
    """
    spec = getattr(train, "component_spec", None)
    container = getattr(getattr(spec, "implementation", None), "container", None)
    label = getattr(spec, "name", None) or repr(train)
    program = _python_program(container)
    if spec is None or container is None or program is None:
        raise InvalidArgumentError(
            f"tune() needs a lightweight Python component (@dsl.component) to train, so that "
            f"a failed trial can be recorded rather than fail the tuning; {label!r} is not one"
        )
    position, source, func = program
    output = spec.outputs.get("Output") if spec.outputs else None
    if output is None or output.type not in _OBJECTIVE_TYPES:
        raise InvalidArgumentError(
            f"the train component {label!r} must return its objective (a float, or a dict of "
            f"metrics) as its output; it returns {output.type if output else 'nothing'!r}"
        )
    inputs = spec.inputs or {}
    if parameters_input not in inputs or inputs[parameters_input].type != "Dict":
        dicts = sorted(n for n, i in inputs.items() if i.type == "Dict")
        raise InvalidArgumentError(
            f"the train component {label!r} has no dict input {parameters_input!r} for the "
            f"trial's parameters (its dict inputs: {', '.join(map(repr, dicts)) or 'none'}); "
            "pass parameters_input= to name the right one"
        )
    if "trial" in inputs:
        raise InvalidArgumentError(
            f"the train component {label!r} has an input named 'trial', which the trial "
            "wrapper uses for the trial's index and parameters; rename it"
        )
    node = _function(source, func)
    wrapper = f"{func}_trial"
    text = _WRAPPER.format(
        wrapper=wrapper,
        func=func,
        signature=_signature(node, parameters_input),
        call=_call(node, parameters_input),
        types=dict(parameter_types or {}),
        limit=_ERROR_CHARS,
        objective=objective,
        outcome_env=OUTCOME_ENV,
    )
    combined = source.rstrip() + "\n\n" + textwrap.dedent(text).strip() + "\n"
    made = _compile(combined, wrapper)
    from kfp import dsl

    component = dsl.component(made, base_image=container.image)
    # Run with the train component's own command: its image, packages and pip settings.
    command = list(container.command)
    command[position] = combined
    args = list(container.args or [])
    args[args.index("--function_to_execute") + 1] = wrapper
    component.component_spec.implementation.container = dataclasses.replace(
        copy.deepcopy(container), command=command, args=args
    )
    return component


def _python_program(container: Any) -> tuple[int, str, str] | None:
    """(index of the source in the command, the source, the function's name), or None."""
    if container is None:
        return None
    command = [str(c) for c in container.command or []]
    args = [str(a) for a in container.args or []]
    if "--function_to_execute" not in args[:-1]:
        return None
    func = args[args.index("--function_to_execute") + 1]
    for i, part in enumerate(command[:-1]):
        if _EXECUTOR_MAIN in part and "ephemeral_component.py" in part:
            return i + 1, command[i + 1], func
    return None


def _function(source: str, func: str) -> ast.FunctionDef:
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == func:
            return node
    raise InvalidArgumentError(f"the train component's source defines no function {func!r}")


def _arguments(node: ast.FunctionDef, drop: str) -> list[tuple[ast.arg, ast.expr | None, bool]]:
    """(arg, default, keyword-only) of each argument of `node` except `drop`."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += list(args.defaults)
    found = [(a, d, False) for a, d in zip(positional, defaults, strict=True)]
    found += [(a, d, True) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)]
    return [item for item in found if item[0].arg != drop]


def _signature(node: ast.FunctionDef, drop: str) -> str:
    parts = []
    keyword_only = False
    for arg, default, kwonly in _arguments(node, drop):
        if kwonly and not keyword_only:
            parts.append("*")
            keyword_only = True
        text = ast.unparse(arg)
        parts.append(f"{text} = {ast.unparse(default)}" if default is not None else text)
    # `trial` comes first and has no default, so arguments without one may follow it.
    return ", ".join(parts)


def _call(node: ast.FunctionDef, parameters_input: str) -> str:
    names = [arg.arg for arg, _, _ in _arguments(node, parameters_input)]
    return ", ".join([*(f"{n}={n}" for n in names), f"{parameters_input}=parameters"])


def _compile(text: str, name: str) -> Any:
    """The function `name` defined by `text`, with its source findable by `inspect`."""
    filename = f"<headwater-trial-{name}-{next(_counter)}>"
    # An entry with no mtime is kept by linecache.checkcache, as for IPython's cells.
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    namespace: dict[str, Any] = {"__name__": f"headwater_trial_{name}"}
    # dont_inherit: this module's `from __future__ import annotations` would make the
    # wrapper's annotations strings, which KFP cannot read.
    exec(compile(text, filename, "exec", dont_inherit=True), namespace)
    return namespace[name]
