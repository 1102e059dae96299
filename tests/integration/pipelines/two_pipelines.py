"""Two pipelines in one module: `headwater run` needs --pipeline to choose (else exit 2)."""

from kfp import dsl


@dsl.component
def echo(text: str) -> str:
    return text


@dsl.pipeline
def first(text: str = "from-first") -> str:
    return echo(text=text).output


@dsl.pipeline
def second(text: str = "from-second") -> str:
    return echo(text=text).output
