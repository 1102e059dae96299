"""Data components given bad input: the task fails with the function's one-line error."""

from kfp import dsl

from headwater.components.data import generate_higgs, ingest


@dsl.pipeline
def p(source: str = "/nowhere/higgs.csv", partition_size_mb: int = 0):
    ingest(source=source).set_caching_options(False)
    generate_higgs(rows=10, partition_size_mb=partition_size_mb).set_caching_options(False)
