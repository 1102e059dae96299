"""The model registry end to end: `register_model` in a real `headwater run`, then
`headwater models` and `headwater lineage` in real processes on the SQLite store it wrote."""

from __future__ import annotations

import json

import pytest
from cli_harness import Cli, cached_flags, pipeline, run_ok

pytestmark = pytest.mark.integration


def models(headwater: Cli, *args: str) -> list[dict[str, object]]:
    listed = headwater("models", "list", "--json", *args).json()
    assert isinstance(listed, list)
    return listed


@pytest.mark.slow
def test_a_pipeline_registers_its_model_with_its_run(headwater: Cli) -> None:
    first = headwater.run_ok("models_register")
    assert first["outputs"] == {"Output": 1}
    [model] = models(headwater)
    uri = model["uri"]
    assert {k: model[k] for k in ("name", "version", "framework", "stage", "run_id")} == {
        "name": "toy",
        "version": 1,
        "framework": "toy",
        "stage": "production",
        "run_id": first["run_id"],
    }
    assert model["metrics"] == {"data": "toy-v1", "auc": pytest.approx(0.59)}
    assert isinstance(uri, str) and f"/{first['run_id']}/train/model" in uri
    train = next(t for t in headwater.show(first["run_id"])["tasks"] if t["name"] == "train")
    assert model["execution_id"] == train["execution_id"]

    # Lineage of the model's artifact reaches the run that produced it, and the registry.
    graph = headwater("lineage", str(uri), "--upstream", "--json").json()
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert f"r:{first['run_id']}" in nodes
    [artifact] = [n for n in graph["nodes"] if n["kind"] == "artifact" and n["uri"] == uri]
    assert artifact["models"] == [{"name": "toy", "version": 1, "stage": "production"}]
    text = headwater("lineage", str(uri)).stdout
    assert "[model toy v1, production]" in text and f"run {first['run_id']}" in text

    # The same model again: the registration is cached, no new version.
    again = headwater.run_ok("models_register")
    assert cached_flags(again)["register-model"] and again["outputs"] == {"Output": 1}
    # A new model: version 2 takes production from version 1.
    second = headwater.run_ok("models_register", params={"seed": 2})
    assert second["outputs"] == {"Output": 2}
    listed = models(headwater, "--name", "toy")
    assert [(m["version"], m["stage"], m["run_id"]) for m in listed] == [
        (2, "production", second["run_id"]),
        (1, "none", first["run_id"]),
    ]


@pytest.mark.slow
def test_show_promote_and_bad_input_from_the_cli(headwater: Cli) -> None:
    headwater.run_ok("models_register", params={"stage": "staging"})
    headwater.run_ok("models_register", params={"seed": 2, "stage": "staging"})
    shown = headwater("models", "show", "toy", "--json").json()
    assert (shown["version"], shown["stage"]) == (2, "staging")
    assert headwater("models", "show", "toy", "1", "--json").json()["version"] == 1
    text = headwater("models", "show", "toy").stdout
    assert "stage            staging" in text

    promoted = headwater("models", "promote", "toy", "1", "--stage", "production")
    assert promoted.returncode == 0, promoted.describe()
    assert "model 'toy' version 1 is now in production" in promoted.stderr
    done = headwater("models", "promote", "toy", "2", "--stage", "Production", "--json").json()
    assert done["model"]["stage"] == "production"
    assert [(m["version"], m["stage"]) for m in done["demoted"]] == [(1, "none")]
    table = headwater("models", "list").stdout.splitlines()
    assert table[0].split()[:3] == ["NAME", "VERSION", "STAGE"]
    assert [line.split()[:3] for line in table[1:]] == [
        ["toy", "2", "production"],
        ["toy", "1", "none"],
    ]

    bad = {
        ("models", "show", "nope"): "no model named 'nope' (registered models: toy)",
        ("models", "show", "toy", "9"): "model 'toy' has no version 9 (registered versions: 1, 2)",
        ("models", "list", "--name", "nope"): "no model named 'nope'",
        ("models", "promote", "toy", "9", "--stage", "none"): "model 'toy' has no version 9",
        ("models", "promote", "toy", "1", "--stage", "prod"): (
            "model stage 'prod' does not exist (stages: none, staging, production)"
        ),
    }
    for argv, message in bad.items():
        result = headwater(*argv)
        assert result.returncode == 2, result.describe()
        assert result.stderr.count("\n") == 1 and message in result.stderr, result.describe()


def test_a_run_on_another_store_registers_there(headwater: Cli) -> None:
    other = headwater.cwd / "other.db"
    url = f"sqlite:///{other}"
    result = run_ok(headwater("--metadata-url", url, "run", pipeline("models_register"), "--json"))
    [model] = json.loads(headwater("--metadata-url", url, "models", "list", "--json").stdout)
    assert model["run_id"] == result["run_id"]
    assert headwater("models", "list", "--json").json() == []  # not in the default store


def test_no_store_yet_lists_nothing_and_creates_nothing(headwater: Cli) -> None:
    assert models(headwater) == []
    assert not (headwater.home / "metadata.db").exists()
