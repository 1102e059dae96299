"""Three independent tasks that record when they ran, to check how many ran at once.

Each task writes `<scratch>/<label>.json` holding its `[start, end]` wall-clock times.
"""

from kfp import dsl


@dsl.component
def record_span(scratch: str, label: str, seconds: float) -> str:
    import json
    import os
    import time

    start = time.time()
    time.sleep(seconds)
    end = time.time()
    os.makedirs(scratch, exist_ok=True)
    with open(os.path.join(scratch, f"{label}.json"), "w") as f:
        json.dump([start, end], f)
    return label


@dsl.pipeline
def runtime_spans(scratch: str, seconds: float = 0.5):
    for label in ("a", "b", "c"):
        record_span(scratch=scratch, label=label, seconds=seconds).set_caching_options(False)
