"""A Dataset passed between two tasks: for an S3 pipeline root."""

from kfp import dsl
from kfp.dsl import Dataset, Input, Output


@dsl.component
def produce(text: str, data: Output[Dataset]):
    with open(data.path, "w") as f:
        f.write(text)
    data.metadata["chars"] = len(text)


@dsl.component
def consume(data: Input[Dataset]) -> str:
    with open(data.path) as f:
        return f.read().upper()


@dsl.pipeline
def storage_s3(text: str = "river data") -> str:
    return consume(data=produce(text=text).outputs["data"]).output
