"""Tests for parse_pipeline: validating PipelineSpec documents into the typed IR tree."""

import copy
from collections.abc import Callable
from typing import Any

import pytest
from kfp import dsl

from headwater.errors import ConditionError, PipelineSpecError, UnsupportedFeatureError
from headwater.spec.ir import RetryPolicy, is_control_flow_task, parse_pipeline
from headwater.spec.loader import ir_from_component


@dsl.component(base_image="python:3.11")
def add(a: int, b: int) -> int:
    return a + b


@dsl.component(base_image="python:3.11")
def report(status: dsl.PipelineTaskFinalStatus) -> str:
    return status.state


@dsl.pipeline(pipeline_root="gs://bucket/root")
def features(x: int = 1, items: list = [1, 2]):  # noqa: B006 - KFP default
    final = report()
    with dsl.ExitHandler(final):
        first = add(a=x, b=1).set_retry(
            num_retries=3, backoff_duration="30s", backoff_factor=1.5, backoff_max_duration="90s"
        )
        first.set_caching_options(enable_caching=True, cache_key="k1")
        with dsl.If(x > 0):
            add(a=x, b=2).after(first).ignore_upstream_failure()
        with dsl.ParallelFor(items, parallelism=2) as item:
            add(a=item, b=3)
        with dsl.ParallelFor([5, 6]) as item:
            add(a=item, b=4).set_caching_options(enable_caching=False)


@pytest.fixture(scope="module")
def compiled() -> dict[str, Any]:
    return dict(ir_from_component(features).raw)


DocFactory = Callable[[], dict[str, Any]]


@pytest.fixture
def make_doc(compiled: dict[str, Any]) -> DocFactory:
    """Fresh deep copies of a compiled PipelineSpec, for a test to break."""
    return lambda: copy.deepcopy(compiled)


def tasks_of(ir: Any) -> dict[str, Any]:
    """Every task of every DAG, by task name."""
    found = {}
    for comp in [ir.root, *ir.components.values()]:
        if comp.dag is not None:
            found.update(comp.dag.tasks)
    return found


# -- a valid document -------------------------------------------------------------------------


def test_parse_compiled_pipeline(make_doc: DocFactory) -> None:
    ir = parse_pipeline(make_doc(), {"kubernetes": {"x": 1}})
    assert ir.name == "features"
    assert ir.default_pipeline_root == "gs://bucket/root"
    assert ir.platform == {"kubernetes": {"x": 1}}
    assert set(ir.root.interface.input_parameters) == {"x", "items"}
    x = ir.root.interface.input_parameters["x"]
    assert (x.type, x.optional, x.has_default, x.default) == ("NUMBER_INTEGER", True, True, 1.0)
    assert ir.component("comp-add").interface.output_parameters["Output"].type == "NUMBER_INTEGER"
    assert ir.component("comp-add").executor_label == "exec-add"
    assert ir.component("comp-add").dag is None


def test_parse_retry_policy(make_doc: DocFactory) -> None:
    task = tasks_of(parse_pipeline(make_doc()))["add"]
    assert task.retry == RetryPolicy(max_retries=3, backoff=30.0, factor=1.5, max_backoff=90.0)


def test_parse_caching_options(make_doc: DocFactory) -> None:
    tasks = tasks_of(parse_pipeline(make_doc()))
    assert (tasks["add"].enable_cache, tasks["add"].cache_key) == (True, "k1")
    assert tasks["add-4"].enable_cache is False


def test_parse_exit_handler_and_ignore_upstream_failure(make_doc: DocFactory) -> None:
    tasks = tasks_of(parse_pipeline(make_doc()))
    assert tasks["report"].all_upstream_completed
    assert tasks["report"].dependencies == ("exit-handler-1",)
    assert tasks["report"].parameter_inputs["status"] == {
        "taskFinalStatus": {"producerTask": "exit-handler-1"}
    }
    assert tasks["add-2"].all_upstream_completed
    assert not tasks["add"].all_upstream_completed


def test_parse_condition(make_doc: DocFactory) -> None:
    condition = tasks_of(parse_pipeline(make_doc()))["condition-2"].condition
    assert condition is not None
    assert condition.expression == "int(inputs.parameter_values['pipelinechannel--x']) > 0"
    assert condition.evaluate({"pipelinechannel--x": 1})
    assert not condition.evaluate({"pipelinechannel--x": 0})


def test_parse_loops(make_doc: DocFactory) -> None:
    tasks = tasks_of(parse_pipeline(make_doc()))
    over_input = tasks["for-loop-3"].iterator
    assert over_input is not None
    assert (over_input.kind, over_input.raw) == ("parameter", None)
    assert over_input.input_name == "pipelinechannel--items"
    assert tasks["for-loop-3"].parallelism == 2
    constant = tasks["for-loop-5"].iterator
    assert constant is not None
    assert constant.raw == [5, 6]
    assert tasks["for-loop-5"].parallelism == 0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("condition-1", True),
        ("condition-branches-3", True),
        ("for-loop-12", True),
        ("exit-handler-1", True),
        ("condition", False),
        ("for-loop-x", False),
        ("add-2", False),
        ("my-condition-1", False),
        ("scale", False),
    ],
    ids=lambda v: str(v),
)
def test_is_control_flow_task(name: str, expected: bool) -> None:
    assert is_control_flow_task(name) is expected


@pytest.mark.parametrize(
    ("policy", "delays"),
    [
        (RetryPolicy(3), [0.0, 0.0, 0.0]),
        (RetryPolicy(3, backoff=1.0), [1.0, 2.0, 4.0]),
        (RetryPolicy(3, backoff=10.0, factor=3.0, max_backoff=50.0), [10.0, 30.0, 50.0]),
    ],
    ids=["no-backoff", "doubling", "capped"],
)
def test_retry_delay(policy: RetryPolicy, delays: list[float]) -> None:
    assert [policy.delay(n) for n in (1, 2, 3)] == delays


# -- rejected documents -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        {},
        [],
        "pipeline.yaml",
        None,
        {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow"},
        {"root": {}},
        {"pipelineInfo": {"name": "x"}},
    ],
    ids=["empty", "list", "string", "none", "argo-workflow", "no-pipeline-info", "no-root"],
)
def test_parse_rejects_documents_that_are_not_pipeline_specs(doc: Any) -> None:
    with pytest.raises(PipelineSpecError, match="not a KFP PipelineSpec") as info:
        parse_pipeline(doc)
    assert "kfp.compiler.Compiler" in str(info.value)


def test_not_a_pipeline_spec_lists_the_keys_it_saw() -> None:
    with pytest.raises(PipelineSpecError, match="got apiVersion, kind"):
        parse_pipeline({"kind": "Workflow", "apiVersion": "v1"})


def _set(doc: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split("/")
    node = doc
    for key in parents:
        node = node[key]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("pipelineInfo", "features", "at pipelineInfo: expected a mapping, got str"),
        ("components", ["comp-add"], "at components: expected a mapping, got list"),
        ("components/comp-add", "oops", "at components.comp-add: expected a mapping"),
        ("components/comp-add/executorLabel", KeyError, "neither a 'dag' nor an 'executorLabel'"),
        ("root/dag/tasks/report/componentRef", KeyError, "task 'report' has no componentRef"),
        (
            "root/dag/tasks/report/componentRef/name",
            "comp-missing",
            "refers to component 'comp-missing'",
        ),
        (
            "root/dag/tasks/report/dependentTasks",
            ["nowhere"],
            "task 'report' waits for task 'nowhere', which is not in the pipeline's root DAG",
        ),
        ("deploymentSpec/executors/exec-add", KeyError, "names executor 'exec-add'"),
        (
            "root/inputDefinitions/parameters/x/parameterType",
            "NUMBER",
            "parameter 'x' has unknown type 'NUMBER'",
        ),
        (
            "components/comp-exit-handler-1/dag/tasks/for-loop-5/parameterIterator/items/raw",
            "[5, ",
            "task 'for-loop-5': loop items are not JSON",
        ),
        (
            "components/comp-exit-handler-1/dag/tasks/add/retryPolicy/backoffDuration",
            "soon",
            "bad duration 'soon'",
        ),
    ],
    ids=[
        "pipeline-info",
        "components",
        "component",
        "no-dag-or-executor",
        "no-component-ref",
        "unknown-component",
        "unknown-dependency",
        "unknown-executor",
        "unknown-parameter-type",
        "bad-loop-items",
        "bad-backoff",
    ],
)
def test_parse_rejects_malformed_documents(
    make_doc: DocFactory, path: str, value: Any, message: str
) -> None:
    doc = make_doc()
    _set(doc, path, value)
    with pytest.raises(PipelineSpecError) as info:
        parse_pipeline(doc)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("executor", "words"),
    [
        ({"resolver": {"outputArtifactQueries": {}}}, ["'exec-add'", "resolver", "Vertex AI"]),
        ({"customJob": {"customJob": {}}}, ["'exec-add'", "Vertex AI custom job"]),
        ({"somethingNew": {}}, ["'exec-add'", "executor kind 'somethingNew'"]),
        ({}, ["'exec-add'", "executor kind 'nothing'"]),
    ],
    ids=["resolver", "custom-job", "unknown", "empty"],
)
def test_parse_rejects_executors_it_cannot_run(
    make_doc: DocFactory, executor: dict[str, Any], words: list[str]
) -> None:
    doc = make_doc()
    doc["deploymentSpec"]["executors"]["exec-add"] = executor
    with pytest.raises(UnsupportedFeatureError) as info:
        parse_pipeline(doc)
    for word in words:
        assert word in str(info.value)
    assert "container, lightweight Python and importer" in str(info.value)


def test_parse_accepts_importer_and_container_executors(make_doc: DocFactory) -> None:
    doc = make_doc()
    doc["deploymentSpec"]["executors"]["exec-import"] = {
        "importer": {"artifactUri": {"constant": "gs://b/x"}}
    }
    assert "exec-import" in parse_pipeline(doc).executors


@pytest.mark.parametrize(
    "expression",
    [
        "inputs.parameter_values['x'] >",
        "inputs.parameter_values['x'] === 1",
        "&& true",
        "(1 == 1",
    ],
    ids=["dangling-operator", "triple-equals", "leading-and", "unbalanced"],
)
def test_parse_rejects_bad_cel_naming_the_task(make_doc: DocFactory, expression: str) -> None:
    doc = make_doc()
    task = doc["components"]["comp-exit-handler-1"]["dag"]["tasks"]["condition-2"]
    task["triggerPolicy"]["condition"] = expression
    with pytest.raises(ConditionError) as info:
        parse_pipeline(doc)
    message = str(info.value)
    assert "task 'condition-2'" in message
    assert repr(expression) in message
    assert "not valid CEL" in message
