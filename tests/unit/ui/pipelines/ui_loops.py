"""A loop of twelve iterations (two tasks each) fanned in, to check the graph folds long loops.

`fail_on` makes the iteration whose square equals it fail, to check a failed iteration is
drawn even when it is past the iterations shown.
"""

from kfp import dsl


@dsl.component
def square(x: int) -> int:
    return x * x


@dsl.component
def check(value: int, fail_on: int) -> int:
    if value == fail_on:
        raise ValueError(f"{value} fails on purpose")
    return value


@dsl.component
def total(values: list[int]) -> int:
    return sum(values)


@dsl.pipeline
def ui_loops(fail_on: int = -1) -> int:
    with dsl.ParallelFor(list(range(12))) as x:
        checked = check(value=square(x=x).output, fail_on=fail_on)
    return total(values=dsl.Collected(checked.output)).output
