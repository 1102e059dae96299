"""The XGBoost functions on a real LocalCluster, and the components in a pipeline on Dask.

The functions' tests share one in-process LocalCluster of two worker processes (the scheduler
and the client live in this process; neither warned here, so no warning filter is needed).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from cli_harness import Cli, pipeline, run_ok
from dask_cluster import DaskCluster

xgb = pytest.importorskip("xgboost")
dask = pytest.importorskip("dask")
pytest.importorskip("sklearn")

from sklearn.metrics import roc_auc_score  # noqa: E402

from headwater import get_run, get_step_metrics  # noqa: E402
from headwater.components.xgboost import hyperparameters  # noqa: E402
from headwater.components.xgboost.evaluation import evaluate_classifier  # noqa: E402
from headwater.components.xgboost.training import TrainingResult, train_xgboost  # noqa: E402
from headwater.errors import InvalidArgumentError, UserError  # noqa: E402

pytestmark = pytest.mark.integration

PARAMS = {"max_depth": 6, "learning_rate": 0.3}


@pytest.fixture(scope="module")
def splits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20k Higgs rows, preprocessed into train/validation/test (3 parts each), made here."""
    from headwater.components.data.higgs import generate_higgs
    from headwater.components.data.preprocessing import preprocess

    root = tmp_path_factory.mktemp("xgb")
    with dask.config.set(scheduler="synchronous"):
        generate_higgs(str(root / "raw"), 20_000, seed=5, partition_size_mb=1)
        preprocess(
            str(root / "raw"),
            *(str(root / s) for s in ("train", "validation", "test")),
            str(root / "stats.md"),
        )
    return root


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    from headwater.compute import cluster

    with cluster(n_workers=2, threads_per_worker=1, memory_limit="1GB") as made:
        yield made


@pytest.fixture(scope="module")
def trained(splits: Path, client: Any) -> TrainingResult:
    return train_xgboost(
        str(splits / "train"),
        str(splits / "validation"),
        str(splits / "model"),
        params=PARAMS,
        rounds=200,
        early_stopping_rounds=5,
        client=client,
    )


def test_training_uses_both_workers_and_saves_the_best_model(
    trained: TrainingResult, splits: Path
) -> None:
    meta = trained.metadata
    assert trained.workers == 2 and meta["workers"] == 2
    assert meta["framework"] == "xgboost" and meta["framework_version"] == xgb.__version__
    assert meta["objective"] == "binary:logistic" and meta["device"] == "cpu"
    assert meta["feature_names"][-2:] == ["jets_pt_sum", "n_btag"]
    assert len(meta["feature_names"]) == 30 and "label" not in meta["feature_names"]
    best, trained_rounds = meta["best_iteration"], meta["rounds_trained"]
    assert best + 1 + 5 == trained_rounds < 200  # stopped: 5 rounds without improvement
    validation = trained.history["validation"]["logloss"]
    assert len(validation) == trained_rounds and min(validation) == validation[best]
    assert trained.metrics["validation_logloss"] == validation[best]
    saved = xgb.Booster(model_file=str(splits / "model" / "model.ubj"))
    assert saved.num_boosted_rounds() == best + 1
    assert saved.feature_names == meta["feature_names"]
    assert (splits / "model" / "metadata.json").exists()


def test_the_model_records_the_transform_from_raw_rows(trained: TrainingResult) -> None:
    from headwater.components.data.higgs import FEATURES

    meta = trained.metadata
    assert meta["input_form"] == "raw" and meta["raw_features"] == list(FEATURES)
    assert meta["transform"]["format"] == "headwater.transform/1"
    assert [d["name"] for d in meta["transform"]["derived"]] == ["jets_pt_sum", "n_btag"]


def test_the_registered_model_answers_raw_rows_over_headwater_serve(
    trained: TrainingResult, splits: Path, headwater: Cli
) -> None:
    # Train/serve skew, end to end: the README's raw row (28 features, as pasted) to the
    # model preprocess and train_xgboost made, through `headwater serve NAME:VERSION`.
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from test_serve_cli import serving

    from headwater.api.models import register_model
    from headwater.components.data.higgs import FEATURES
    from headwater.components.data.preprocessing import add_features

    headwater.home.mkdir(parents=True, exist_ok=True)
    store = f"sqlite:///{headwater.home / 'metadata.db'}"
    assert register_model("higgs-xgboost", str(splits / "model"), metadata=store).version == 1
    request = _readme_request()
    row = request["inputs"][0]["data"]
    assert request["inputs"][0]["shape"] == [1, 28] and len(row) == len(FEATURES)
    # What training saw for this row: preprocess's own feature code on a one-row frame.
    frame = add_features(pd.DataFrame([row], columns=list(FEATURES), dtype="float32"))
    expected = trained.booster.inplace_predict(frame[trained.metadata["feature_names"]])
    with serving(headwater, "higgs-xgboost:1") as (url, _):
        v2 = httpx.post(f"{url}/v2/models/higgs-xgboost/infer", json=request)
        v1 = httpx.post(f"{url}/v1/models/higgs-xgboost:predict", json={"instances": [row]})
        processed = httpx.post(
            f"{url}/v1/models/higgs-xgboost:predict",
            json={"instances": frame[trained.metadata["feature_names"]].values.tolist()},
        )
        metadata = httpx.get(f"{url}/v2/models/higgs-xgboost").json()
        bad = httpx.post(f"{url}/v1/models/higgs-xgboost:predict", json={"instances": [row[:-1]]})
    assert v2.status_code == 200, v2.text
    assert v2.json()["outputs"][0]["data"] == pytest.approx(expected.tolist(), rel=1e-6)
    for answer in (v1, processed):
        assert answer.status_code == 200, answer.text
        assert answer.json()["predictions"] == pytest.approx(expected.tolist(), rel=1e-6)
    assert metadata["inputs"] == [{"name": "input-0", "datatype": "FP32", "shape": [-1, 28]}]
    assert metadata["parameters"]["input_form"] == "raw"
    assert metadata["parameters"]["raw_features"] == list(FEATURES)
    assert bad.status_code == 400 and "\n" not in bad.json()["error"]
    assert bad.json()["error"].startswith(
        "input 'input-0' has shape [1, 27]; the model takes [-1, 28] or [-1, 30] (-1: any "
        "size): raw rows of 28 features (lepton_pT, lepton_eta, lepton_phi, ..., m_wwbb), or "
        "rows of the model's 30 (the raw ones, then jets_pt_sum, n_btag)"
    )


def _readme_request() -> dict[str, Any]:
    """The V2 request of README's serving example, as a user pastes it."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    found = re.search(r"/v2/models/higgs-xgboost/infer -d '(.*?)'", readme, re.DOTALL)
    assert found, "README's serving example has no V2 request to higgs-xgboost"
    request: dict[str, Any] = json.loads(found.group(1))
    return request


def test_distributed_training_matches_one_process(trained: TrainingResult, splits: Path) -> None:
    train, valid = pd.read_parquet(splits / "train"), pd.read_parquet(splits / "validation")
    params = {**hyperparameters.merged(PARAMS), "nthread": 2}
    local = xgb.train(
        params,
        xgb.QuantileDMatrix(train.drop(columns="label"), train["label"]),
        trained.metadata["best_iteration"] + 1,
    )
    x, y = valid.drop(columns="label"), valid["label"]
    ours = roc_auc_score(y, trained.booster.inplace_predict(x))
    assert ours == pytest.approx(roc_auc_score(y, local.inplace_predict(x)), abs=0.01)
    assert ours > 0.75


def test_evaluation_matches_scikit_learn(
    trained: TrainingResult, splits: Path, client: Any
) -> None:
    result = evaluate_classifier(str(splits / "model"), str(splits / "test"), client=client)
    test = pd.read_parquet(splits / "test")
    scores = xgb.Booster(model_file=str(splits / "model" / "model.ubj")).inplace_predict(
        test.drop(columns="label")
    )
    exact = roc_auc_score(test["label"], scores)
    assert abs(result.auc - exact) <= result.metrics["auc_max_error"] + 1e-12
    assert result.metrics["rows"] == len(test)
    assert sum(map(sum, result.confusion_matrix)) == len(test)
    assert 100 <= len(result.roc["fpr"]) <= 202


def test_evaluation_on_one_machine_matches_the_clusters(
    trained: TrainingResult, splits: Path, client: Any
) -> None:
    from headwater import compute

    model, test = str(splits / "model"), str(splits / "test")
    on_cluster = evaluate_classifier(model, test, client=client)
    own = compute._own.get("client")
    with dask.config.set(scheduler=None):  # nothing names a cluster: predicted here
        here = evaluate_classifier(model, test)
    assert compute._own.get("client") is own  # no cluster was started for it
    assert here.confusion_matrix == on_cluster.confusion_matrix
    assert here.roc == on_cluster.roc
    assert here.metrics == pytest.approx(on_cluster.metrics, rel=1e-9)


def test_a_rejected_hyperparameter_is_named(splits: Path, client: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=r"hyperparameter 'max_depth'=-1 is rejected"):
        train_xgboost(
            str(splits / "train"),
            str(splits / "validation"),
            params={"max_depth": -1},
            client=client,
        )


def test_a_missing_label_is_named(splits: Path, client: Any) -> None:
    with pytest.raises(UserError, match=r"^train split: label column 'signal' is absent"):
        train_xgboost(
            str(splits / "train"), str(splits / "validation"), label="signal", client=client
        )


def test_evaluating_what_is_not_a_model_is_named(splits: Path, client: Any) -> None:
    with pytest.raises(UserError, match=r"is not an XGBoost model"):
        evaluate_classifier(str(splits / "stats.md"), str(splits / "test"), client=client)


# An end-to-end pipeline: ~30-60 s here, and CI machines under load were 3.5x slower.
@pytest.mark.timeout(360)
def test_the_pipeline_trains_and_evaluates_on_the_runs_cluster(
    headwater: Cli,
    dask_cluster: DaskCluster,
) -> None:
    cli = headwater(
        "run",
        pipeline("xgboost_higgs"),
        "--executor",
        "dask",
        "--scheduler",
        dask_cluster.address,
        "--json",
        timeout=240,
    )
    result = run_ok(cli)
    outputs = result["outputs"]
    assert outputs["workers"] == 2
    assert 0.75 < outputs["auc"] < 1
    model = outputs["model"]
    assert model["metadata"]["framework"] == "xgboost"
    assert Path(model["uri"].removeprefix("file://"), "model.ubj").exists()
    assert {t["executor"] for t in result["tasks"]} == {"dask"}
    # Every boosting round's evaluation metrics are recorded over steps; the Metrics
    # artifact's final values are those of the best iteration (the saved model).
    store = f"sqlite:///{headwater.home}/metadata.db"
    steps = {(s.task, s.name): s for s in get_step_metrics([result["run_id"]], metadata=store)}
    assert set(steps) == {
        ("train-xgboost", "train_logloss"),
        ("train-xgboost", "validation_logloss"),
    }
    rounds, best = model["metadata"]["rounds_trained"], model["metadata"]["best_iteration"]
    validation = steps[("train-xgboost", "validation_logloss")]
    assert [p[0] for p in validation.points] == list(range(rounds)) and validation.logged == rounds
    assert get_run(result["run_id"], metadata=store).metrics["validation_logloss"] == (
        pytest.approx(validation.points[best][1])
    )
