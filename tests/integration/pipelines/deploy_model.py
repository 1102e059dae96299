"""Train a tiny XGBoost model, register it, and deploy it as endpoint "churn"."""

from kfp import dsl
from kfp.dsl import Model, Output

from headwater.components.deployment import deploy_model
from headwater.components.registry import register_model


@dsl.component
def train(model: Output[Model], seed: int):
    import numpy as np
    import xgboost as xgb

    from headwater.models import xgboost_file

    features = ["age", "income", "tenure", "visits"]
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(200, 4)).astype(np.float32)
    matrix = xgb.DMatrix(x, label=(x[:, seed % 4] > 0).astype(int), feature_names=features)
    booster = xgb.train({"objective": "binary:logistic", "max_depth": 2}, matrix, 5)
    xgboost_file.save(booster, model.path, {"framework": "xgboost", "feature_names": features})
    model.metadata["framework"] = "xgboost"


@dsl.pipeline
def p(seed: int = 1, endpoint: str = "churn") -> str:
    trained = train(seed=seed)
    registered = register_model(model=trained.outputs["model"], name="churn")
    deployed = deploy_model(
        model_name=registered.outputs["name"],
        model_version=registered.outputs["version"],
        endpoint=endpoint,
    ).set_caching_options(False)
    return deployed.outputs["url"]
