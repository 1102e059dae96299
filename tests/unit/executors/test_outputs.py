"""Settling a task's output artifacts: the URIs and paths a component chose, as KFP honours them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from headwater.executors.outputs import output_plan, settle_outputs, within


@pytest.mark.parametrize(
    ("uri", "root", "inside"),
    [
        ("/r/p/run/t/x", "/r", True),
        ("/r", "/r", False),
        ("/r2/x", "/r", False),
        ("/r/../etc/x", "/r", False),
        ("s3://b/root/p/x", "s3://b/root", True),
        ("s3://b/root2/x", "s3://b/root", False),
        ("s3://b/root/../x", "s3://b/root", False),
        ("s3://b/root/x", "/r", False),
        ("/r/x", "s3://b/root", False),
        ("/r/x", "", False),
    ],
    ids=repr,
)
def test_within(uri: str, root: str, inside: bool) -> None:
    assert within(uri, root) is inside


def executor_input(tmp_path: Path, uris: dict[str, str]) -> dict[str, Any]:
    return {
        "inputs": {},
        "outputs": {
            "parameters": {},
            "artifacts": {
                name: {"artifacts": [{"name": name, "uri": uri, "metadata": {}}]}
                for name, uri in uris.items()
            },
            "outputFile": str(tmp_path / "work" / "executor_output.json"),
        },
    }


def write_kfp_output(plan: dict[str, Any], artifacts: dict[str, dict[str, Any]]) -> None:
    """What KFP's executor writes: one runtime artifact per output."""
    path = Path(plan["seen_output_file"])
    path.parent.mkdir(parents=True, exist_ok=True)
    out = {
        name: {"artifacts": [{"name": name, "metadata": {}, **a}]} for name, a in artifacts.items()
    }
    path.write_text(json.dumps({"artifacts": out}))


def settled_uris(plan: dict[str, Any]) -> dict[str, str]:
    written = json.loads(Path(plan["output_file"]).read_text())
    return {n: a["artifacts"][0]["uri"] for n, a in written["artifacts"].items()}


def test_python_component_sees_its_output_file_in_the_task_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    given = executor_input(tmp_path, {"model": f"{root}/p/run/train/model"})

    plan, seen = output_plan(given, given, str(root), python=True)

    assert plan is not None
    assert seen["outputs"]["outputFile"] == f"{root}/p/run/train/executor_output.json"
    # The engine's own copy is unchanged.
    assert given["outputs"]["outputFile"] == str(tmp_path / "work" / "executor_output.json")
    assert output_plan(executor_input(tmp_path, {}), given, str(root), python=True)[0] is None


def test_local_root_honours_uris_inside_it_and_copies_the_rest_in(tmp_path: Path) -> None:
    root = tmp_path / "root"
    task = root / "p" / "run" / "train"
    uris = {n: str(task / n) for n in ("chosen", "custom", "outside", "plain")}
    plan, _ = output_plan(*[executor_input(tmp_path, uris)] * 2, str(root), python=True)
    assert plan is not None
    task.mkdir(parents=True)
    (task / "model").write_text("chosen")
    (tmp_path / "custom-file").write_text("custom")
    (tmp_path / "elsewhere").write_text("outside")
    (task / "plain").write_text("plain")
    write_kfp_output(
        plan,
        {
            "chosen": {"uri": str(task / "model")},  # dsl.get_uri("model")
            "custom": {"uri": uris["custom"], "custom_path": str(tmp_path / "custom-file")},
            "outside": {"uri": str(tmp_path / "elsewhere")},
            "plain": {"uri": uris["plain"]},
        },
    )
    (tmp_path / "work").mkdir()

    copies = settle_outputs(plan)

    assert settled_uris(plan) == {**uris, "chosen": str(task / "model")}
    assert sorted(copies) == sorted(
        [
            (str(tmp_path / "custom-file"), uris["custom"]),
            (str(tmp_path / "elsewhere"), uris["outside"]),
        ]
    )
    assert not Path(plan["seen_output_file"]).exists()


def test_remote_root_maps_the_local_task_root_onto_the_remote_one(tmp_path: Path) -> None:
    remote = "s3://b/root/p/run/train"
    staged = tmp_path / "work" / "artifacts" / "outputs"
    given = executor_input(tmp_path, {"Output": f"{remote}/Output", "other": f"{remote}/other"})
    seen = executor_input(tmp_path, {"Output": f"{staged}/Output", "other": f"{staged}/other"})
    plan, _ = output_plan(given, seen, "s3://b/root", python=True)
    assert plan is not None
    staged.mkdir(parents=True)
    (staged / "model").write_text("m")
    (staged / "other").write_text("o")
    write_kfp_output(plan, {"Output": {"uri": str(staged / "model")}})

    copies = settle_outputs(plan)

    assert settled_uris(plan) == {"Output": f"{remote}/model"}
    assert sorted(copies) == [
        (str(staged / "model"), f"{remote}/model"),
        (str(staged / "other"), f"{remote}/other"),
    ]
