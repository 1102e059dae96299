"""A task that asks for accelerators whose type and count are pipeline parameters."""

from kfp import dsl


@dsl.component
def wants_gpu() -> str:
    import os

    return os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")


@dsl.pipeline
def task_gpu(gpu_type: str = "nvidia.com/gpu", gpus: str = "1") -> str:
    task = wants_gpu().set_accelerator_type(gpu_type).set_accelerator_limit(gpus)
    return task.set_caching_options(False).output
