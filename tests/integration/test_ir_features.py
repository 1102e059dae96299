"""Run real KFP pipelines through the `headwater` CLI and check outputs and task states.

One test per IR feature; the pipelines live in `pipelines/`, one small file per feature. Every
run is a real subprocess (`python -m headwater ...`) with HEADWATER_HOME in the test's tmp_path.
Every test runs twice: on the local executor, and on a real Dask cluster on loopback (a
scheduler and two workers, see dask_cluster.py) with `--executor dask --scheduler ADDRESS`
appended to each `run`, so both executors must give the same results.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_harness import PIPELINES, Cli, cached_flags, run_failed, run_ok, task_states

pytestmark = pytest.mark.integration

SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
SKIPPED = "SKIPPED"
CANCELED = "CANCELED"

# Compiles a pipeline function from a .py file in a separate interpreter, so the KFP SDK's
# FutureWarning/DeprecationWarning never reach this process (filterwarnings = error).
_COMPILE_SCRIPT = """
import importlib.util, sys
from kfp import compiler
path, name, out = sys.argv[1:4]
spec = importlib.util.spec_from_file_location("pipeline_module", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
compiler.Compiler().compile(getattr(module, name), out)
"""


@pytest.fixture(params=["local", "dask"])
def executor_args(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """What each `run` gets to choose the executor (the Dask cluster is started on first use)."""
    if request.param == "local":
        return ()
    cluster = request.getfixturevalue("dask_cluster")
    return ("--executor", "dask", "--scheduler", cluster.address)


@pytest.fixture
def headwater(headwater: Cli, executor_args: tuple[str, ...]) -> Cli:
    """The shared `headwater` fixture on each executor, with 100 s per command instead of 60."""
    return headwater._replace(timeout=100, extra_run_args=executor_args)


def compile_pipeline(py_file: str, function: str, out: Path) -> Path:
    """Compile `function` from pipelines/`py_file` to `out` (.yaml or .json) with the KFP SDK."""
    script = [sys.executable, "-W", "ignore", "-c", _COMPILE_SCRIPT]
    subprocess.run(
        [*script, str(PIPELINES / py_file), function, str(out)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out


def local_path(uri: str) -> Path:
    """The local file behind an artifact URI (a plain path or a file:// URI)."""
    return Path(uri.removeprefix("file://"))


def assert_artifact(
    artifact: dict[str, Any],
    schema_title: str,
    metadata: dict[str, Any] | None = None,
    content: str | None = None,
) -> None:
    assert artifact["type"] == schema_title
    assert isinstance(artifact["name"], str)
    if metadata is not None:
        # Runners may add bookkeeping keys; everything the component wrote must be there.
        missing = {k: v for k, v in metadata.items() if artifact["metadata"].get(k) != v}
        assert not missing, f"metadata {artifact['metadata']} lacks {missing}"
    if content is not None:
        assert local_path(artifact["uri"]).read_text() == content


# --- 1. parameter types, NamedTuple outputs, pipeline outputs --------------------------------

_SUMMARY_COMMON = {
    "count_type": "int",
    "ratio_type": "float",
    "flag_type": "bool",
    "item_type": "int",
    "mapping_count_type": "int",
    "mapping_nested_type": "int",
    "input_item_type": "int",
    "input_mapping_type": "int",
}
DEFAULT_SUMMARY = {
    **_SUMMARY_COMMON,
    "text": "HELLO",
    "count": 6,
    "ratio": 2.5,
    "flag": False,
    "items": [3, 4],
    "mapping": {"count": 3, "text": "hello", "nested": [3]},
}
CLI_PARAMS_SUMMARY = {
    **_SUMMARY_COMMON,
    "text": "A B",
    "count": 10,
    "ratio": 1.5,
    "flag": True,
    "items": [5, 6],
    "mapping": {"count": 5, "text": "a b", "nested": [5]},
}
PARAMS_CHAIN_TASKS = {"make-values": SUCCEEDED, "describe": SUCCEEDED, "write-report": SUCCEEDED}


def assert_params_chain_outputs(outputs: dict[str, Any], summary: dict[str, Any]) -> None:
    assert outputs["summary"] == summary
    assert outputs["key_count"] == len(summary) == 14
    assert type(outputs["key_count"]) is int
    assert_artifact(outputs["report"], "system.Dataset", metadata={"keys": 14})
    assert json.loads(local_path(outputs["report"]["uri"]).read_text()) == summary


@pytest.mark.parametrize(
    ("params", "summary"),
    [
        pytest.param([], DEFAULT_SUMMARY, id="defaults"),
        pytest.param(
            [
                "--param",
                "text=a b",
                "--param",
                "count=5",
                "--param",
                "ratio=0.75",
                "--param",
                "flag=false",
                "--param",
                "input_items=[10, 20]",
                "--param",
                'input_mapping={"k": 1}',
            ],
            CLI_PARAMS_SUMMARY,
            id="cli-params",
        ),
    ],
)
def test_params_chain(headwater: Cli, params: list[str], summary: dict[str, Any]) -> None:
    result = run_ok(headwater("run", str(PIPELINES / "params_chain.py"), "--json", *params))

    assert task_states(result) == PARAMS_CHAIN_TASKS
    assert not any(cached_flags(result).values())
    assert_params_chain_outputs(result["outputs"], summary)


# --- 2. artifact types -----------------------------------------------------------------------

CONFUSION_MATRIX = {
    "annotationSpecs": [{"displayName": "cat"}, {"displayName": "dog"}],
    "rows": [{"row": [8, 2]}, {"row": [1, 9]}],
}
CONFIDENCE_METRICS = [
    {"confidenceThreshold": 1.0, "recall": 0.0, "falsePositiveRate": 0.0},
    {"confidenceThreshold": 0.5, "recall": 0.75, "falsePositiveRate": 0.5},
    {"confidenceThreshold": 0.0, "recall": 1.0, "falsePositiveRate": 1.0},
]
EVALUATION_SLICES = [
    {
        "slice": "overall",
        "sliceClassificationMetrics": {
            "confusionMatrix": {
                "annotationSpecs": [{"displayName": "cat"}, {"displayName": "dog"}],
                "rows": [{"row": [8, 2]}, {"row": [0, 9]}],
            }
        },
    }
]


def test_artifact_types(headwater: Cli) -> None:
    result = run_ok(headwater("run", str(PIPELINES / "artifacts.py"), "--json"))

    assert task_states(result) == {
        "produce": SUCCEEDED,
        "consume": SUCCEEDED,
        "log-metrics": SUCCEEDED,
        "render": SUCCEEDED,
        "make-part[0]": SUCCEEDED,
        "make-part[1]": SUCCEEDED,
        "make-part[2]": SUCCEEDED,
        "join-parts": SUCCEEDED,
    }
    outputs = result["outputs"]
    # The consumer saw the files and the producer's metadata, ints still ints.
    assert outputs["consumed"] == "blob-bytes|3|2|int|weights|sklearn|0.75|['x', 'y']"
    assert outputs["joined"] == "1:10,2:20,3:30"
    assert_artifact(
        outputs["model"],
        "system.Model",
        metadata={"framework": "sklearn", "accuracy": 0.75, "tags": ["x", "y"]},
        content="weights",
    )
    assert_artifact(outputs["metrics"], "system.Metrics", metadata={"accuracy": 0.75, "loss": 0.25})
    assert_artifact(
        outputs["classification"],
        "system.ClassificationMetrics",
        metadata={"confusionMatrix": CONFUSION_MATRIX, "confidenceMetrics": CONFIDENCE_METRICS},
    )
    assert_artifact(
        outputs["sliced"],
        "system.SlicedClassificationMetrics",
        metadata={"evaluationSlices": EVALUATION_SLICES},
    )
    assert_artifact(outputs["page"], "system.HTML", content="<h1>report</h1>")
    assert_artifact(outputs["notes"], "system.Markdown", content="# notes\n")


# --- 3. container components -----------------------------------------------------------------


def test_container_components(headwater: Cli) -> None:
    result = run_ok(headwater("run", str(PIPELINES / "container_components.py"), "--json"))

    assert task_states(result) == {
        "greet": SUCCEEDED,
        "greet-2": SUCCEEDED,
        "write-dataset": SUCCEEDED,
        "copy-dataset": SUCCEEDED,
        "read-dataset": SUCCEEDED,
        "record-placeholders": SUCCEEDED,
        "echo-value": SUCCEEDED,
        "echo-value-2": SUCCEEDED,
        "echo-value-3": SUCCEEDED,
    }
    outputs = result["outputs"]
    # IfPresent took Then (with a nested Concat) when the input was given, Else when omitted.
    assert outputs["with_suffix"] == "hello-world with <sfx>"
    assert outputs["without_suffix"] == "hello-there without-suffix"
    # OutputPath(int) files come back as ints.
    assert outputs["with_suffix_length"] == 22
    assert outputs["without_suffix_length"] == 26
    assert type(outputs["with_suffix_length"]) is int
    # Output[Dataset] written by a shell command, copied by python3, read by a Python component.
    assert outputs["dataset_text"] == "payload!"

    job_name, job_id, task_name, task_id, job_resource_name = outputs["placeholders"].splitlines()
    assert task_name == "record-placeholders"
    assert job_id == result["run_id"]
    for value in (job_name, job_id, task_id, job_resource_name):
        assert value
        assert "{{" not in value
    # The same placeholders as constant arguments of a Python component resolve identically.
    assert outputs["job_name_constant"] == job_name
    assert outputs["job_id_constant"] == job_id
    assert outputs["task_name_constant"] == "echo-value-3"


# --- 4. importer -----------------------------------------------------------------------------


def test_importer(headwater: Cli, tmp_path: Path) -> None:
    source = tmp_path / "input.txt"
    source.write_text("imported-content")

    result = run_ok(
        headwater(
            "run",
            str(PIPELINES / "importer.py"),
            "--json",
            "--param",
            f"uri={source}",
            "--param",
            "label=custom-label",
        )
    )

    assert task_states(result) == {"importer": SUCCEEDED, "read-imported": SUCCEEDED}
    # Content read through the artifact path, constant and parameter-fed importer metadata,
    # and the URI kept as given (KFP's importer never copies).
    assert result["outputs"] == {"Output": f"imported-content|test-suite|custom-label|{source}"}


# --- 5. conditions ---------------------------------------------------------------------------

# Task names: say = branch-a, say-2 = branch-b, say-3 = else, say-4 = level > 3,
# say-5 = nested level >= 10, say-6 = level <= 3, say-7 = legacy dsl.Condition(mode == "b"),
# say-8 = len(mode) == 1 (condition on a task output), say-9 = consumer of the OneOf.


def _condition_states(mode_branch: int, level_tasks: dict[str, str], legacy: str, single: str):
    branch_tasks = [("say", "make-note"), ("say-2", "make-note-2"), ("say-3", "make-note-3")]
    states = {"count-chars": SUCCEEDED, "say-9": SUCCEEDED, "say-7": legacy, "say-8": single}
    for index, names in enumerate(branch_tasks):
        for name in names:
            states[name] = SUCCEEDED if index == mode_branch else SKIPPED
    states.update(level_tasks)
    return states


@pytest.mark.parametrize(
    ("mode", "level", "expected_branch", "expected_states"),
    [
        pytest.param(
            "a",
            5,
            "a",
            _condition_states(
                0, {"say-4": SUCCEEDED, "say-5": SKIPPED, "say-6": SKIPPED}, SKIPPED, SUCCEEDED
            ),
            id="if-taken-level-5",
        ),
        pytest.param(
            "b",
            12,
            "b",
            _condition_states(
                1, {"say-4": SUCCEEDED, "say-5": SUCCEEDED, "say-6": SKIPPED}, SUCCEEDED, SUCCEEDED
            ),
            id="elif-taken-nested-level-12",
        ),
        pytest.param(
            "zz",
            3,
            "other",
            _condition_states(
                2, {"say-4": SKIPPED, "say-5": SKIPPED, "say-6": SUCCEEDED}, SKIPPED, SKIPPED
            ),
            id="else-taken-level-3",
        ),
    ],
)
def test_conditions(
    headwater: Cli,
    mode: str,
    level: int,
    expected_branch: str,
    expected_states: dict[str, str],
) -> None:
    result = run_ok(
        headwater(
            "run",
            str(PIPELINES / "conditions.py"),
            "--json",
            "--param",
            f"mode={mode}",
            "--param",
            f"level={level}",
        )
    )

    assert task_states(result) == expected_states
    outputs = result["outputs"]
    assert outputs["mode_branch"] == f"branch-{expected_branch}"
    assert_artifact(
        outputs["note"],
        "system.Artifact",
        metadata={"text": f"note-{expected_branch}"},
        content=f"note-{expected_branch}",
    )


# --- 6. loops --------------------------------------------------------------------------------


def test_loops(headwater: Cli, tmp_path: Path) -> None:
    scratch = tmp_path / "probe"
    result = run_ok(
        headwater(
            "run",
            str(PIPELINES / "loops.py"),
            "--json",
            "--max-parallel",
            "4",
            "--param",
            f"scratch={scratch}",
        )
    )

    expected = {f"square[{i}]": SUCCEEDED for i in range(3)}
    expected |= {f"add[{i}]": SUCCEEDED for i in range(2)}
    expected |= {f"square-2[{i}]": SUCCEEDED for i in range(3)}
    expected |= {f"pair[{i}]": SUCCEEDED for i in range(2)}
    expected |= {f"probe[{i}]": SUCCEEDED for i in range(4)}
    expected |= {"make-list": SUCCEEDED, "total": SUCCEEDED, "total-2": SUCCEEDED}
    expected |= {"peak": SUCCEEDED}
    assert task_states(result) == expected

    outputs = result["outputs"]
    assert outputs["squares_total"] == 1 + 4 + 9
    # Collected keeps iteration order; the loop item of a pipeline-input list stays an int.
    assert outputs["from_input"] == [15, 17]
    assert outputs["upstream_total"] == 0 + 100 + 400
    assert outputs["pairs"] == ["1+10=11:int", "2+20=22:int"]
    # parallelism=2 holds even though --max-parallel would allow 4.
    assert 1 <= outputs["peak_running"] <= 2


def test_loops_nested(headwater: Cli) -> None:
    result = run_ok(
        headwater("run", str(PIPELINES / "loops_nested.py"), "--pipeline", "main", "--json")
    )

    expected = {f"add[{i}][{j}]": SUCCEEDED for i in range(2) for j in range(2)}
    for i in range(3):
        expected[f"scale.double[{i}]"] = SUCCEEDED
        expected[f"scale.add[{i}]"] = SUCCEEDED
    expected |= {"nested-total": SUCCEEDED, "total": SUCCEEDED}
    assert task_states(result) == expected

    outputs = result["outputs"]
    # One inner list per outer iteration: [[1+10, 1+20], [2+10, 2+20]].
    assert outputs["grid"] == [[11, 21], [12, 22]]
    assert outputs["grid_total"] == 66
    # scale(x) = 2x + 1 for x in 1, 2, 3, collected out of a nested pipeline inside the loop.
    assert outputs["scaled_total"] == 3 + 5 + 7


def test_loops_over_artifacts(headwater: Cli) -> None:
    result = run_ok(
        headwater("run", str(PIPELINES / "loops_artifacts.py"), "--pipeline", "main", "--json")
    )

    expected = {f"make-parts.make-part[{i}]": SUCCEEDED for i in range(3)}
    expected |= {f"measure[{i}]": SUCCEEDED for i in range(3)}
    expected |= {"total": SUCCEEDED, "join": SUCCEEDED}
    assert task_states(result) == expected

    outputs = result["outputs"]
    assert outputs["total_length"] == 1 + 2 + 3
    assert outputs["joined"] == "a|bb|ccc"
    parts = outputs["parts"]
    assert isinstance(parts, list) and len(parts) == 3
    for part, text in zip(parts, ["a", "bb", "ccc"], strict=True):
        assert_artifact(part, "system.Dataset", metadata={"length": len(text)}, content=text)


# --- 7. nested pipelines ---------------------------------------------------------------------


def test_nested_pipelines(headwater: Cli) -> None:
    result = run_ok(
        headwater("run", str(PIPELINES / "nested_pipelines.py"), "--pipeline", "main", "--json")
    )

    assert task_states(result) == {
        "inner.add": SUCCEEDED,
        "inner.leaf.add": SUCCEEDED,
        "inner.write-number": SUCCEEDED,
        "inner-2.add": SUCCEEDED,
        "inner-2.leaf.add": SUCCEEDED,
        "inner-2.write-number": SUCCEEDED,
        "read-number": SUCCEEDED,
    }
    outputs = result["outputs"]
    # inner(x=2, y=3): leaf(2 + 3) = 105; inner-2(x=105, y defaults to 1): leaf(106) = 206.
    assert outputs["first"] == 105
    assert outputs["second"] == 206
    assert outputs["read_back"] == 206
    assert_artifact(outputs["number"], "system.Dataset", metadata={"value": 105}, content="105")


# --- 8. exit handler -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fail", "final_state", "states"),
    [
        pytest.param(
            "false",
            "COMPLETE",
            {"work": SUCCEEDED, "after-work": SUCCEEDED},
            id="body-succeeds",
        ),
        pytest.param(
            "true",
            "FAILED",
            {"work": FAILED, "after-work": CANCELED},
            id="body-fails",
        ),
    ],
)
def test_exit_handler(
    headwater: Cli, tmp_path: Path, fail: str, final_state: str, states: dict[str, str]
) -> None:
    scratch = tmp_path / "scratch"
    cli = headwater(
        "run",
        str(PIPELINES / "exit_handler.py"),
        "--json",
        "--param",
        f"scratch={scratch}",
        "--param",
        f"fail={fail}",
    )

    result = run_failed(cli) if fail == "true" else run_ok(cli)
    # The exit task and the ignore_upstream_failure() cleanup run whatever the body did.
    assert task_states(result) == {**states, "cleanup": SUCCEEDED, "report-status": SUCCEEDED}
    assert json.loads((scratch / "exit_status.json").read_text())["state"] == final_state
    assert (scratch / "cleanup.txt").read_text() == "cleaned"


# --- 9. retries, env, resources, caching -----------------------------------------------------

RETRIES_TASKS = ["flaky", "read-env", "sized", "count-runs"]


def test_retries_env_resources_and_caching(headwater: Cli, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    args = ["run", str(PIPELINES / "retries.py"), "--json", "--param", f"scratch={scratch}"]

    first = run_ok(headwater(*args))
    assert task_states(first) == dict.fromkeys(RETRIES_TASKS, SUCCEEDED)
    assert cached_flags(first) == dict.fromkeys(RETRIES_TASKS, False)
    # Two failures, then success on the third (last allowed) attempt.
    assert first["outputs"] == {"attempts": 3, "env": "hello-env|two", "sized": 42, "runs": 1}
    assert len(list((scratch / "attempts").iterdir())) == 3
    # One log for the task, each retry's output below a line marking where it starts.
    [flaky] = [t for t in headwater.show(first["run_id"])["tasks"] if t["name"] == "flaky"]
    attempts = re.split(
        r"===== headwater: attempt (\d) starts at ", Path(flaky["log_path"]).read_text()
    )
    assert attempts[1::2] == ["2", "3"]
    assert ["attempt 1 fails" in a for a in attempts[::2]] == [True, False, False]
    assert ["attempt 2 fails" in a for a in attempts[::2]] == [False, True, False]

    second = run_ok(headwater(*args))
    assert task_states(second) == dict.fromkeys(RETRIES_TASKS, SUCCEEDED)
    # Everything is a cache hit except the task with set_caching_options(False).
    assert cached_flags(second) == {
        "flaky": True,
        "read-env": True,
        "sized": True,
        "count-runs": False,
    }
    assert second["outputs"] == {"attempts": 3, "env": "hello-env|two", "sized": 42, "runs": 2}
    assert len(list((scratch / "attempts").iterdir())) == 3

    third = run_ok(headwater(*args, "--no-cache"))
    assert cached_flags(third) == dict.fromkeys(RETRIES_TASKS, False)
    # flaky really ran again: it found 3 earlier attempts and succeeded at once.
    assert third["outputs"] == {"attempts": 4, "env": "hello-env|two", "sized": 42, "runs": 3}


def test_retries_exhausted(headwater: Cli, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    result = run_failed(
        headwater(
            "run",
            str(PIPELINES / "retries.py"),
            "--json",
            "--param",
            f"scratch={scratch}",
            "--param",
            "failures=3",
        )
    )

    assert task_states(result) == {
        "flaky": FAILED,
        "read-env": SUCCEEDED,
        "sized": SUCCEEDED,
        "count-runs": SUCCEEDED,
    }
    # num_retries=2 means exactly three attempts, no more.
    assert len(list((scratch / "attempts").iterdir())) == 3


# --- 10. failure -----------------------------------------------------------------------------


def test_failure(headwater: Cli) -> None:
    cli = headwater("run", str(PIPELINES / "failure.py"), "--json", "--max-parallel", "2")

    result = run_failed(cli)
    assert task_states(result) == {
        "boom": FAILED,
        "downstream": CANCELED,
        "slow-sibling": SUCCEEDED,
    }
    combined = cli.stdout + cli.stderr
    assert "kaboom-7f3a" in combined
    assert "boom-log-line: about to raise" in combined


# --- 11. bad input ---------------------------------------------------------------------------


def _edited_ir(tmp_path: Path, py_file: str, function: str, edit: Callable[[dict], None]) -> Path:
    """Compile a pipeline, apply `edit` to the PipelineSpec dict and write it back."""
    path = compile_pipeline(py_file, function, tmp_path / f"{function}.yaml")
    spec = yaml.safe_load(path.read_text())
    edit(spec)
    edited = tmp_path / f"{function}-edited.yaml"
    edited.write_text(yaml.safe_dump(spec, sort_keys=False))
    return edited


def _use_resolver(spec: dict) -> None:
    spec["deploymentSpec"]["executors"]["exec-triple"] = {"resolver": {"outputArtifactQueries": {}}}


def _use_custom_job(spec: dict) -> None:
    spec["deploymentSpec"]["executors"]["exec-triple"] = {
        "customJob": {"customJob": {"displayName": "vertex-only"}}
    }


def _break_condition(spec: dict) -> None:
    branches = spec["components"]["comp-condition-branches-1"]["dag"]["tasks"]
    branches["condition-2"]["triggerPolicy"]["condition"] = "inputs.parameter_values["


def _missing_file(tmp_path: Path) -> list[str]:
    return ["run", str(tmp_path / "nope.py")]


def _no_pipeline(tmp_path: Path) -> list[str]:
    return ["run", str(PIPELINES / "no_pipeline.py")]


def _two_pipelines(tmp_path: Path) -> list[str]:
    return ["run", str(PIPELINES / "two_pipelines.py")]


def _malformed_yaml(tmp_path: Path) -> list[str]:
    path = tmp_path / "broken.yaml"
    path.write_text("pipelineInfo: [unclosed\n  root: {\n")
    return ["run", str(path)]


def _not_a_spec(tmp_path: Path) -> list[str]:
    path = tmp_path / "not_spec.yaml"
    path.write_text("a: 1\n")
    return ["run", str(path)]


def _resolver(tmp_path: Path) -> list[str]:
    path = _edited_ir(tmp_path, "typed_params.py", "typed_params", _use_resolver)
    return ["run", str(path), "--param", "count=1"]


def _custom_job(tmp_path: Path) -> list[str]:
    path = _edited_ir(tmp_path, "typed_params.py", "typed_params", _use_custom_job)
    return ["run", str(path), "--param", "count=1"]


def _unknown_param(tmp_path: Path) -> list[str]:
    return ["run", str(PIPELINES / "typed_params.py"), "--param", "count=1", "--param", "nope=1"]


def _missing_param(tmp_path: Path) -> list[str]:
    return ["run", str(PIPELINES / "typed_params.py"), "--param", "label=y"]


def _wrong_type(tmp_path: Path) -> list[str]:
    return ["run", str(PIPELINES / "typed_params.py"), "--param", "count=abc"]


def _bad_cel(tmp_path: Path) -> list[str]:
    return ["run", str(_edited_ir(tmp_path, "conditions.py", "conditions", _break_condition))]


@pytest.mark.parametrize(
    ("make_args", "hints"),
    [
        pytest.param(_missing_file, ["nope.py"], id="missing-file"),
        pytest.param(_no_pipeline, ["no_pipeline.py"], id="py-without-pipeline"),
        pytest.param(_two_pipelines, ["first", "second"], id="two-pipelines-no-choice"),
        pytest.param(_malformed_yaml, ["broken.yaml"], id="malformed-yaml"),
        pytest.param(_not_a_spec, ["pipelinespec"], id="not-a-pipeline-spec"),
        pytest.param(_resolver, ["resolver"], id="resolver-executor"),
        pytest.param(_custom_job, ["custom"], id="custom-job-executor"),
        pytest.param(_unknown_param, ["nope"], id="unknown-param"),
        pytest.param(_missing_param, ["count"], id="missing-required-param"),
        pytest.param(_wrong_type, ["count", "abc"], id="wrong-param-type"),
        pytest.param(_bad_cel, ["inputs.parameter_values["], id="invalid-cel-condition"),
    ],
)
def test_bad_input(
    headwater: Cli,
    tmp_path: Path,
    make_args: Callable[[Path], list[str]],
    hints: list[str],
) -> None:
    cli = headwater(*make_args(tmp_path))

    assert cli.returncode == 2, (
        f"exit {cli.returncode}\nstdout:\n{cli.stdout}\nstderr:\n{cli.stderr}"
    )
    lines = cli.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{cli.stderr}"
    assert "Traceback" not in cli.stderr + cli.stdout
    # The message names what is wrong (the file, the parameter, the choices, the bad value).
    for hint in hints:
        assert hint.lower() in lines[0].lower(), f"{hint!r} not in {lines[0]!r}"


# --- 12. compiled IR input and `headwater compile` -------------------------------------------


@pytest.mark.parametrize("suffix", [".yaml", ".json"], ids=["yaml", "json"])
def test_run_compiled_ir(headwater: Cli, tmp_path: Path, suffix: str) -> None:
    compiled = compile_pipeline("params_chain.py", "params_chain", tmp_path / f"ir{suffix}")

    result = run_ok(headwater("run", str(compiled), "--json"))

    assert task_states(result) == PARAMS_CHAIN_TASKS
    assert_params_chain_outputs(result["outputs"], DEFAULT_SUMMARY)


def test_compile_command(headwater: Cli, tmp_path: Path) -> None:
    out = tmp_path / "out.yaml"

    cli = headwater("compile", str(PIPELINES / "params_chain.py"), "-o", str(out))

    assert cli.returncode == 0, f"stdout:\n{cli.stdout}\nstderr:\n{cli.stderr}"
    spec = yaml.safe_load(out.read_text())
    assert spec["pipelineInfo"]["name"] == "params-chain"
    assert set(spec["root"]["dag"]["tasks"]) == set(PARAMS_CHAIN_TASKS)
    result = run_ok(headwater("run", str(out), "--json"))
    assert task_states(result) == PARAMS_CHAIN_TASKS
    assert_params_chain_outputs(result["outputs"], DEFAULT_SUMMARY)
