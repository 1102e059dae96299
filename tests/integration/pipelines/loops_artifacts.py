"""ParallelFor over a list of artifacts: a nested pipeline's dsl.Collected List[Dataset] output.

The same list also feeds a list-of-artifacts input directly. The file defines two pipelines, so
runs must pass `--pipeline main`.
"""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Dataset, Input, Output


@dsl.component
def make_part(text: str, part: Output[Dataset]):
    with open(part.path, "w") as f:
        f.write(text)
    part.metadata["length"] = len(text)


@dsl.component
def measure(part: Input[Dataset]) -> int:
    with open(part.path) as f:
        content = f.read()
    assert len(content) == part.metadata["length"], (content, part.metadata)
    return len(content)


@dsl.component
def total(values: list[int]) -> int:
    return sum(values)


@dsl.component
def join(parts: Input[list[Dataset]]) -> str:
    texts = []
    for part in parts:
        with open(part.path) as f:
            texts.append(f.read())
    return "|".join(texts)


@dsl.pipeline
def make_parts(texts: list) -> list[Dataset]:
    with dsl.ParallelFor(texts) as text:
        made = make_part(text=text)
    return dsl.Collected(made.outputs["part"])


class Outputs(NamedTuple):
    total_length: int
    joined: str
    parts: list[Dataset]


@dsl.pipeline
def main(texts: list = ["a", "bb", "ccc"]) -> Outputs:
    parts = make_parts(texts=texts)
    with dsl.ParallelFor(parts.output) as part:
        measured = measure(part=part)
    total_length = total(values=dsl.Collected(measured.output))
    joined = join(parts=parts.output)
    return Outputs(total_length=total_length.output, joined=joined.output, parts=parts.output)
