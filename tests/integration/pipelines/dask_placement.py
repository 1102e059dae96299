"""GPU tasks next to plain ones: for routing on a Dask cluster where one worker has `GPU=1`.

Each task prints and returns the name its worker's environment gives it
(`HW_TEST_DASK_WORKER`, set by the tests' cluster), so the output shows where it ran.
"""

from typing import List

from kfp import dsl


@dsl.component
def on_gpu(index: int) -> str:
    import os

    worker = os.environ.get("HW_TEST_DASK_WORKER", "<none>")
    print(f"gpu task {index} ran on {worker}", flush=True)
    return worker


@dsl.component
def on_cpu(index: int) -> str:
    import os

    worker = os.environ.get("HW_TEST_DASK_WORKER", "<none>")
    print(f"cpu task {index} ran on {worker}", flush=True)
    return worker


@dsl.pipeline
def dask_placement() -> List[str]:
    # Four GPU tasks, so a scheduler that ignores the request is caught, not lucky.
    with dsl.ParallelFor(items=[0, 1, 2, 3]) as index:
        gpu = on_gpu(index=index).set_accelerator_type("nvidia.com/gpu")
        gpu.set_accelerator_limit(1).set_caching_options(False)
    with dsl.ParallelFor(items=[0, 1, 2, 3]) as index:
        on_cpu(index=index).set_caching_options(False)
    return dsl.Collected(gpu.output)
