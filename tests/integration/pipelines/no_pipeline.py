"""A module with a component but no @dsl.pipeline: `headwater run` must reject it (exit 2)."""

from kfp import dsl


@dsl.component
def lonely(x: int) -> int:
    return x
