"""Bad pipelines and bad input through the real CLI: one line on stderr, exit 2, nothing recorded.

Each test breaks one thing the way a user would (a hand-edited IR, a script that exits, an
argument out of range) and checks that `headwater run` refuses it before a run exists: no
traceback, no run in `runs list`, no run directory.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_harness import Cli, CliResult, pipeline, run_ok
from s3_server import S3Server

pytestmark = pytest.mark.integration


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.txt"
    path.write_text("hi\n")
    return path


@pytest.fixture
def compiled(headwater: Cli, tmp_path: Path) -> dict[str, Any]:
    """pipelines/bad_inputs.py compiled by `headwater compile`, as a document to break."""
    out = tmp_path / "bad_inputs.yaml"
    result = headwater("compile", pipeline("bad_inputs"), "-o", str(out))
    assert result.returncode == 0, result.describe()
    doc: dict[str, Any] = yaml.safe_load(out.read_text())
    return doc


def write_ir(tmp_path: Path, doc: Any, name: str = "broken.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def refused(headwater: Cli, result: CliResult, *words: str) -> str:
    """Assert a one-line refusal (exit 2) that names `words`, and that nothing was recorded."""
    assert result.returncode == 2, result.describe()
    assert "Traceback" not in result.stderr, result.describe()
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.describe()
    line = lines[0]
    assert line.startswith("headwater: error: "), result.describe()
    for word in words:
        assert word in line, result.describe()
    runs_dir = headwater.home / "runs"
    assert not runs_dir.exists() or not any(runs_dir.iterdir()), list(runs_dir.iterdir())
    assert headwater.runs() == []
    return line


def test_the_unbroken_pipeline_runs(headwater: Cli, data_file: Path) -> None:
    result = run_ok(headwater.run("bad_inputs", params={"data": data_file, "n": 2}))
    assert result["outputs"] == {"Output": "HIHI"}


# -- item: a cyclic or dangling IR ------------------------------------------------------------


def _tasks(doc: dict[str, Any]) -> dict[str, Any]:
    tasks: dict[str, Any] = doc["root"]["dag"]["tasks"]
    return tasks


def test_cycle_through_dependent_tasks(
    headwater: Cli, compiled: dict[str, Any], tmp_path: Path, data_file: Path
) -> None:
    _tasks(compiled)["read-text"]["dependentTasks"] = ["shout-2"]
    result = headwater("run", write_ir(tmp_path, compiled), "--param", f"data={data_file}")
    refused(headwater, result, "cycle: read-text -> shout -> shout-2 -> read-text")


def test_cycle_through_data(
    headwater: Cli, compiled: dict[str, Any], tmp_path: Path, data_file: Path
) -> None:
    _tasks(compiled)["read-text"]["inputs"]["parameters"]["n"] = {
        "taskOutputParameter": {"producerTask": "shout", "outputParameterKey": "Output"}
    }
    result = headwater("run", write_ir(tmp_path, compiled), "--param", f"data={data_file}")
    refused(headwater, result, "cycle: read-text -> shout -> read-text")


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("producerTask", "shuot", ["task 'shout-2' waits for task 'shuot'"]),
        ("outputParameterKey", "Outptu", ["output parameter 'Outptu' of task 'shout'"]),
    ],
    ids=["producer-task", "output-key"],
)
def test_dangling_reference(
    headwater: Cli,
    compiled: dict[str, Any],
    tmp_path: Path,
    data_file: Path,
    key: str,
    value: str,
    words: list[str],
) -> None:
    _tasks(compiled)["shout-2"]["inputs"]["parameters"]["text"]["taskOutputParameter"][key] = value
    result = headwater("run", write_ir(tmp_path, compiled), "--param", f"data={data_file}")
    refused(headwater, result, *words)


# -- item: malformed IR shapes ----------------------------------------------------------------


def test_dag_tasks_given_as_a_list(
    headwater: Cli, compiled: dict[str, Any], tmp_path: Path, data_file: Path
) -> None:
    compiled["root"]["dag"]["tasks"] = list(_tasks(compiled).values())
    result = headwater("run", write_ir(tmp_path, compiled), "--param", f"data={data_file}")
    refused(headwater, result, "malformed PipelineSpec at root.dag.tasks: expected a mapping")


def test_yaml_key_that_is_not_a_string(
    headwater: Cli, compiled: dict[str, Any], tmp_path: Path, data_file: Path
) -> None:
    # It parsed, then crashed the run's recorder ("'<' not supported between int and str").
    compiled["pipelineInfo"][5] = "five"
    result = headwater("run", write_ir(tmp_path, compiled), "--param", f"data={data_file}")
    refused(headwater, result, "is not valid YAML: mapping key 5 is not a string (quote it)")


def test_yaml_nested_100000_deep(headwater: Cli, tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("[" * 100_000 + "]" * 100_000)
    refused(headwater, headwater("run", str(path)), "nests YAML too deeply")


# -- item: a pipeline file that exits or fails while loading ----------------------------------


@pytest.mark.parametrize("code", [0, 3])
@pytest.mark.parametrize("command", ["run", "compile"])
def test_file_that_calls_sys_exit_while_loading(
    headwater: Cli, tmp_path: Path, command: str, code: int
) -> None:
    path = tmp_path / "exits.py"
    path.write_text(f"import sys\n\nfrom kfp import dsl\n\nsys.exit({code})\n")
    out = tmp_path / "out.yaml"
    args = ["-o", str(out)] if command == "compile" else []
    result = headwater(command, str(path), *args)
    refused(headwater, result, f"called sys.exit({code}) while loading at line 5")
    assert not out.exists()


def test_file_that_raises_while_loading_names_the_line(headwater: Cli, tmp_path: Path) -> None:
    path = tmp_path / "raises.py"
    path.write_text("import os\n\nHOME = os.environ['NO_SUCH_VARIABLE_HERE']\n")
    result = headwater("run", str(path))
    refused(headwater, result, "failed at line 3: KeyError: 'NO_SUCH_VARIABLE_HERE'")


# -- item: parameters and input artifacts -----------------------------------------------------


@pytest.mark.parametrize("value", ["9223372036854775808", "123456789012345678901234567890"])
def test_integer_beyond_64_bits(headwater: Cli, data_file: Path, value: str) -> None:
    result = headwater.run("bad_inputs", params={"data": data_file, "n": value})
    refused(headwater, result, "parameter 'n' expects int", "KFP integers are 64-bit")


def test_largest_64_bit_integer_is_accepted(headwater: Cli, data_file: Path) -> None:
    # It passes the check; the task then fails (a string that long), which is not ours.
    result = headwater.run("bad_inputs", params={"data": data_file, "n": 2**63 - 1})
    assert result.returncode in (0, 1), result.describe()
    assert result.result is not None, result.describe()


@pytest.mark.parametrize("prefix", ["", "file://"], ids=["path", "file-uri"])
def test_input_artifact_that_does_not_exist(headwater: Cli, tmp_path: Path, prefix: str) -> None:
    missing = f"{prefix}{tmp_path / 'no-such-data.txt'}"
    result = headwater.run("bad_inputs", params={"data": missing})
    refused(headwater, result, f"input artifact 'data': {missing!r} does not exist")


@pytest.fixture
def s3_cli(headwater: Cli, s3_env: S3Server) -> Cli:
    """The CLI with the AWS environment `s3_env` set (and nothing else of AWS's)."""
    pytest.importorskip("s3fs")
    for name in [n for n in headwater.env if n.startswith("AWS_")]:
        del headwater.env[name]
    headwater.env.update({k: v for k, v in os.environ.items() if k.startswith("AWS_")})
    return headwater


def test_remote_input_artifact_that_does_not_exist(
    s3_cli: Cli,
    s3_env: S3Server,
    s3_bucket: str,
) -> None:
    with contextlib.closing(s3_env.client()) as client:
        client.put_object(Bucket=s3_bucket, Key="inputs/data.txt", Body=b"s3\n")
    present = run_ok(s3_cli.run("bad_inputs", params={"data": f"s3://{s3_bucket}/inputs/data.txt"}))
    assert present["outputs"] == {"Output": "S3"}
    missing = f"s3://{s3_bucket}/inputs/nothing.txt"
    result = s3_cli.run("bad_inputs", params={"data": missing})
    assert result.returncode == 2, result.describe()
    assert result.stderr.strip().splitlines() == [
        f"headwater: error: input artifact 'data': nothing is at {missing!r}; pass the URI of "
        "an existing object or prefix"
    ]
    assert len(s3_cli.runs()) == 1  # only the run that had its input


def test_relative_input_artifact_is_taken_from_the_working_directory(
    headwater: Cli,
) -> None:
    (headwater.cwd / "here.txt").write_text("rel\n")
    result = run_ok(headwater.run("bad_inputs", params={"data": "here.txt"}))
    assert result["outputs"] == {"Output": "REL"}


# -- item: schemaVersion ----------------------------------------------------------------------


def test_newer_major_schema_version_is_refused(
    headwater: Cli, compiled: dict[str, Any], tmp_path: Path, data_file: Path
) -> None:
    compiled["schemaVersion"] = "3.0.0"
    result = headwater("run", write_ir(tmp_path, compiled), "--param", f"data={data_file}")
    refused(headwater, result, "schemaVersion 3.0.0 is newer than Headwater supports")


def test_newer_minor_schema_version_runs_with_a_warning(
    headwater: Cli, compiled: dict[str, Any], tmp_path: Path, data_file: Path
) -> None:
    compiled["schemaVersion"] = "2.9.0"
    path = write_ir(tmp_path, compiled)
    result = run_ok(headwater("run", path, "--json", "--param", f"data={data_file}"))
    assert result["outputs"] == {"Output": "HI"}
    stderr = headwater("run", path, "--param", f"data={data_file}").stderr
    # One line in the CLI's own form, not Python's "file:line: Category: ..." plus source line.
    mentions = [line for line in stderr.splitlines() if "schemaVersion" in line]
    assert mentions == [
        "headwater: warning: IR schemaVersion 2.9.0 is newer than Headwater knows (2.1); "
        "running it anyway, but fields added since are ignored"
    ], stderr
    assert "warnings.warn(" not in stderr and "SpecVersionWarning" not in stderr, stderr


def test_warnings_not_of_headwater_keep_pythons_form(headwater: Cli, tmp_path: Path) -> None:
    path = tmp_path / "warns.py"
    path.write_text(
        "import warnings\n"
        "from kfp import dsl\n"
        "warnings.warn('not ours', UserWarning)\n"
        "@dsl.component(base_image='python:3.11')\n"
        "def noop():\n"
        "    pass\n"
        "@dsl.pipeline\n"
        "def warns():\n"
        "    noop()\n"
    )
    result = headwater("compile", str(path), "-o", str(tmp_path / "warns.yaml"))
    assert result.returncode == 0, result.describe()
    assert f"{path}:3: UserWarning: not ours" in result.stderr, result.describe()


# -- item: bad placeholders -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arg", "words"),
    [
        ("{{$.inputs.parameter['text']}}", ["unknown placeholder {{$.inputs.parameter['text']}}"]),
        ("{{$.inputs.parameters['txet']}}", ["names input parameter 'txet'"]),
        ('{"Concat": ["--x=", ', ["malformed structured placeholder"]),
        ('{"IfPresent": {"InputName": "txet", "Then": "x"}}', ["IfPresent", "'txet'"]),
    ],
    ids=["unknown-form", "unknown-input", "bad-concat-json", "if-present-unknown-input"],
)
def test_bad_placeholder_is_refused_before_the_run(
    headwater: Cli,
    compiled: dict[str, Any],
    tmp_path: Path,
    data_file: Path,
    arg: str,
    words: list[str],
) -> None:
    compiled["deploymentSpec"]["executors"]["exec-shout"]["container"]["args"].append(arg)
    result = headwater("run", write_ir(tmp_path, compiled), "--param", f"data={data_file}")
    refused(headwater, result, "deploymentSpec.executors.exec-shout.container.args", *words)
