"""One task that says which process forked it (the fork server) and where it runs."""

from kfp import dsl


@dsl.component
def where() -> str:
    import os

    return f"{os.getppid()} {os.getcwd()}"


@dsl.pipeline
def parent_pid() -> str:
    return where().output
