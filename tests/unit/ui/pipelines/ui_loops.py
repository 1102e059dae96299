"""A loop of twelve iterations (two tasks each) fanned in, to check the graph folds long loops.

`fail_on` makes the iteration whose square equals it fail, to check a failed iteration is
drawn even when it is past the iterations shown. With `marks` (a folder), it fails only once
every other iteration has checked its value, so that none is left unstarted by the failure,
however the machine's load orders the tasks.
"""

from kfp import dsl


@dsl.component
def square(x: int) -> int:
    return x * x


@dsl.component
def check(value: int, fail_on: int, marks: str) -> int:
    import os
    import time

    if marks:
        os.makedirs(marks, exist_ok=True)
    if value == fail_on:
        deadline = time.monotonic() + 60
        while marks and len(os.listdir(marks)) < 11 and time.monotonic() < deadline:
            time.sleep(0.05)
        raise ValueError(f"{value} fails on purpose")
    if marks:
        open(os.path.join(marks, str(value)), "w").close()
    return value


@dsl.component
def total(values: list[int]) -> int:
    return sum(values)


@dsl.pipeline
def ui_loops(fail_on: int = -1, marks: str = "") -> int:
    with dsl.ParallelFor(list(range(12))) as x:
        checked = check(value=square(x=x).output, fail_on=fail_on, marks=marks)
    return total(values=dsl.Collected(checked.output)).output
