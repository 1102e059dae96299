"""A task whose first attempt writes its pid and sleeps, for killing its Dask worker under it.

Each attempt adds a file to `<scratch>/attempts`; the first one also writes `<scratch>/pid`
and sleeps `seconds`, later ones return at once. `victim_retried` may retry once,
`victim_once` may not.
"""

from kfp import dsl


@dsl.component
def victim(scratch: str, seconds: float) -> int:
    import os
    import time

    attempts_dir = os.path.join(scratch, "attempts")
    os.makedirs(attempts_dir, exist_ok=True)
    attempt = len(os.listdir(attempts_dir)) + 1
    open(os.path.join(attempts_dir, f"attempt-{attempt}-{os.getpid()}"), "w").close()
    if attempt == 1:
        tmp = os.path.join(scratch, "pid.tmp")
        with open(tmp, "w") as f:
            f.write(str(os.getpid()))
        os.replace(tmp, os.path.join(scratch, "pid"))
        time.sleep(seconds)
    return attempt


@dsl.pipeline
def victim_retried(scratch: str, seconds: float = 60.0) -> int:
    task = victim(scratch=scratch, seconds=seconds).set_caching_options(False)
    return task.set_retry(num_retries=1, backoff_duration="0s").output


@dsl.pipeline
def victim_once(scratch: str, seconds: float = 60.0) -> int:
    return victim(scratch=scratch, seconds=seconds).set_caching_options(False).output
