"""Two identical tasks; the one that fails first is retried after the other succeeded, so its
retry is a cache hit of the other (its first attempt was already recorded RUNNING)."""

import os

from kfp import dsl

FLAG_DIR = os.environ.get("HW_TEST_FLAG_DIR", "/tmp")


@dsl.component
def same(x: int, flag_dir: str) -> int:
    import os

    flag = os.path.join(flag_dir, "failed-once")
    if not os.path.exists(flag):
        open(flag, "w").close()
        raise RuntimeError("boom once")
    return x


@dsl.pipeline
def retry_hit(flag_dir: str = FLAG_DIR) -> int:
    first = same(x=1, flag_dir=flag_dir).set_retry(num_retries=2, backoff_duration="2s")
    same(x=1, flag_dir=flag_dir).set_retry(num_retries=2, backoff_duration="2s")
    return first.output
