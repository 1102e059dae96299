"""`headwater.compile`: KFP's compiler, written whole or not at all, one clear error otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import headwater
from headwater.errors import InvalidArgumentError, PipelineLoadError
from headwater.spec.loader import load_pipeline

PIPELINE = Path(__file__).parents[2] / "integration" / "pipelines" / "params_chain.py"


@pytest.mark.parametrize("name", ["out.yaml", "nested/dir/out.yml"])
def test_compile_writes_ir_that_loads(tmp_path: Path, name: str) -> None:
    out = headwater.compile(PIPELINE, tmp_path / name)
    assert out == tmp_path / name
    assert load_pipeline(out).name == load_pipeline(PIPELINE).name
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no temporary file left
    assert out.stat().st_mode & 0o777 == 0o644


def test_compile_a_pipeline_object(tmp_path: Path) -> None:
    from headwater.spec.loader import _pick_pipeline

    component = _pick_pipeline(PIPELINE, None)
    out = headwater.compile(component, tmp_path / "p.yaml")
    assert load_pipeline(out).name == component.name


def _read_only_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    return folder


@pytest.mark.parametrize(
    "target",
    [
        pytest.param(lambda tmp: tmp, id="a-directory"),
        pytest.param(lambda tmp: tmp / "dir.yaml", id="a-directory-named-yaml"),
        pytest.param(lambda tmp: Path("/sys/headwater-test.yaml"), id="sysfs"),
        pytest.param(
            lambda tmp: _read_only_dir(tmp) / "out.yaml",
            id="read-only-dir",
            marks=pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere"),
        ),
        pytest.param(lambda tmp: tmp / "out.txt", id="suffix"),
        pytest.param(lambda tmp: tmp / "file" / "out.yaml", id="parent-is-a-file"),
    ],
)
def test_unwritable_output_is_one_clear_error(tmp_path: Path, target: object) -> None:
    (tmp_path / "dir.yaml").mkdir()
    (tmp_path / "file").write_text("")
    out = target(tmp_path)  # type: ignore[operator]
    with pytest.raises(InvalidArgumentError) as caught:
        headwater.compile(PIPELINE, out)
    assert "\n" not in str(caught.value)
    assert str(out) in str(caught.value)


def test_existing_output_is_kept_when_writing_fails(tmp_path: Path) -> None:
    out = tmp_path / "out.yaml"
    out.write_text("old")
    with pytest.raises(PipelineLoadError):
        headwater.compile(tmp_path / "missing.py", out)
    assert out.read_text() == "old"


@pytest.mark.parametrize("source", ["missing.py", "pipeline.yaml"], ids=["missing", "not-py"])
def test_compile_needs_a_python_file(tmp_path: Path, source: str) -> None:
    (tmp_path / "pipeline.yaml").write_text("{}")
    with pytest.raises(PipelineLoadError):
        headwater.compile(tmp_path / source, tmp_path / "out.yaml")
