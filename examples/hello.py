"""Hello, Headwater: a small KFP pipeline with a fan-out, a condition and an artifact.

headwater run examples/hello.py --param name=World
"""

from typing import List

from kfp import dsl
from kfp.dsl import Dataset, Input, Output


@dsl.component
def greet(name: str) -> str:
    return f"Hello, {name}!"


@dsl.component
def shout(text: str, times: int, out: Output[Dataset]):
    with open(out.path, "w") as fh:
        fh.write("\n".join([text.upper()] * times))
    out.metadata["lines"] = times


@dsl.component
def count_chars(data: Input[Dataset]) -> int:
    with open(data.path) as fh:
        return len(fh.read())


@dsl.component
def total(counts: List[int]) -> int:
    return sum(counts)


@dsl.pipeline(name="hello")
def hello(name: str = "World", repeats: List[int] = [1, 2, 3]) -> int:
    greeting = greet(name=name)
    with dsl.ParallelFor(repeats) as times:
        loud = shout(text=greeting.output, times=times)
        counted = count_chars(data=loud.outputs["out"])
    with dsl.If(name == "World"):
        greet(name="everyone")
    return total(counts=dsl.Collected(counted.output)).output
