"""A quick task, then a gate that fails while `<scratch>/fail` exists and otherwise waits
(up to 120 s) for `<scratch>/open`.

For resuming one run from several engines at once; each task appends a line to
`<scratch>/calls-<task>.txt`.
"""

from kfp import dsl


@dsl.component
def quick(scratch: str) -> str:
    import os

    os.makedirs(scratch, exist_ok=True)
    with open(os.path.join(scratch, "calls-quick.txt"), "a") as f:
        f.write(f"{os.getpid()}\n")
    return "quick"


@dsl.component
def gate(scratch: str, previous: str) -> str:
    import os
    import time

    with open(os.path.join(scratch, "calls-gate.txt"), "a") as f:
        f.write(f"{os.getpid()}\n")
    if os.path.exists(os.path.join(scratch, "fail")):
        raise RuntimeError("the gate fails while <scratch>/fail exists")
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(scratch, "open")):
        if time.monotonic() > deadline:
            raise TimeoutError("<scratch>/open never appeared")
        time.sleep(0.05)
    return previous + "+gate"


@dsl.pipeline
def storage_gate(scratch: str) -> str:
    first = quick(scratch=scratch)
    return gate(scratch=scratch, previous=first.output).output
