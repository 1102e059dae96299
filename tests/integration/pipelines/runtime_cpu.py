"""Three independent tasks that each request every CPU of the machine: they must run alone.

Each task writes `<scratch>/<label>.json` holding its `[start, end]` wall-clock times.
"""

import os

from kfp import dsl

ALL_CPUS = str(os.cpu_count() or 1)


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
def runtime_cpu(scratch: str, seconds: float = 0.5):
    for label in ("a", "b", "c"):
        task = record_span(scratch=scratch, label=label, seconds=seconds)
        task.set_cpu_request(ALL_CPUS).set_caching_options(False)
