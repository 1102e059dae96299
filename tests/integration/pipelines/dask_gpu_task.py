"""A task that asks for one GPU and reports which device it was given."""

from kfp import dsl


@dsl.component
def which_gpu() -> str:
    import os
    import subprocess

    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True)
    return f"{os.environ.get('CUDA_VISIBLE_DEVICES', '')}|{len(listed.stdout.splitlines())}"


@dsl.pipeline
def gpu_task() -> str:
    task = which_gpu().set_caching_options(False)
    task.set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(1)
    return task.output
