"""Five small tasks (a chain of three beside a pair), every value derived from `seed`."""

from kfp import dsl


@dsl.component
def work(seed: int, position: int, previous: int) -> int:
    return seed * 100 + position * 10 + previous % 10


@dsl.pipeline
def storage_fanout(seed: int) -> int:
    one = work(seed=seed, position=1, previous=0)
    two = work(seed=seed, position=2, previous=one.output)
    work(seed=seed, position=3, previous=two.output)
    four = work(seed=seed, position=4, previous=0)
    return work(seed=seed, position=5, previous=four.output).output
