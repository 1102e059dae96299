"""Make data, train a tiny XGBoost model on it, register it: a home's worth of records whose
paths must follow `HEADWATER_HOME` when it is moved."""

from kfp import dsl
from kfp.dsl import Dataset, Input, Model, Output

from headwater.components.registry import register_model


@dsl.component
def make_data(rows: int, data: Output[Dataset]):
    import numpy as np

    np.save(data.path + ".npy", np.random.default_rng(0).normal(size=(rows, 4)))


@dsl.component
def train(data: Input[Dataset], model: Output[Model]):
    import numpy as np
    import xgboost as xgb

    from headwater.models import xgboost_file

    x = np.load(data.path + ".npy").astype(np.float32)
    features = ["a", "b", "c", "d"]
    matrix = xgb.DMatrix(x, label=(x[:, 0] > 0).astype(int), feature_names=features)
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 2}, matrix, 3)
    xgboost_file.save(booster, model.path, {"framework": "xgboost", "feature_names": features})
    model.metadata["framework"] = "xgboost"
    print("trained")


@dsl.pipeline
def relocate_model(rows: int = 50):
    data = make_data(rows=rows)
    trained = train(data=data.outputs["data"])
    register_model(model=trained.outputs["model"], name="moved")
