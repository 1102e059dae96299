"""A task that writes its output, then creates `flag`: from then on the test's proxy in front
of the S3 server stops answering, so uploading that output stalls."""

from kfp import dsl
from kfp.dsl import Dataset, Input, Output


@dsl.component
def produce(flag: str, data: Output[Dataset]):
    with open(data.path, "w") as f:
        f.write("river data")
    open(flag, "w").close()


@dsl.component
def consume(data: Input[Dataset]) -> str:
    with open(data.path) as f:
        return f.read()


@dsl.pipeline
def storage_s3_stall(flag: str) -> str:
    return consume(data=produce(flag=flag).outputs["data"]).output
