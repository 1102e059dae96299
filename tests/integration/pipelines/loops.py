"""ParallelFor over constants, a pipeline input, an upstream output and a list of dicts.

Also parallelism=2 (each `probe` task reports how many probes it saw running at once) and
dsl.Collected fan-in, both into a consumer and straight out as a pipeline output.
"""

from typing import NamedTuple

from kfp import dsl


@dsl.component
def square(x: int) -> int:
    return x * x


@dsl.component
def add(a: int, b: int) -> int:
    return a + b


@dsl.component
def make_list(n: int) -> list:
    return [i * 10 for i in range(n)]


@dsl.component
def total(values: list[int]) -> int:
    assert all(isinstance(v, int) for v in values), values
    return sum(values)


@dsl.component
def pair(a: int, b: int) -> str:
    return f"{a}+{b}={a + b}:{type(a).__name__}"


@dsl.component
def probe(scratch: str, index: int) -> int:
    import os
    import time

    os.makedirs(scratch, exist_ok=True)
    mine = os.path.join(scratch, f"running-{index}")
    open(mine, "w").close()
    time.sleep(0.6)
    running = len([n for n in os.listdir(scratch) if n.startswith("running-")])
    os.remove(mine)
    return running


@dsl.component
def peak(values: list[int]) -> int:
    return max(values)


class Outputs(NamedTuple):
    squares_total: int
    from_input: list[int]
    upstream_total: int
    pairs: list[str]
    peak_running: int


@dsl.pipeline
def loops(
    scratch: str,
    numbers: list = [5, 7],
) -> Outputs:
    with dsl.ParallelFor([1, 2, 3]) as x:
        squared = square(x=x)
    squares_total = total(values=dsl.Collected(squared.output))

    with dsl.ParallelFor(numbers) as n:
        plus_ten = add(a=n, b=10)

    listed = make_list(n=3)
    with dsl.ParallelFor(listed.output) as value:
        squared_value = square(x=value)
    upstream_total = total(values=dsl.Collected(squared_value.output))

    # The compiler types every field from the first dict's first value, so keep them all ints.
    with dsl.ParallelFor([{"a": 1, "b": 10}, {"a": 2, "b": 20}]) as item:
        paired = pair(a=item.a, b=item.b)

    with dsl.ParallelFor([0, 1, 2, 3], parallelism=2) as index:
        probed = probe(scratch=scratch, index=index)
    peak_running = peak(values=dsl.Collected(probed.output))

    return Outputs(
        squares_total=squares_total.output,
        from_input=dsl.Collected(plus_ten.output),
        upstream_total=upstream_total.output,
        pairs=dsl.Collected(paired.output),
        peak_running=peak_running.output,
    )
