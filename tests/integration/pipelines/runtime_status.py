"""Two chained tasks that each sleep: long enough for the live status line to be drawn."""

from kfp import dsl


@dsl.component
def nap_first(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


@dsl.component
def nap_second(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


@dsl.pipeline
def runtime_status(seconds: float = 0.6) -> float:
    first = nap_first(seconds=seconds)
    return nap_second(seconds=first.output).output
