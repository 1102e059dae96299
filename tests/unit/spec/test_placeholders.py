"""Tests for resolving KFP container placeholders against an ExecutorInput."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

from headwater.errors import PipelineSpecError, UnsupportedFeatureError
from headwater.spec.placeholders import (
    PlaceholderContext,
    artifact_path,
    resolve_args,
    resolve_string,
    resolve_value,
)

DATASET = {
    "name": "data",
    "type": {"schemaTitle": "system.Dataset", "schemaVersion": "0.0.1"},
    "uri": "gs://bucket/data",
    "metadata": {"rows": 10, "split": "train", "score": 1.0},
}
MODELS = [
    {"name": "m1", "type": {"schemaTitle": "system.Model"}, "uri": "s3://b/m1", "metadata": {}},
    {"name": "m2", "type": {"schemaTitle": "system.Model"}, "uri": "s3://b/m2", "metadata": {}},
]


def executor_input() -> dict[str, Any]:
    return {
        "inputs": {
            "parameterValues": {
                "text": "hello world",
                "count": 3,
                "ratio": 0.5,
                "whole": 3.0,
                "big": 1e20,
                "on": True,
                "off": False,
                "items": [1.0, "a", True],
                "conf": {"lr": 0.1, "n": 2.0},
                "empty": "",
                "nothing": None,
                "quoted": 'say "hi"\n',
            },
            "artifacts": {
                "data": {"artifacts": [DATASET]},
                "models": {"artifacts": MODELS},
                "none_yet": {"artifacts": []},
            },
        },
        "outputs": {
            "parameters": {"count_out": {"outputFile": "/tmp/out/count_out"}},
            "artifacts": {
                "model": {
                    "artifacts": [
                        {
                            "name": "model",
                            "type": {"schemaTitle": "system.Model", "schemaVersion": "0.0.1"},
                            "uri": "/root/run/train/model",
                            "metadata": {},
                        }
                    ]
                }
            },
            "outputFile": "/tmp/out/executor_output.json",
        },
    }


@pytest.fixture
def make_ctx() -> Callable[..., PlaceholderContext]:
    """Factory for a context over `executor_input()`; keyword arguments override fields."""

    def make(executor: dict[str, Any] | None = None, **fields: str) -> PlaceholderContext:
        values = {
            "job_name": "my-pipeline",
            "job_resource_name": "my-pipeline-abc12",
            "job_uuid": "job-uuid",
            "task_name": "train",
            "task_uuid": "task-uuid",
            "pipeline_root": "/root",
            "create_time_utc": "2024-01-02T03:04:05Z",
            "schedule_time_utc": "2024-01-02T03:00:00Z",
            "workspace_path": "/ws",
            **fields,
        }
        return PlaceholderContext(executor_input=executor or executor_input(), **values)

    return make


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("{{$}}", compact(executor_input()), id="executor-input"),
        pytest.param("{{$.inputs.parameters['text']}}", "hello world", id="param-str"),
        pytest.param('{{$.inputs.parameters["text"]}}', "hello world", id="param-double-quotes"),
        pytest.param("{{$.inputs.parameters['empty']}}", "", id="param-empty-str"),
        pytest.param("{{$.inputs.parameters['count']}}", "3", id="param-int"),
        pytest.param("{{$.inputs.parameters['ratio']}}", "0.5", id="param-float"),
        pytest.param("{{$.inputs.parameters['whole']}}", "3", id="param-integral-float"),
        pytest.param("{{$.inputs.parameters['big']}}", "1" + "0" * 20, id="param-no-exponent"),
        pytest.param("{{$.inputs.parameters['on']}}", "true", id="param-true"),
        pytest.param("{{$.inputs.parameters['off']}}", "false", id="param-false"),
        pytest.param("{{$.inputs.parameters['items']}}", '[1,"a",true]', id="param-list"),
        pytest.param("{{$.inputs.parameters['conf']}}", '{"lr":0.1,"n":2}', id="param-dict"),
        pytest.param("{{$.inputs.artifacts['data'].path}}", "/gcs/bucket/data", id="in-path"),
        pytest.param("{{$.inputs.artifacts['data'].uri}}", "gs://bucket/data", id="in-uri"),
        pytest.param(
            "{{$.inputs.artifacts['data'].metadata}}",
            '{"rows":10,"split":"train","score":1}',
            id="in-metadata",
        ),
        pytest.param("{{$.inputs.artifacts['data'].metadata['split']}}", "train", id="in-meta-key"),
        pytest.param("{{$.inputs.artifacts['data'].metadata['rows']}}", "10", id="in-meta-int"),
        pytest.param(
            "{{$.inputs.artifacts['models']}}", compact({"artifacts": MODELS}), id="in-list"
        ),
        pytest.param("{{$.inputs.artifacts['none_yet']}}", '{"artifacts":[]}', id="in-list-empty"),
        pytest.param(
            "{{$.outputs.parameters['count_out'].output_file}}",
            "/tmp/out/count_out",
            id="out-param-file",
        ),
        pytest.param(
            "{{$.outputs.artifacts['model'].path}}", "/root/run/train/model", id="out-path"
        ),
        pytest.param("{{$.outputs.artifacts['model'].uri}}", "/root/run/train/model", id="out-uri"),
        pytest.param("{{$.outputs.artifacts['model'].metadata}}", "{}", id="out-metadata"),
        pytest.param("{{$.outputs.output_file}}", "/tmp/out/executor_output.json", id="out-file"),
        pytest.param(
            "{{$.outputMetadataUri}}", "/tmp/out/executor_output.json", id="metadata-uri-fallback"
        ),
        pytest.param("{{$.pipeline_job_name}}", "my-pipeline", id="job-name"),
        pytest.param("{{$.pipeline_job_resource_name}}", "my-pipeline-abc12", id="job-resource"),
        pytest.param("{{$.pipeline_job_uuid}}", "job-uuid", id="job-uuid"),
        pytest.param("{{$.pipeline_task_name}}", "train", id="task-name"),
        pytest.param("{{$.pipeline_task_uuid}}", "task-uuid", id="task-uuid"),
        pytest.param("{{$.pipeline_root}}", "/root", id="pipeline-root"),
        pytest.param(
            "{{$.pipeline_job_create_time_utc}}", "2024-01-02T03:04:05Z", id="create-time"
        ),
        pytest.param(
            "{{$.pipeline_job_schedule_time_utc}}", "2024-01-02T03:00:00Z", id="schedule-time"
        ),
        pytest.param("{{$.workspace_path}}", "/ws", id="workspace"),
        pytest.param(
            "{{$.pipeline_root}}/{{$.pipeline_job_uuid}}-{{$.pipeline_task_uuid}}/x={{$.inputs"
            ".parameters['count']}}",
            "/root/job-uuid-task-uuid/x=3",
            id="several-in-one-string",
        ),
        pytest.param(
            "{{$.inputs.parameters['quoted'].json_escape[0]}}", 'say "hi"\n', id="escape-0"
        ),
        pytest.param(
            "{{$.inputs.parameters['quoted'].json_escape[1]}}", 'say \\"hi\\"\\n', id="escape-1"
        ),
        pytest.param(
            "{{$.inputs.parameters['quoted'].json_escape[2]}}",
            'say \\\\\\"hi\\\\\\"\\\\n',
            id="escape-2",
        ),
        pytest.param(
            "{{$.inputs.parameters['items'].json_escape[1]}}", '[1,\\"a\\",true]', id="escape-list"
        ),
        pytest.param(
            "{{$.json_escape[1]}}", json.dumps(compact(executor_input()))[1:-1], id="escape-input"
        ),
        pytest.param("no placeholders here", "no placeholders here", id="plain"),
        pytest.param("{{$x}} {{ .Name }}", "{{$x}} {{ .Name }}", id="not-kfp-syntax"),
    ],
)
def test_resolve_string(
    make_ctx: Callable[..., PlaceholderContext], text: str, expected: str
) -> None:
    assert resolve_string(text, make_ctx()) == expected


def test_escape_round_trips_through_json(make_ctx: Callable[..., PlaceholderContext]) -> None:
    ctx = make_ctx()
    payload = resolve_string('{"executor_input": "{{$.json_escape[1]}}"}', ctx)
    assert json.loads(json.loads(payload)["executor_input"]) == ctx.executor_input


def test_output_metadata_uri_prefers_context(make_ctx: Callable[..., PlaceholderContext]) -> None:
    ctx = make_ctx(output_metadata_uri="/meta/out.json")
    assert resolve_string("{{$.outputMetadataUri}}", ctx) == "/meta/out.json"


def test_substituted_text_is_not_resolved_again(
    make_ctx: Callable[..., PlaceholderContext],
) -> None:
    executor = executor_input()
    executor["inputs"]["parameterValues"]["text"] = "{{$.pipeline_job_name}}"
    assert resolve_string("{{$.inputs.parameters['text']}}", make_ctx(executor)) == (
        "{{$.pipeline_job_name}}"
    )


@pytest.mark.parametrize(
    ("workspace_path", "expected"),
    [
        pytest.param("/ws", "/ws/.artifacts/gcs/b/k", id="context-workspace"),
        pytest.param("", "/kfp-workspace/.artifacts/gcs/b/k", id="default-mount"),
    ],
)
def test_workspace_artifact_path(
    make_ctx: Callable[..., PlaceholderContext], workspace_path: str, expected: str
) -> None:
    executor = executor_input()
    artifact = {"name": "w", "uri": "gs://b/k", "metadata": {"_kfp_workspace": True}}
    executor["inputs"]["artifacts"]["w"] = {"artifacts": [artifact]}
    ctx = make_ctx(executor, workspace_path=workspace_path)
    assert resolve_string("{{$.inputs.artifacts['w'].path}}", ctx) == expected


def if_present(name: str, then: Any, else_: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"InputName": name, "Then": then}
    if else_ is not None:
        spec["Else"] = else_
    return {"IfPresent": spec}


TEXT = "{{$.inputs.parameters['text']}}"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(["echo", TEXT], ["echo", "hello world"], id="plain"),
        pytest.param(
            [if_present("text", ["--text", TEXT], ["--none"])],
            ["--text", "hello world"],
            id="if-present-then-list",
        ),
        pytest.param(
            [if_present("absent", ["--text", TEXT], ["--none", "x"])],
            ["--none", "x"],
            id="if-absent-else-list",
        ),
        pytest.param([if_present("nothing", "--yes", "--no")], ["--no"], id="none-value-is-absent"),
        pytest.param([if_present("empty", "--yes", "--no")], ["--yes"], id="empty-str-present"),
        pytest.param(["a", if_present("absent", ["--x"]), "b"], ["a", "b"], id="absent-no-else"),
        pytest.param([if_present("data", "--yes", "--no")], ["--yes"], id="artifact-present"),
        pytest.param([if_present("none_yet", "--yes", "--no")], ["--no"], id="empty-artifacts"),
        pytest.param([if_present("model", "--yes", "--no")], ["--yes"], id="output-name"),
        pytest.param([{"Concat": ["--text=", TEXT, "!"]}], ["--text=hello world!"], id="concat"),
        pytest.param(
            [{"Concat": ["-", if_present("count", "{{$.inputs.parameters['count']}}", "0")]}],
            ["-3"],
            id="concat-if-present",
        ),
        pytest.param(
            [{"Concat": ["-", if_present("absent", "x"), "-"]}], ["--"], id="concat-if-absent"
        ),
        pytest.param(
            [if_present("count", {"Concat": ["--n=", "{{$.inputs.parameters['count']}}"]})],
            ["--n=3"],
            id="if-present-concat",
        ),
        pytest.param(
            [
                {
                    "Concat": [
                        "[",
                        if_present(
                            "absent",
                            "never",
                            {"Concat": ["{{$.pipeline_task_name}}", if_present("on", ":on")]},
                        ),
                        "]",
                    ]
                }
            ],
            ["[train:on]"],
            id="deep-nesting",
        ),
        pytest.param(
            [if_present("text", [{"Concat": ["a", "b"]}, if_present("absent", "c", ["d"])])],
            ["ab", "d"],
            id="structures-in-then-list",
        ),
        pytest.param(['{"a": 1}'], ['{"a": 1}'], id="plain-json-arg"),
    ],
)
def test_resolve_args(
    make_ctx: Callable[..., PlaceholderContext], args: list[Any], expected: list[str]
) -> None:
    encoded = [arg if isinstance(arg, str) else json.dumps(arg) for arg in args]
    assert resolve_args(encoded, make_ctx()) == expected


@pytest.mark.parametrize(
    ("arg", "error", "fragments"),
    [
        pytest.param(
            "--x={{$.inputs.parameters['missing']}}",
            PipelineSpecError,
            ["{{$.inputs.parameters['missing']}}", "'missing'", "IfPresent", "text"],
            id="absent-param",
        ),
        pytest.param(
            "{{$.inputs.parameters['nothing']}}",
            PipelineSpecError,
            ["{{$.inputs.parameters['nothing']}}", "'nothing'"],
            id="none-param",
        ),
        pytest.param(
            "{{$.inputs.artifacts['missing'].path}}",
            PipelineSpecError,
            ["{{$.inputs.artifacts['missing'].path}}", "'missing'"],
            id="absent-artifact",
        ),
        pytest.param(
            "{{$.inputs.artifacts['none_yet'].uri}}",
            PipelineSpecError,
            ["'none_yet'"],
            id="empty-artifact-list",
        ),
        pytest.param(
            "{{$.inputs.artifacts['data'].metadata['nope']}}",
            PipelineSpecError,
            ["'nope'", "rows"],
            id="absent-metadata-key",
        ),
        pytest.param(
            "{{$.outputs.parameters['nope'].output_file}}",
            PipelineSpecError,
            ["'nope'"],
            id="absent-output-param",
        ),
        pytest.param(
            "{{$.inputs.parameter['text']}}",
            PipelineSpecError,
            ["unknown placeholder {{$.inputs.parameter['text']}}", "{{$.pipeline_job_name}}"],
            id="unknown-path",
        ),
        pytest.param(
            "{{$.inputs.parameters['text'].path}}",
            PipelineSpecError,
            ["unknown placeholder"],
            id="param-attribute",
        ),
        pytest.param(
            "{{$.outputs.artifacts['model'].output_file}}",
            PipelineSpecError,
            ["unknown placeholder"],
            id="artifact-output-file",
        ),
        pytest.param(
            "{{$.inputs.artifacts['data'].uri['k']}}",
            PipelineSpecError,
            ["unknown placeholder"],
            id="key-on-uri",
        ),
        pytest.param(
            "{{$.pipeline_google_cloud_project_id}}",
            UnsupportedFeatureError,
            ["Vertex"],
            id="vertex-only",
        ),
        pytest.param('{"Concat": ["a", ', PipelineSpecError, ["malformed"], id="malformed-json"),
        pytest.param(
            json.dumps({"IfPresent": {"Then": "x"}}),
            PipelineSpecError,
            ["unsupported structured placeholder"],
            id="if-present-without-name",
        ),
        pytest.param(
            json.dumps({"Concat": ["a", if_present("text", ["b", "c"])]}),
            PipelineSpecError,
            ["several arguments"],
            id="concat-of-several",
        ),
        pytest.param(
            json.dumps(if_present("text", [["nested"]])),
            PipelineSpecError,
            ["unsupported structured placeholder"],
            id="nested-list",
        ),
    ],
)
def test_resolve_args_errors(
    make_ctx: Callable[..., PlaceholderContext],
    arg: str,
    error: type[Exception],
    fragments: list[str],
) -> None:
    with pytest.raises(error) as info:
        resolve_args([arg], make_ctx())
    for fragment in fragments:
        assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        pytest.param("gs://bucket/a/b", "/gcs/bucket/a/b", id="gcs"),
        pytest.param("s3://bucket/a", "/s3/bucket/a", id="s3"),
        pytest.param("minio://bucket/a", "/minio/bucket/a", id="minio"),
        pytest.param("oci://registry/model:1", "/oci/registry_model:1", id="oci"),
        pytest.param("file:///tmp/a b", "/tmp/a b", id="file-uri"),
        pytest.param("/tmp/run/a", "/tmp/run/a", id="local-path"),
        pytest.param("https://host/a", "https://host/a", id="other-scheme"),
    ],
)
def test_artifact_path(uri: str, expected: str) -> None:
    assert artifact_path(uri) == expected


def test_resolve_value_recurses(make_ctx: Callable[..., PlaceholderContext]) -> None:
    value = {"id": ["{{$.pipeline_job_uuid}}", 1, None, {"{{$.pipeline_task_name}}": True}]}
    assert resolve_value(value, make_ctx()) == {"id": ["job-uuid", 1, None, {"train": True}]}


def test_compiled_container_component(
    make_ctx: Callable[..., PlaceholderContext], tmp_path: Path
) -> None:
    from kfp import compiler, dsl
    from kfp.dsl import Dataset, Output, OutputPath

    @dsl.container_component
    def greet(
        name: str,
        out_ds: Output[Dataset],
        count: OutputPath(int),  # type: ignore[valid-type]
        flag: Optional[str] = None,  # noqa: UP045 - kfp 2.17 rejects `str | None`
    ) -> dsl.ContainerSpec:
        return dsl.ContainerSpec(
            image="alpine",
            command=["sh", "-c", 'echo "$@"', "--"],
            args=[
                "--name",
                name,
                dsl.IfPresentPlaceholder(input_name="flag", then=["--flag", flag], else_=["-q"]),
                dsl.ConcatPlaceholder(
                    ["--tag=", name, "-", dsl.IfPresentPlaceholder("flag", then=flag, else_="x")]
                ),
                "--out",
                out_ds.path,
                "--count",
                count,
            ],
        )

    @dsl.pipeline(name="greeting")
    def greeting(name: str = "ada") -> None:
        greet(name=name)

    package = tmp_path / "pipeline.yaml"
    compiler.Compiler().compile(greeting, str(package))
    container = yaml.safe_load(package.read_text())["deploymentSpec"]["executors"]["exec-greet"][
        "container"
    ]

    def ctx_with(parameters: dict[str, Any]) -> PlaceholderContext:
        artifact = {"name": "out_ds", "type": {"schemaTitle": "system.Dataset"}, "uri": "gs://b/o"}
        return make_ctx(
            {
                "inputs": {"parameterValues": parameters},
                "outputs": {
                    "parameters": {"count": {"outputFile": "/tmp/count"}},
                    "artifacts": {"out_ds": {"artifacts": [{**artifact, "metadata": {}}]}},
                    "outputFile": "/tmp/executor_output.json",
                },
            }
        )

    with_flag = ctx_with({"name": "ada", "flag": "yes"})
    assert resolve_args(container["command"], with_flag) == ["sh", "-c", 'echo "$@"', "--"]
    assert resolve_args(container["args"], with_flag) == [
        *("--name", "ada", "--flag", "yes", "--tag=ada-yes"),
        *("--out", "/gcs/b/o", "--count", "/tmp/count"),
    ]
    assert resolve_args(container["args"], ctx_with({"name": "ada"})) == [
        *("--name", "ada", "-q", "--tag=ada-x"),
        *("--out", "/gcs/b/o", "--count", "/tmp/count"),
    ]
