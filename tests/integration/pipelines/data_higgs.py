"""Headwater's data components end to end: generate Higgs data, preprocess it, summarise it."""

from typing import NamedTuple

from kfp import dsl

from headwater.components.data import generate_higgs, groupby_summary, preprocess


class Outputs(NamedTuple):
    data: dsl.Dataset
    train: dsl.Dataset
    table: dsl.Dataset


@dsl.pipeline
def p(rows: int = 20000) -> Outputs:
    gen = generate_higgs(rows=rows, seed=1, partition_size_mb=1).set_caching_options(False)
    prep = preprocess(data=gen.outputs["data"]).set_caching_options(False)
    summary = groupby_summary(data=prep.outputs["train"], bins=4).set_caching_options(False)
    return Outputs(
        data=gen.outputs["data"], train=prep.outputs["train"], table=summary.outputs["table"]
    )
