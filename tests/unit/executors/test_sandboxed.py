"""The executor's side of a sandboxed task: what it may read, and refusing an input of a
team server's run that names a file outside the run's own artifacts."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_stage_remote import launch_with

from headwater.errors import SandboxError
from headwater.executors.sandboxed import check_inputs, sandbox_spec
from headwater.sandbox import SandboxPolicy
from headwater.spec.placeholders import PlaceholderContext


def _confined(tmp_path: Path, source: Path, **policy: object) -> object:
    root = tmp_path / "artifacts" / "team-b"
    launch = launch_with(tmp_path, str(source), str(root / "p" / "r" / "t" / "dst"))
    context = PlaceholderContext(
        executor_input=launch.executor_input,
        pipeline_root=str(root),
        workspace_path=str(tmp_path / "runs" / "r" / "workspace"),
    )
    launch = dataclasses.replace(
        launch,
        placeholders=context,
        workdir=tmp_path / "runs" / "r" / "tasks" / "t",
        sandbox=SandboxPolicy(confined=True, **policy),  # type: ignore[arg-type]
    )
    return launch


def test_an_input_outside_the_runs_root_is_refused_naming_it_and_the_fix(tmp_path: Path) -> None:
    other = tmp_path / "artifacts" / "team-a" / "p" / "r0" / "t" / "data"
    other.parent.mkdir(parents=True)
    other.write_text("team-a's")
    launch = _confined(tmp_path, other)
    with pytest.raises(SandboxError) as info:
        check_inputs(launch, launch.executor_input)  # type: ignore[attr-defined]
    message = str(info.value)
    assert f"input artifact 'src' is {other}, outside this run's pipeline root" in message
    assert "--sandbox-read PATH" in message and "\n" not in message


def test_a_link_inside_the_root_to_a_file_outside_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "secret"
    outside.write_text("x")
    link = tmp_path / "artifacts" / "team-b" / "p" / "r0" / "t" / "data"
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)
    launch = _confined(tmp_path, link)
    with pytest.raises(SandboxError):
        check_inputs(launch, launch.executor_input)  # type: ignore[attr-defined]


def test_inputs_under_the_root_or_readable_paths_are_shown_read_only(tmp_path: Path) -> None:
    shared = tmp_path / "shared" / "data.csv"
    shared.parent.mkdir()
    shared.write_text("a,b")
    launch = _confined(tmp_path, shared, readable=(str(shared.parent),))
    payload = {"dirs": [str(tmp_path / "artifacts" / "team-b" / "p" / "r" / "t")]}
    spec = sandbox_spec(launch, payload, launch.executor_input)  # type: ignore[arg-type]
    assert spec["read"] == [str(shared)]
    assert str(launch.workdir) in spec["write"]  # type: ignore[attr-defined]
    assert spec["readable"] == [str(shared.parent)] and spec["uid"] == 65534
