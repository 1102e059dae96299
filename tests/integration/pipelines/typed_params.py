"""A pipeline with a required int parameter, for parameter validation by the CLI."""

from kfp import dsl


@dsl.component
def triple(count: int) -> int:
    return count * 3


@dsl.pipeline
def typed_params(count: int, label: str = "x") -> int:
    return triple(count=count).output
