"""Output artifacts whose URI or path the component chose, in every form KFP's backend honours.

`dsl.get_uri()` for a pythonic artifact return, for each item of a NamedTuple of artifacts and
for each iteration of a loop (collected into a list); `Artifact.set_path` (a custom path);
and a URI outside the pipeline root. Every artifact is read back by a downstream task.
"""

from typing import List, NamedTuple

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Model, Output


@dsl.component
def gen_data() -> Dataset:
    dataset = Dataset(uri=dsl.get_uri("data"), metadata={"length": 9})
    with open(dataset.path, "w") as f:
        f.write("some data")
    return dataset


@dsl.component
def split(data: Input[Dataset]) -> NamedTuple("outputs", first=Dataset, second=Dataset):
    with open(data.path) as f:
        text = f.read()
    first, second = Dataset(uri=dsl.get_uri("first")), Dataset(uri=dsl.get_uri("second"))
    with open(first.path, "w") as f:
        f.write(text[:4])
    with open(second.path, "w") as f:
        f.write(text[5:])
    outputs = NamedTuple("outputs", first=Dataset, second=Dataset)  # noqa: UP014 -- as KFP's
    return outputs(first=first, second=second)


@dsl.component
def make_piece(text: str) -> Dataset:
    piece = Dataset(uri=dsl.get_uri("piece"))
    with open(piece.path, "w") as f:
        f.write(text)
    return piece


@dsl.component
def join(pieces: List[Dataset]) -> str:
    texts = []
    for piece in pieces:
        with open(piece.path) as f:
            texts.append(f.read())
    return "".join(texts)


@dsl.component
def custom_path(scratch: str, out: Output[Dataset]):
    import os

    os.makedirs(scratch, exist_ok=True)
    out.set_path(os.path.join(scratch, "custom-out"))
    with open(out.path, "w") as f:
        f.write("custom bytes")


@dsl.component
def outside_root(scratch: str) -> Model:
    import os

    os.makedirs(scratch, exist_ok=True)
    model = Model(uri=os.path.join(scratch, "outside-model"))
    with open(model.path, "w") as f:
        f.write("outside bytes")
    return model


@dsl.component
def read(a: Input[Artifact]) -> str:
    with open(a.path) as f:
        return f.read()


@dsl.component
def combine(first: str, second: str, joined: str, custom: str, outside: str) -> str:
    return "|".join([first, second, joined, custom, outside])


@dsl.pipeline
def task_artifact_uris(scratch: str) -> str:
    halves = split(data=gen_data().output)
    with dsl.ParallelFor(["Hel", "lo"]) as text:
        piece = make_piece(text=text)
    return combine(
        first=read(a=halves.outputs["first"]).output,
        second=read(a=halves.outputs["second"]).output,
        joined=join(pieces=dsl.Collected(piece.output)).output,
        custom=read(a=custom_path(scratch=scratch).outputs["out"]).output,
        outside=read(a=outside_root(scratch=scratch).output).output,
    ).output
