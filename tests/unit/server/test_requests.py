"""KFP's request bodies read as `kfp.Client` sends them."""

import json
from pathlib import Path

import pytest
import yaml
from kfp import compiler, dsl, kubernetes
from kfp.client.client import _extract_pipeline_yaml

from headwater.errors import InvalidArgumentError
from headwater.server.kfp.requests import parse_ir, submission


@dsl.component(base_image="python:3.11")
def shout() -> None:
    print("hi")


@dsl.pipeline(name="with-a-secret")
def with_a_secret() -> None:
    task = shout()
    kubernetes.use_secret_as_env(task, secret_name="db", secret_key_to_env={"password": "PW"})


def test_a_package_with_a_platform_spec_keeps_its_kubernetes_settings(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    compiler.Compiler().compile(with_a_secret, str(path))
    # What kfp.Client sends: {"pipeline_spec": ..., "platform_spec": {"platforms": ...}}.
    sent = json.loads(json.dumps(_extract_pipeline_yaml(str(path)).to_dict()))
    assert set(sent) == {"pipeline_spec", "platform_spec"}
    ir = parse_ir(sent)
    [settings] = ir.kubernetes.values()
    [source] = settings.env_sources
    assert (source.kind, source.keys) == ("secret", (("password", "PW"),))
    # The same document uploaded as a file (its second YAML document) reads alike.
    docs = list(yaml.safe_load_all(path.read_text()))
    again = parse_ir({"pipeline_spec": docs[0], "platform_spec": docs[1]})
    assert again.raw == ir.raw


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"display_name": "x"}, "exactly one of pipeline_spec and pipeline_version_reference"),
        ({"display_name": "x", "pipeline_version_reference": {}}, "needs a pipeline_id"),
        (
            {"display_name": "x", "pipeline_version_reference": {"pipeline_id": "p"},
             "runtime_config": {"parameters": [1]}},
            "parameters must be an object",
        ),
        ({"pipeline_version_reference": {"pipeline_id": "p"}}, "display_name is required"),
    ],
    ids=["neither", "no-pipeline", "parameters", "no-name"],
)  # fmt: skip
def test_bad_submissions_name_the_field(body: dict, named: str) -> None:
    with pytest.raises(InvalidArgumentError, match=named):
        submission(body)
