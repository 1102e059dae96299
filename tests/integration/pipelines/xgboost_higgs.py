"""Headwater's XGBoost components end to end: Higgs data, preprocess, train, evaluate."""

from typing import NamedTuple

from kfp import dsl

from headwater.components.data import generate_higgs, preprocess
from headwater.components.xgboost import evaluate_classifier, train_xgboost


@dsl.pipeline
def p(rows: int = 20000, rounds: int = 30) -> NamedTuple(
    "Outputs", auc=float, workers=int, model=dsl.Model
):
    gen = generate_higgs(rows=rows, seed=2, partition_size_mb=1).set_caching_options(False)
    prep = preprocess(data=gen.outputs["data"]).set_caching_options(False)
    # The component's default params: KFP hands them over as a Struct (8 arrives as 8.0).
    train = train_xgboost(
        train=prep.outputs["train"],
        validation=prep.outputs["validation"],
        rounds=rounds,
        early_stopping_rounds=5,
    ).set_caching_options(False)
    evaluate = evaluate_classifier(
        model=train.outputs["model"], test=prep.outputs["test"]
    ).set_caching_options(False)
    outputs = NamedTuple("Outputs", auc=float, workers=int, model=dsl.Model)  # noqa: UP014
    return outputs(
        auc=evaluate.outputs["Output"],
        workers=train.outputs["Output"],
        model=train.outputs["model"],
    )
