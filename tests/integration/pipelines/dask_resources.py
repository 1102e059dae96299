"""Tasks asking for more CPUs or memory than any machine here has: no Dask worker can run them."""

from kfp import dsl


@dsl.component
def greedy() -> str:
    return "ran"


@dsl.pipeline
def too_many_cpus() -> str:
    return greedy().set_cpu_request("512").set_caching_options(False).output


@dsl.pipeline
def too_much_memory() -> str:
    return greedy().set_memory_request("100Ti").set_caching_options(False).output
