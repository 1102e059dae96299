"""A failing task: its downstream task is never started, an independent sibling still finishes.

`boom` prints a marker line and then raises; `slow_sibling` is already running when `boom`
fails and takes about a second, so a runner that kills or forgets running siblings is caught.
"""

from kfp import dsl


@dsl.component
def boom(message: str) -> str:
    print("boom-log-line: about to raise")
    raise ValueError(message)


@dsl.component
def downstream(value: str) -> str:
    return value + "-downstream"


@dsl.component
def slow_sibling(seconds: float) -> str:
    import time

    time.sleep(seconds)
    return "sibling-done"


@dsl.pipeline
def failure() -> str:
    exploded = boom(message="kaboom-7f3a")
    downstream(value=exploded.output)
    sibling = slow_sibling(seconds=1.5)
    return sibling.output
