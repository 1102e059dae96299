"""Two identical tasks; the one that fails first is retried after the other succeeded, so its
retry (3 s later) is a cache hit of the other, whose first attempt is recorded RUNNING."""

import os

from kfp import dsl

FLAG_DIR = os.environ.get("HW_TEST_FLAG_DIR", "/tmp")


@dsl.component
def same(x: int, flag_dir: str) -> int:
    import os

    # Exactly one of the two tasks fails, once: creating the flag is atomic.
    try:
        os.close(os.open(os.path.join(flag_dir, "failed-once"), os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return x
    raise RuntimeError("boom once")


@dsl.pipeline
def retry_hit(flag_dir: str = FLAG_DIR) -> int:
    first = same(x=1, flag_dir=flag_dir).set_retry(num_retries=2, backoff_duration="3s")
    same(x=1, flag_dir=flag_dir).set_retry(num_retries=2, backoff_duration="3s")
    return first.output
