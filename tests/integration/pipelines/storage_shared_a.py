"""First of two different pipelines that start with the same component and the same inputs.

`shout` is defined identically in `storage_shared_b.py`: the second pipeline's `shout` is a
cache hit on the first's, because cache keys are by content, not by pipeline.
"""

from kfp import dsl


@dsl.component
def shout(word: str) -> str:
    return word.upper() + "!"


@dsl.component
def twice(text: str) -> str:
    return text + text


@dsl.pipeline
def storage_shared_a(word: str = "river") -> str:
    return twice(text=shout(word=word).output).output
