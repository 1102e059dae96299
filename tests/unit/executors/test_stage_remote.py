"""Remote artifacts are staged to local paths; the component never sees an s3:// path."""

from __future__ import annotations

from pathlib import Path

from headwater.executors.local import python_program
from headwater.executors.staging import stage_remote
from headwater.spec.placeholders import PlaceholderContext
from headwater.task import Launch, ResourceRequest


def launch_with(tmp_path: Path, in_uri: str, out_uri: str) -> Launch:
    artifact = {"name": "d", "type": {"schemaTitle": "system.Dataset"}, "metadata": {}}
    executor_input = {
        "inputs": {
            "parameterValues": {},
            "artifacts": {"src": {"artifacts": [{**artifact, "uri": in_uri}]}},
        },
        "outputs": {
            "parameters": {},
            "artifacts": {"dst": {"artifacts": [{**artifact, "uri": out_uri}]}},
            "outputFile": str(tmp_path / "executor_output.json"),
        },
    }
    return Launch(
        1,
        "t",
        "comp-t",
        "exec-t",
        {},
        executor_input,
        PlaceholderContext(executor_input=executor_input),
        tmp_path / "work",
        tmp_path / "work" / "log.txt",
        {},
        ResourceRequest(),
        {},
    )


def test_local_artifacts_are_left_alone(tmp_path: Path) -> None:
    launch = launch_with(tmp_path, str(tmp_path / "in"), str(tmp_path / "out"))
    staged, downloads, uploads = stage_remote(launch)
    assert staged is launch.executor_input
    assert downloads == [] and uploads == []


def test_remote_artifacts_are_staged_under_the_task_dir(tmp_path: Path) -> None:
    launch = launch_with(tmp_path, "s3://b/root/p/r1/make/data", "s3://b/root/p/r2/use/dst")
    staged, downloads, uploads = stage_remote(launch)
    local_in = staged["inputs"]["artifacts"]["src"]["artifacts"][0]["uri"]
    local_out = staged["outputs"]["artifacts"]["dst"]["artifacts"][0]["uri"]
    assert local_in.startswith(str(tmp_path / "work")) and local_out.startswith(
        str(tmp_path / "work")
    )
    assert downloads == [("s3://b/root/p/r1/make/data", local_in)]
    assert uploads == [(local_out, "s3://b/root/p/r2/use/dst")]
    # The engine keeps the remote URIs; only the component's copy changed.
    assert launch.executor_input["inputs"]["artifacts"]["src"]["artifacts"][0]["uri"].startswith(
        "s3://"
    )


def test_python_program_finds_the_component_source() -> None:
    container = {
        "command": [
            "sh",
            "-c",
            "pip install ...",
            "sh",
            "-ec",
            "python3 -m kfp.dsl.executor_main --component_module_path"
            ' "$program_path/ephemeral_component.py"',
            "def f(): pass\n",
        ],
        "args": ["--executor_input", "{{$}}", "--function_to_execute", "f"],
    }
    assert python_program(container) == ("def f(): pass\n", container["args"])
    assert python_program({"command": ["echo", "hi"], "args": []}) is None
