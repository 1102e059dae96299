"""Task-level settings: set_retry, set_env_variable, CPU/memory requests, set_caching_options.

`flaky` fails until it finds `failures` earlier attempts recorded in `scratch/attempts`, so
with failures=2 and set_retry(num_retries=2) it succeeds on its third and last attempt, and
with failures=3 it exhausts its retries. `count_runs` has caching disabled and appends one line
to `scratch/runs.txt` each time it really runs.
"""

from typing import NamedTuple

from kfp import dsl


@dsl.component
def flaky(scratch: str, failures: int) -> int:
    import os

    attempts_dir = os.path.join(scratch, "attempts")
    os.makedirs(attempts_dir, exist_ok=True)
    earlier = len(os.listdir(attempts_dir))
    open(os.path.join(attempts_dir, f"attempt-{earlier + 1}"), "w").close()
    if earlier < failures:
        raise RuntimeError(f"flaky: attempt {earlier + 1} fails on purpose")
    return earlier + 1


@dsl.component
def read_env() -> str:
    import os

    return os.environ["HEADWATER_TEST_GREETING"] + "|" + os.environ.get("SECOND_VAR", "")


@dsl.component
def sized(x: int) -> int:
    return x + 1


@dsl.component
def count_runs(scratch: str) -> int:
    import os

    os.makedirs(scratch, exist_ok=True)
    path = os.path.join(scratch, "runs.txt")
    with open(path, "a") as f:
        f.write("ran\n")
    with open(path) as f:
        return len(f.read().splitlines())


class Outputs(NamedTuple):
    attempts: int
    env: str
    sized: int
    runs: int


@dsl.pipeline
def retries(scratch: str, failures: int = 2) -> Outputs:
    attempts = flaky(scratch=scratch, failures=failures).set_retry(
        num_retries=2, backoff_duration="0s"
    )
    env = read_env()
    env.set_env_variable("HEADWATER_TEST_GREETING", "hello-env")
    env.set_env_variable("SECOND_VAR", "two")
    resized = sized(x=41).set_cpu_request("1").set_memory_limit("1G")
    runs = count_runs(scratch=scratch).set_caching_options(False)
    return Outputs(attempts=attempts.output, env=env.output, sized=resized.output, runs=runs.output)
