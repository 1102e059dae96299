"""A pipeline with a pipeline-level input artifact and an int: the bad-input tests break its IR.

Root tasks: `read-text` (reads `data`, repeats it `n` times) -> `shout` -> `shout-2`.
"""

from kfp import dsl
from kfp.dsl import Dataset, Input


@dsl.component
def read_text(data: Input[Dataset], n: int) -> str:
    with open(data.path) as f:
        return f.read().strip() * n


@dsl.component
def shout(text: str) -> str:
    return text.upper()


@dsl.pipeline
def bad_inputs(data: Input[Dataset], n: int = 1) -> str:
    first = read_text(data=data, n=n)
    second = shout(text=first.output)
    return shout(text=second.output).output
