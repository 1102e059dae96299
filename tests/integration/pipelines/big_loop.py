"""A loop of `n` iterations over an upstream output, fanned in; iterations from `fail_from` on
fail until the file `gate` exists (so a resumed run can finish what the first one could not)."""

from kfp import dsl


@dsl.component
def make_items(n: int) -> list:
    return list(range(n))


@dsl.component
def step(x: int, fail_from: int, gate: str) -> int:
    import os

    if 0 <= fail_from <= x and not os.path.exists(gate):
        raise RuntimeError(f"step {x} fails until {gate} exists")
    return x + 1


@dsl.component
def total(xs: list[int]) -> int:
    return sum(xs)


@dsl.pipeline
def big_loop(n: int = 60, fail_from: int = -1, gate: str = "") -> int:
    items = make_items(n=n)
    with dsl.ParallelFor(items=items.output) as item:
        one = step(x=item, fail_from=fail_from, gate=gate)
    return total(xs=dsl.Collected(one.output)).output
