"""Whole-IR checks: cycles, dangling references and placeholders are refused at load time."""

import copy
from typing import Any

import pytest
from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from headwater.errors import PipelineSpecError, SpecVersionWarning
from headwater.spec.ir import parse_pipeline
from headwater.spec.loader import ir_from_component
from headwater.spec.validate import find_cycle

IMAGE = "python:3.11"


@dsl.component(base_image=IMAGE)
def add(a: int, b: int = 1) -> int:
    return a + b


@dsl.component(base_image=IMAGE)
def make_data(data: Output[Dataset]) -> None:
    with open(data.path, "w") as f:
        f.write("x")


@dsl.component(base_image=IMAGE)
def read_data(data: Input[Dataset]) -> str:
    return data.uri


@dsl.pipeline
def chain(x: int = 1) -> int:
    first = add(a=x)
    second = add(a=first.output)
    data = make_data().after(second)
    read_data(data=data.outputs["data"])
    with dsl.ParallelFor([1, 2]) as item:
        looped = add(a=item)
        add(a=looped.output)
    return second.output


@pytest.fixture(scope="module")
def compiled() -> dict[str, Any]:
    return dict(ir_from_component(chain).raw)


@pytest.fixture
def doc(compiled: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(compiled)


def root_tasks(doc: dict[str, Any]) -> dict[str, Any]:
    tasks: dict[str, Any] = doc["root"]["dag"]["tasks"]
    return tasks


def loop_tasks(doc: dict[str, Any]) -> dict[str, Any]:
    tasks: dict[str, Any] = doc["components"]["comp-for-loop-2"]["dag"]["tasks"]
    return tasks


def refused(doc: dict[str, Any]) -> str:
    with pytest.raises(PipelineSpecError) as info:
        parse_pipeline(doc)
    return str(info.value)


def test_the_compiled_pipeline_is_valid(doc: dict[str, Any]) -> None:
    assert set(root_tasks(doc)) == {"add", "add-2", "make-data", "read-data", "for-loop-2"}
    assert set(loop_tasks(doc)) == {"add-3", "add-4"}
    parse_pipeline(doc)


# -- cycles -----------------------------------------------------------------------------------


def test_cycle_through_dependent_tasks(doc: dict[str, Any]) -> None:
    root_tasks(doc)["add"]["dependentTasks"] = ["make-data"]
    message = refused(doc)
    assert "the tasks of the pipeline's root DAG form a cycle" in message
    assert "add -> add-2 -> make-data -> add (each must finish before the next starts" in message


def test_cycle_through_data(doc: dict[str, Any]) -> None:
    root_tasks(doc)["add"]["inputs"]["parameters"]["b"] = {
        "taskOutputParameter": {"producerTask": "add-2", "outputParameterKey": "Output"}
    }
    assert "form a cycle: add -> add-2 -> add" in refused(doc)


def test_cycle_through_an_artifact(doc: dict[str, Any]) -> None:
    # make-data runs after add-2; make add-2 wait for read-data, which reads make-data's data.
    root_tasks(doc)["add-2"]["dependentTasks"] = ["read-data"]
    assert "add-2 -> make-data -> read-data -> add-2" in refused(doc)


def test_cycle_of_one_task(doc: dict[str, Any]) -> None:
    root_tasks(doc)["add"]["dependentTasks"] = ["add"]
    assert "form a cycle: add -> add" in refused(doc)


def test_cycle_inside_a_loop_body(doc: dict[str, Any]) -> None:
    loop_tasks(doc)["add-3"]["dependentTasks"] = ["add-4"]
    message = refused(doc)
    assert "the tasks of DAG 'comp-for-loop-2' form a cycle" in message
    assert "add-3 -> add-4 -> add-3" in message


def test_components_that_contain_each_other(doc: dict[str, Any]) -> None:
    loop_tasks(doc)["add-3"]["componentRef"]["name"] = "comp-for-loop-2"
    loop_tasks(doc)["add-3"]["inputs"] = {}
    loop_tasks(doc)["add-3"]["parameterIterator"] = {
        "items": {"raw": "[1]"},
        "itemInput": "pipelinechannel--loop-item-param-1",
    }
    loop_tasks(doc)["add-4"]["inputs"]["parameters"]["a"]["taskOutputParameter"] = {
        "producerTask": "add-3",
        "outputParameterKey": "Output",
    }
    doc["components"]["comp-for-loop-2"]["outputDefinitions"] = {
        "parameters": {"Output": {"parameterType": "NUMBER_INTEGER"}}
    }
    message = refused(doc)
    assert "components contain each other in a cycle: comp-for-loop-2 -> comp-for-loop-2" in (
        message
    )


@pytest.mark.parametrize(
    ("graph", "cycle"),
    [
        ({}, None),
        ({"a": []}, None),
        ({"a": ["b"], "b": []}, None),
        ({"a": ["b", "c"], "b": ["c"], "c": []}, None),
        ({"a": ["a"]}, ["a", "a"]),
        ({"a": ["b"], "b": ["a"]}, ["a", "b", "a"]),
        ({"x": [], "a": ["b"], "b": ["c"], "c": ["b"]}, ["b", "c", "b"]),
        ({"a": ["missing"]}, None),
    ],
    ids=["empty", "one", "chain", "diamond", "self", "two", "tail", "dangling-ignored"],
)
def test_find_cycle(graph: dict[str, list[str]], cycle: list[str] | None) -> None:
    assert find_cycle(graph) == cycle


def test_find_cycle_is_iterative_on_a_long_chain() -> None:
    graph = {str(i): [str(i + 1)] for i in range(50_000)}
    assert find_cycle(graph) is None
    graph["50000"] = ["0"]
    found = find_cycle(graph)
    assert found is not None and len(found) == 50_002


# -- dangling references ----------------------------------------------------------------------


def _set(node: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split("/")
    for key in parents:
        node = node[key]
    node[last] = value


@pytest.mark.parametrize(
    ("path", "value", "words"),
    [
        (
            "root/dag/tasks/add-2/inputs/parameters/a/taskOutputParameter/producerTask",
            "nowhere",
            [
                "task 'add-2' waits for task 'nowhere', which is not in the pipeline's root DAG",
                "at root.dag.tasks.add-2.inputs.parameters.a",
            ],
        ),
        (
            "root/dag/tasks/add-2/inputs/parameters/a/taskOutputParameter/outputParameterKey",
            "Outptu",
            [
                "takes output parameter 'Outptu' of task 'add'",
                "component 'comp-add' declares no such output (output parameters: Output)",
            ],
        ),
        (
            "root/dag/tasks/read-data/inputs/artifacts/data/taskOutputArtifact/producerTask",
            "nowhere",
            ["task 'read-data' waits for task 'nowhere'"],
        ),
        (
            "root/dag/tasks/read-data/inputs/artifacts/data/taskOutputArtifact/outputArtifactKey",
            "dta",
            ["takes output artifact 'dta' of task 'make-data'", "(output artifacts: data)"],
        ),
        (
            "root/dag/tasks/make-data/dependentTasks",
            ["add-2", "nowhere"],
            [
                "task 'make-data' waits for task 'nowhere'",
                "at root.dag.tasks.make-data.dependentTasks",
            ],
        ),
        (
            "root/dag/outputs/parameters/Output/valueFromParameter/producerSubtask",
            "nowhere",
            ["root.dag.outputs.parameters.Output selects an output of task 'nowhere'"],
        ),
        (
            "root/dag/outputs/parameters/Output/valueFromParameter/outputParameterKey",
            "nope",
            ["root.dag.outputs.parameters.Output takes output parameter 'nope' of task 'add-2'"],
        ),
        (
            "root/dag/tasks/add/inputs/parameters/a/componentInputParameter",
            "y",
            [
                "takes input 'y' of the pipeline's root DAG, which declares no such input",
                "(inputs: x)",
            ],
        ),
        (
            "components/comp-for-loop-2/dag/tasks/add-3/inputs/parameters/a/componentInputParameter",
            "nothing",
            ["input 'nothing' of DAG 'comp-for-loop-2'"],
        ),
        (
            "root/dag/tasks/add/componentRef/name",
            "comp-nothing",
            ["task 'add' refers to component 'comp-nothing'"],
        ),
        (
            "components/comp-add/executorLabel",
            "exec-nothing",
            ["component 'comp-add' names executor 'exec-nothing'", "executors: exec-add"],
        ),
        (
            "root/dag/tasks/add/inputs/parameters",
            {},
            ["task 'add' gives no value for input parameter 'a'", "component 'comp-add' requires"],
        ),
        (
            "root/dag/tasks/read-data/inputs/artifacts",
            {},
            ["task 'read-data' gives no value for input artifact 'data'"],
        ),
    ],
    ids=[
        "producer-task",
        "output-key",
        "artifact-producer",
        "artifact-key",
        "dependent-task",
        "dag-output-subtask",
        "dag-output-key",
        "root-input",
        "loop-input",
        "component",
        "executor",
        "required-parameter",
        "required-artifact",
    ],
)
def test_dangling_references_are_refused(
    doc: dict[str, Any], path: str, value: Any, words: list[str]
) -> None:
    _set(doc, path, value)
    message = refused(doc)
    for word in words:
        assert word in message


@pytest.mark.parametrize(
    ("component", "value"),
    [("root", "many"), ("components/comp-add", [1])],
    ids=["pipeline-parameter", "component-input"],
)
def test_default_that_does_not_fit_its_type(
    doc: dict[str, Any], component: str, value: Any
) -> None:
    node = doc
    for key in component.split("/"):
        node = node[key]
    params = node["inputDefinitions"]["parameters"]
    name = "x" if component == "root" else "b"
    params[name]["defaultValue"] = value
    message = refused(doc)
    assert f"the default of parameter {name!r} expects int (NUMBER_INTEGER) but got" in message
    assert f"inputDefinitions.parameters.{name}.defaultValue" in message


def test_root_that_is_not_a_dag(doc: dict[str, Any]) -> None:
    doc["root"] = {"executorLabel": "exec-add"}
    assert refused(doc).startswith("malformed PipelineSpec at root: expected a 'dag'")


def test_loop_over_an_input_the_task_does_not_have(doc: dict[str, Any]) -> None:
    loop = root_tasks(doc)["for-loop-2"]
    loop["parameterIterator"]["items"] = {"inputParameter": "pipelinechannel--nothing"}
    assert "iterates over 'pipelinechannel--nothing', which is not one of the task's inputs" in (
        refused(doc)
    )


# -- placeholders -----------------------------------------------------------------------------


def _args(doc: dict[str, Any]) -> list[str]:
    args: list[str] = doc["deploymentSpec"]["executors"]["exec-add"]["container"]["args"]
    return args


@pytest.mark.parametrize(
    ("arg", "words"),
    [
        ("{{$.inputs.parameters['c']}}", ["names input parameter 'c'", "(input parameters: a, b)"]),
        ("{{$.outputs.artifacts['model'].path}}", ["names output artifact 'model'"]),
        ("{{$.input.parameters['a']}}", ["unknown placeholder {{$.input.parameters['a']}}"]),
        ("--n={{$.inputs.parameters['a'].path}}", ["unknown placeholder"]),
        ('{"Concat": ["a", ', ["malformed structured placeholder", "is not JSON"]),
        ('{"Concat": [1]}', ["unsupported structured placeholder", ".Concat[0]"]),
        ('{"IfPresent": {"InputName": "c", "Then": "x"}}', ["IfPresent", "names input 'c'"]),
        (
            '{"Concat": [{"IfPresent": {"InputName": "a", "Then": ["x", "y"]}}]}',
            ["inside a Concat gives several arguments"],
        ),
    ],
    ids=[
        "unknown-input",
        "unknown-output",
        "unknown-form",
        "bad-attribute",
        "bad-json",
        "bad-concat-part",
        "if-present-unknown-input",
        "list-in-concat",
    ],
)
def test_bad_placeholders_are_refused_at_load(
    doc: dict[str, Any], arg: str, words: list[str]
) -> None:
    _args(doc).append(arg)
    message = refused(doc)
    assert "deploymentSpec.executors.exec-add.container.args" in message
    for word in words:
        assert word in message


def test_bad_placeholder_in_env_is_refused(doc: dict[str, Any]) -> None:
    container = doc["deploymentSpec"]["executors"]["exec-add"]["container"]
    container["env"] = [{"name": "A", "value": "{{$.pipeline_nothing}}"}]
    assert "container.env[0].value" in refused(doc)


def test_bad_placeholder_in_a_constant_is_refused(doc: dict[str, Any]) -> None:
    root_tasks(doc)["add"]["inputs"]["parameters"]["b"] = {
        "runtimeValue": {"constant": "{{$.outputs.parameters['Output'].output_file}}"}
    }
    assert "root.dag.tasks.add.inputs.parameters.b.runtimeValue" in refused(doc)


def test_placeholder_names_a_task_input_added_for_resources(doc: dict[str, Any]) -> None:
    # set_cpu_limit(param) adds `pipelinechannel--cpu` to the task, not to the component.
    root_tasks(doc)["add"]["inputs"]["parameters"]["pipelinechannel--cpu"] = {
        "componentInputParameter": "x"
    }
    container = doc["deploymentSpec"]["executors"]["exec-add"]["container"]
    container["resources"] = {"resourceCpuLimit": "{{$.inputs.parameters['pipelinechannel--cpu']}}"}
    parse_pipeline(doc)


# -- schema version ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2.0.0", "2.1.0", "2.1", None], ids=str)
def test_known_schema_versions_load(doc: dict[str, Any], version: str | None) -> None:
    doc["schemaVersion"] = version
    parse_pipeline(doc)


def test_newer_major_schema_version_is_refused(doc: dict[str, Any]) -> None:
    doc["schemaVersion"] = "3.0.0"
    message = refused(doc)
    assert "schemaVersion 3.0.0 is newer than Headwater supports" in message


def test_newer_minor_schema_version_warns(doc: dict[str, Any]) -> None:
    doc["schemaVersion"] = "2.7.0"
    with pytest.warns(SpecVersionWarning, match=r"schemaVersion 2\.7\.0 is newer"):
        parse_pipeline(doc)


@pytest.mark.parametrize("version", ["two", "2", "2.x.0", 2.1], ids=str)
def test_malformed_schema_version(doc: dict[str, Any], version: Any) -> None:
    doc["schemaVersion"] = version
    assert "schemaVersion" in refused(doc)
