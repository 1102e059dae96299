"""A task that asks for a GPU, next to one that does not."""

from kfp import dsl


@dsl.component
def on_gpu() -> str:
    return "ran-on-gpu"


@dsl.component
def on_cpu() -> str:
    return "ran-on-cpu"


@dsl.pipeline
def runtime_gpu():
    on_gpu().set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(1)
    on_cpu()
