"""A pipeline used as a component inside another, twice, with parameter and artifact outputs.

`inner` is called twice (tasks `inner` and `inner-2`), the second time on the first one's
output, and itself calls `leaf`, a nested pipeline two levels down. Runs must pass
`--pipeline main` because the file defines three pipelines.
"""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Dataset, Input, Output


@dsl.component
def add(a: int, b: int) -> int:
    return a + b


@dsl.component
def write_number(value: int, number: Output[Dataset]):
    with open(number.path, "w") as f:
        f.write(str(value))
    number.metadata["value"] = value


@dsl.component
def read_number(number: Input[Dataset]) -> int:
    with open(number.path) as f:
        return int(f.read())


@dsl.pipeline
def leaf(x: int) -> int:
    return add(a=x, b=100).output


class InnerOutputs(NamedTuple):
    total: int
    number: Dataset


@dsl.pipeline
def inner(x: int, y: int = 1) -> InnerOutputs:
    summed = add(a=x, b=y)
    deeper = leaf(x=summed.output)
    written = write_number(value=deeper.output)
    return InnerOutputs(total=deeper.output, number=written.outputs["number"])


class Outputs(NamedTuple):
    first: int
    second: int
    read_back: int
    number: Dataset


@dsl.pipeline
def main(x: int = 2) -> Outputs:
    first = inner(x=x, y=3)
    second = inner(x=first.outputs["total"])
    read_back = read_number(number=second.outputs["number"])
    return Outputs(
        first=first.outputs["total"],
        second=second.outputs["total"],
        read_back=read_back.output,
        number=first.outputs["number"],
    )
