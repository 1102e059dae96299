"""Tests for load_pipeline: .py files, pipeline objects and compiled IR files."""

import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from kfp import compiler, dsl

from headwater.errors import PipelineLoadError, PipelineSpecError
from headwater.spec.ir import parse_pipeline
from headwater.spec.loader import ir_from_component, load_pipeline

HEADER = """\
from kfp import dsl


@dsl.component(base_image="python:3.11")
def echo(text: str) -> str:
    return text

"""

ONE = """
@dsl.pipeline
def hello(text: str = "hi") -> str:
    return echo(text=text).output
"""

TWO = """
@dsl.pipeline
def first(text: str = "one") -> str:
    return echo(text=text).output


@dsl.pipeline(name="second-pipeline")
def second(text: str = "two") -> str:
    return echo(text=text).output
"""

NESTED = """
@dsl.pipeline
def inner(text: str) -> str:
    return echo(text=text).output


@dsl.pipeline
def outer() -> str:
    return inner(text="x").output
"""

WriteFile = Callable[..., Path]


@pytest.fixture
def write_file(tmp_path: Path) -> WriteFile:
    """Write a file under tmp_path; `.py` sources get the component header unless told not to."""

    def write(name: str, body: str, *, header: bool = True) -> Path:
        path = tmp_path / name
        text = body
        if name.endswith(".py") and header:
            text = HEADER + textwrap.dedent(body)
        path.write_text(text, encoding="utf-8")
        return path

    return write


@dsl.component(base_image="python:3.11")
def add(a: int, b: int) -> int:
    return a + b


@dsl.pipeline
def arithmetic(x: int = 1) -> int:
    first = add(a=x, b=2)
    return add(a=first.output, b=3).output


# -- .py files --------------------------------------------------------------------------------


def test_load_py_with_one_pipeline(write_file: WriteFile) -> None:
    ir = load_pipeline(write_file("hello.py", ONE))
    assert ir.name == "hello"
    assert set(ir.root.dag.tasks) == {"echo"}  # type: ignore[union-attr]
    assert ir.root.interface.input_parameters["text"].default == "hi"


def test_load_py_accepts_a_str_path(write_file: WriteFile) -> None:
    assert load_pipeline(str(write_file("hello.py", ONE))).name == "hello"


def test_load_py_with_two_pipelines_asks_to_choose(write_file: WriteFile) -> None:
    path = write_file("two.py", TWO)
    with pytest.raises(PipelineLoadError) as info:
        load_pipeline(path)
    message = str(info.value)
    assert "defines 2 pipelines (first, second)" in message
    assert "--pipeline" in message
    assert str(path) in message


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("first", "first"),
        ("second", "second-pipeline"),
        ("second-pipeline", "second-pipeline"),
    ],
    ids=["function-name", "function-name-of-renamed", "pipeline-name"],
)
def test_load_py_picks_the_named_pipeline(
    write_file: WriteFile, choice: str, expected: str
) -> None:
    ir = load_pipeline(write_file("two.py", TWO), pipeline_name=choice)
    assert ir.name == expected


def test_load_py_with_unknown_pipeline_name_lists_the_choices(write_file: WriteFile) -> None:
    with pytest.raises(PipelineLoadError, match=r"no pipeline 'third' .* \(found: first, second\)"):
        load_pipeline(write_file("two.py", TWO), pipeline_name="third")


def test_load_py_picks_the_outermost_of_nested_pipelines(write_file: WriteFile) -> None:
    ir = load_pipeline(write_file("nested.py", NESTED))
    assert ir.name == "outer"
    assert load_pipeline(write_file("nested.py", NESTED), pipeline_name="inner").name == "inner"


def test_load_py_does_not_mistake_a_component_for_a_nested_pipeline(
    write_file: WriteFile,
) -> None:
    source = """
    @dsl.pipeline(name="echo")
    def echo_pipeline(text: str = "a") -> str:
        return echo(text=text).output


    @dsl.pipeline
    def main() -> str:
        return echo(text="b").output
    """
    with pytest.raises(PipelineLoadError, match="defines 2 pipelines"):
        load_pipeline(write_file("ambiguous.py", source))


def test_load_py_without_a_pipeline(write_file: WriteFile) -> None:
    path = write_file("none.py", "VALUE = 1\n")
    with pytest.raises(PipelineLoadError, match="defines no pipeline") as info:
        load_pipeline(path)
    assert "@dsl.pipeline" in str(info.value)


def test_load_py_that_fails_to_import(write_file: WriteFile) -> None:
    path = write_file("broken.py", "VALUE = 1\nRATIO = 1 / 0\n", header=False)
    with pytest.raises(PipelineLoadError) as info:
        load_pipeline(path)
    message = str(info.value)
    assert message == (
        f"importing {str(path)!r} failed at line 2: ZeroDivisionError: division by zero"
    )
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_load_py_names_the_line_of_the_users_file_not_a_library_frame(
    write_file: WriteFile,
) -> None:
    path = write_file("calls.py", "import json\n\njson.loads('{bad')\n", header=False)
    with pytest.raises(PipelineLoadError) as info:
        load_pipeline(path)
    assert "failed at line 3: JSONDecodeError: Expecting property name" in str(info.value)


def test_load_py_with_a_syntax_error(write_file: WriteFile) -> None:
    path = write_file("syntax.py", "x = 1\ndef broken(:\n", header=False)
    with pytest.raises(PipelineLoadError) as info:
        load_pipeline(path)
    assert "failed at line 2: SyntaxError: invalid syntax" in str(info.value)


def test_load_py_error_with_a_multi_line_message_is_one_line(write_file: WriteFile) -> None:
    path = write_file("multi.py", "raise ValueError('first\\nsecond')\n", header=False)
    with pytest.raises(PipelineLoadError) as info:
        load_pipeline(path)
    assert "\n" not in str(info.value)
    assert str(info.value).endswith("ValueError: first")


@pytest.mark.parametrize(
    ("call", "shown"),
    [
        ("sys.exit(0)", "sys.exit(0)"),
        ("sys.exit(3)", "sys.exit(3)"),
        ("sys.exit()", "sys.exit(None)"),
        ("sys.exit('bye')", "sys.exit('bye')"),
        ("raise SystemExit(2)", "sys.exit(2)"),
    ],
    ids=["zero", "three", "none", "message", "raise"],
)
def test_load_py_that_exits_while_loading(write_file: WriteFile, call: str, shown: str) -> None:
    path = write_file("exits.py", f"import sys\n\n{call}\n", header=False)
    with pytest.raises(PipelineLoadError) as info:
        load_pipeline(path)
    message = str(info.value)
    assert message.startswith(f"{str(path)!r} called {shown} while loading at line 3")
    assert "if __name__ == '__main__'" in message
    assert str(path.parent) not in sys.path


def test_load_py_imports_sibling_modules_then_restores_sys_path(write_file: WriteFile) -> None:
    write_file("helpers_for_loader_test.py", "DEFAULT = 'from-sibling'\n", header=False)
    path = write_file(
        "uses_sibling.py",
        """
        from helpers_for_loader_test import DEFAULT


        @dsl.pipeline
        def sibling(text: str = DEFAULT) -> str:
            return echo(text=text).output
        """,
    )
    before = list(sys.path)
    try:
        ir = load_pipeline(path)
    finally:
        sys.modules.pop("helpers_for_loader_test", None)
    assert ir.root.interface.input_parameters["text"].default == "from-sibling"
    assert sys.path == before


def test_load_pipeline_object() -> None:
    ir = load_pipeline(arithmetic)
    assert ir.name == "arithmetic"
    assert set(ir.root.dag.tasks) == {"add", "add-2"}  # type: ignore[union-attr]


def test_load_rejects_other_objects() -> None:
    with pytest.raises(PipelineLoadError, match=r"pass a @dsl\.pipeline function"):
        load_pipeline(42)


# -- paths that are not pipelines -------------------------------------------------------------


def test_load_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.py"
    with pytest.raises(PipelineLoadError, match="pipeline file not found") as info:
        load_pipeline(missing)
    assert str(missing) in str(info.value)


def test_load_directory(tmp_path: Path) -> None:
    with pytest.raises(PipelineLoadError, match="is a directory"):
        load_pipeline(tmp_path)


@pytest.mark.parametrize("name", ["pipeline.txt", "pipeline", "pipeline.yaml.bak"], ids=str)
def test_load_unknown_suffix(write_file: WriteFile, name: str) -> None:
    with pytest.raises(PipelineLoadError, match="cannot run") as info:
        load_pipeline(write_file(name, "anything"))
    assert ".py file with a @dsl.pipeline" in str(info.value)


# -- compiled IR files ------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
def test_compiled_round_trip(tmp_path: Path, suffix: str) -> None:
    compiled = tmp_path / "compiled.yaml"
    compiler.Compiler().compile(arithmetic, str(compiled))
    path = tmp_path / f"arithmetic{suffix}"
    if suffix == ".json":  # the SDK's JSON output is deprecated; write the same document
        path.write_text(json.dumps(yaml.safe_load(compiled.read_text())), encoding="utf-8")
    else:
        compiled.rename(path)
    loaded = load_pipeline(path)
    direct = ir_from_component(arithmetic)
    assert loaded.name == direct.name == "arithmetic"
    assert loaded.root == direct.root
    assert loaded.components == direct.components
    assert loaded.executors == direct.executors


def test_compiled_yaml_with_platform_document(tmp_path: Path) -> None:
    path = tmp_path / "arithmetic.yaml"
    compiler.Compiler().compile(arithmetic, str(path))
    platform = {"platforms": {"kubernetes": {"deploymentSpec": {"executors": {}}}}}
    with path.open("a", encoding="utf-8") as f:
        f.write("---\n" + yaml.safe_dump(platform))
    ir = load_pipeline(path)
    assert ir.platform == platform["platforms"]
    assert ir.name == "arithmetic"


@pytest.mark.parametrize(
    ("name", "text", "kind"),
    [
        ("bad.yaml", "root: [unclosed\n", "YAML"),
        ("bad.yml", "a: b: c\n", "YAML"),
        ("bad.json", "{not json", "JSON"),
    ],
    ids=["yaml", "yml", "json"],
)
def test_malformed_ir_files(write_file: WriteFile, name: str, text: str, kind: str) -> None:
    path = write_file(name, text)
    with pytest.raises(PipelineLoadError, match=f"is not valid {kind}") as info:
        load_pipeline(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("name", ["deep.yaml", "deep.json"])
def test_ir_nested_too_deeply(write_file: WriteFile, name: str) -> None:
    path = write_file(name, "[" * 100_000 + "]" * 100_000)
    with pytest.raises(PipelineLoadError, match="too deeply to be a PipelineSpec") as info:
        load_pipeline(path)
    assert str(path) in str(info.value)


def test_ir_with_a_deep_constant_is_one_error(tmp_path: Path) -> None:
    doc = json.loads(json.dumps(ir_from_component(arithmetic).raw))
    deep: object = "x"
    for _ in range(5000):
        deep = [deep]
    task = doc["root"]["dag"]["tasks"]["add"]
    task["inputs"]["parameters"]["b"] = {"runtimeValue": {"constant": deep}}
    with pytest.raises(PipelineSpecError, match="nests values too deeply"):
        parse_pipeline(doc)


def _compiled_yaml(tmp_path: Path) -> str:
    path = tmp_path / "arithmetic.yaml"
    compiler.Compiler().compile(arithmetic, str(path))
    return path.read_text()


def test_yaml_dates_stay_text(tmp_path: Path) -> None:
    text = _compiled_yaml(tmp_path).replace(
        "pipelineInfo:\n", "pipelineInfo:\n  description: 2024-01-02\n"
    )
    path = tmp_path / "dated.yaml"
    path.write_text(text)
    ir = load_pipeline(path)
    assert ir.raw["pipelineInfo"]["description"] == "2024-01-02"


@pytest.mark.parametrize(
    ("line", "problem", "column"),
    [
        ("  5: five", "mapping key 5 is not a string (quote it)", 3),
        ("  blob: !!binary aGk=", "tag:yaml.org,2002:binary values have no JSON form", 9),
        ("  tags: !!set {a: null}", "tag:yaml.org,2002:set values have no JSON form", 9),
    ],
    ids=["int-key", "binary", "set"],
)
def test_yaml_that_json_cannot_hold_is_refused_with_its_line(
    tmp_path: Path, line: str, problem: str, column: int
) -> None:
    text = _compiled_yaml(tmp_path)
    lines = text.splitlines()
    at = lines.index("pipelineInfo:") + 1
    lines.insert(at, line)
    path = tmp_path / "odd.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(PipelineLoadError) as info:
        load_pipeline(path)
    assert str(info.value) == (
        f"{str(path)!r} is not valid YAML: {problem} (line {at + 1}, column {column})"
    )


def test_empty_yaml(write_file: WriteFile) -> None:
    with pytest.raises(PipelineSpecError, match="is empty"):
        load_pipeline(write_file("empty.yaml", "# nothing here\n"))


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("workflow.yaml", "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\n"),
        ("list.json", json.dumps([1, 2])),
        ("scalar.yaml", "just a string\n"),
    ],
    ids=["argo", "json-list", "scalar"],
)
def test_ir_files_that_are_not_pipeline_specs(write_file: WriteFile, name: str, text: str) -> None:
    with pytest.raises(PipelineSpecError, match="not a KFP PipelineSpec"):
        load_pipeline(write_file(name, text))


def test_undecodable_ir_file(tmp_path: Path) -> None:
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(PipelineLoadError, match="cannot read"):
        load_pipeline(path)
