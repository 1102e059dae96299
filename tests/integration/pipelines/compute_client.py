"""A component that computes on Dask through headwater.compute.get_client()."""

from kfp import dsl


@dsl.component
def total(n: int) -> str:
    import os

    import dask.array as da

    from headwater.compute import get_client

    client = get_client()
    s = int(da.arange(n, chunks=max(1, n // 4)).sum().compute())
    return (
        f"{s} via {client.scheduler.address} env={os.environ.get('HEADWATER_DASK_SCHEDULER', '')}"
    )


@dsl.pipeline
def p(n: int = 100) -> str:
    return total(n=n).set_caching_options(False).output
