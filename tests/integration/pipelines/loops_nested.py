"""Nested ParallelFor loops and a nested pipeline inside a loop, each fanned in by dsl.Collected.

Collected from a two-level loop is a list of lists (one inner list per outer iteration), as in
the KFP SDK's own test data (parallelfor_fan_in/nested_with_parameters.py). The file defines two
pipelines, so runs must pass `--pipeline main`.
"""

from typing import NamedTuple

from kfp import dsl


@dsl.component
def add(a: int, b: int) -> int:
    return a + b


@dsl.component
def double(x: int) -> int:
    return 2 * x


@dsl.component
def nested_total(values: list[list[int]]) -> int:
    assert all(isinstance(inner, list) for inner in values), values
    return sum(sum(inner) for inner in values)


@dsl.component
def total(values: list[int]) -> int:
    return sum(values)


@dsl.pipeline
def scale(x: int) -> int:
    doubled = double(x=x)
    return add(a=doubled.output, b=1).output


class Outputs(NamedTuple):
    grid: list[list[int]]
    grid_total: int
    scaled_total: int


@dsl.pipeline
def main() -> Outputs:
    with dsl.ParallelFor([1, 2]) as outer, dsl.ParallelFor([10, 20]) as inner:
        summed = add(a=outer, b=inner)
    grid_total = nested_total(values=dsl.Collected(summed.output))

    with dsl.ParallelFor([1, 2, 3]) as x:
        scaled = scale(x=x)
    scaled_total = total(values=dsl.Collected(scaled.output))

    return Outputs(
        grid=dsl.Collected(summed.output),
        grid_total=grid_total.output,
        scaled_total=scaled_total.output,
    )
