"""Second of two different pipelines sharing their first component (see `storage_shared_a.py`)."""

from kfp import dsl


@dsl.component
def shout(word: str) -> str:
    return word.upper() + "!"


@dsl.component
def count_letters(text: str) -> int:
    return sum(c.isalpha() for c in text)


@dsl.pipeline
def storage_shared_b(word: str = "river") -> int:
    return count_letters(text=shout(word=word).output).output
