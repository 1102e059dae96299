"""A task that prints `megabytes` MB of numbered lines (100 bytes each), then a last line."""

from kfp import dsl


@dsl.component
def chatty(megabytes: int) -> int:
    import sys

    lines = megabytes * 10_000
    filler = "x" * 80
    for i in range(lines):
        sys.stdout.write(f"line {i:012d} {filler}\n")
    sys.stdout.write("chatty-done\n")
    return lines


@dsl.pipeline
def task_chatty(megabytes: int = 1) -> int:
    return chatty(megabytes=megabytes).set_caching_options(False).output
