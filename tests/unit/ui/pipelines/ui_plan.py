"""A loop over a task's output, a long loop over a literal list and an If/Else: the run graph's
plan (tasks not started yet), iteration labels, condition marks and folded groups.

`seconds` makes each `train` sleep, to look at the graph of a run in progress.
"""

from kfp import dsl


@dsl.component
def make_rates(n: int) -> list:
    return [round(0.05 * (i + 1), 2) for i in range(n)]


@dsl.component
def train(lr: float, seconds: float) -> float:
    import time

    time.sleep(seconds)
    return lr * 10


@dsl.component
def best(scores: list) -> float:
    return max(scores)


@dsl.component
def square(x: int) -> int:
    return x * x


@dsl.component
def check(value: int) -> int:
    return value


@dsl.component
def report(text: str, score: float) -> str:
    return f"{text}: {score}"


@dsl.pipeline
def ui_plan(n: int = 3, seconds: float = 0.0, mode: str = "fast") -> float:
    rates = make_rates(n=n)
    with dsl.ParallelFor(rates.output) as lr:
        trained = train(lr=lr, seconds=seconds)
    top = best(scores=dsl.Collected(trained.output))
    with dsl.ParallelFor(list(range(10))) as x:
        check(value=square(x=x).output)
    with dsl.If(mode == "fast"):
        report(text="fast", score=top.output)
    with dsl.Else():
        report(text="slow", score=top.output)
    return top.output
