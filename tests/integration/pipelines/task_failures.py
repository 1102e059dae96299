"""Independent tasks, each failing in its own way; each must come back as a structured error.

A Python exception, `sys.exit(3)`, `os._exit(4)`, a SIGKILL, and a container that writes an
output parameter that is not text (bytes that are not UTF-8).
"""

from kfp import dsl


@dsl.component
def raises() -> str:
    raise ValueError("boom-value-7c1")


@dsl.component
def exits() -> str:
    import sys

    print("exits: calling sys.exit(3)")
    sys.exit(3)


@dsl.component
def exits_hard() -> str:
    import os

    os._exit(4)


@dsl.component
def killed() -> str:
    import os
    import signal

    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"


@dsl.container_component
def not_text(out: dsl.OutputPath(str)):
    return dsl.ContainerSpec(
        image="alpine", command=["sh", "-c", 'printf "\\377\\376" > "$0"'], args=[out]
    )


@dsl.pipeline
def task_failures():
    raises()
    exits()
    exits_hard()
    killed()
    not_text()
