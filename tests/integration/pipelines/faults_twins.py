"""Two tasks writing one artifact each, read by a third; the test renames the two in the IR.

Named `make a` and `make_a` (as a hand-written IR may name them), they must still write to
two places: `pair` returns what each wrote.
"""

from kfp import dsl
from kfp.dsl import Dataset, Input, Output


@dsl.component
def make_text(text: str, data: Output[Dataset]):
    with open(data.path, "w") as f:
        f.write(text)


@dsl.component
def pair(a: Input[Dataset], b: Input[Dataset]) -> str:
    with open(a.path) as f, open(b.path) as g:
        return f.read() + "|" + g.read()


@dsl.pipeline
def faults_twins() -> str:
    first = make_text(text="first")
    second = make_text(text="second")
    return pair(a=first.outputs["data"], b=second.outputs["data"]).output
