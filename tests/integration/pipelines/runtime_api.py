"""A typed pipeline for the Python API: `headwater.run(runtime_api, arguments={...})`."""

from kfp import dsl


@dsl.component
def add(a: int, b: int) -> int:
    return a + b


@dsl.pipeline
def runtime_api(a: int, b: int = 2) -> int:
    return add(a=a, b=b).output
