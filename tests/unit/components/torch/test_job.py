"""The PyTorchJob launcher's decisions without processes: where replicas go, how input paths
are rewritten to their copies on a worker, and which arguments are refused before anything
starts (the processes themselves: tests/integration/test_torch_job.py)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest

from headwater.components.torch._dask_job import place
from headwater.components.torch._rendezvous import rendezvous_env
from headwater.components.torch._replica import covered, moved, moves_for, pack
from headwater.components.torch.job import launch
from headwater.errors import InvalidArgumentError, ResourceError, UserError

A, B, C = "tcp://10.0.0.1:4000", "tcp://10.0.0.2:4000", "tcp://10.0.0.3:4000"


@pytest.fixture
def workers() -> dict[str, dict[str, Any]]:
    """Three workers as `scheduler_info()` lists them: A and C with a GPU, B without."""
    return {
        A: {"resources": {"GPU": 1, "CPU": 4}, "nthreads": 4},
        B: {"resources": {"CPU": 4}, "nthreads": 4},
        C: {"resources": {"GPU": 1, "CPU": 4}, "nthreads": 4},
    }


@pytest.mark.parametrize(
    ("own", "busy", "expected"),
    [
        (None, {}, ([A, B], False)),
        (None, {A: 2}, ([B, C], False)),
        (C, {}, ([C, A], True)),
        ("tcp://elsewhere:1", {}, ([A, B], False)),
    ],
    ids=["least-busy-first", "busy-last", "own-worker-is-rank-0", "own-worker-not-in-cluster"],
)
def test_placement_prefers_the_callers_worker_then_idle_ones(
    workers: dict[str, dict[str, Any]], own: str | None, busy: dict[str, int], expected: Any
) -> None:
    assert place(workers, busy, 2, {}, own) == expected


def test_placement_keeps_to_workers_with_the_resources(workers: dict[str, Any]) -> None:
    assert place(workers, {}, 2, {"GPU": 1}, B) == ([A, C], False)
    with pytest.raises(ResourceError) as caught:
        place(workers, {}, 3, {"GPU": 1}, None)
    assert str(caught.value) == (
        f"pytorch_job needs 3 workers with {{'GPU': 1}} each; the cluster has 2 such workers "
        f"({A}, {C}); add workers, or lower replicas"
    )


def test_paths_in_arguments_move_to_the_copies(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    moves = moves_for(["data", str(tmp_path / "code.py")], "/scratch")
    kwargs = {
        "spec": {"data_path": "data/train.npz", "lr": 0.1, "names": ["./data", "database"]},
        "code": str(tmp_path / "code.py"),
        "absolute": str(tmp_path / "data"),
    }
    assert moved(kwargs, moves) == {
        "spec": {
            "data_path": "/scratch/0/data/train.npz",
            "lr": 0.1,
            "names": ["/scratch/0/data", "database"],
        },
        "code": "/scratch/1/code.py",
        "absolute": "/scratch/0/data",
    }
    assert covered("data/model.py", ["data"]) and not covered("model.py", ["data"])


def test_packed_files_unpack_under_their_index(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.csv").write_text("1,2\n")
    (tmp_path / "code.py").write_text("def f(): ...\n")
    blob = pack([str(tmp_path / "data"), str(tmp_path / "code.py")])
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        assert {"0/data/x.csv", "1/code.py"} <= set(tar.getnames())


def test_the_replica_environment_is_the_operators() -> None:
    env = rendezvous_env(1, 3, "10.0.0.1", 29500, 2)
    assert {k: env[k] for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")} == {
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
        "WORLD_SIZE": "3",
        "RANK": "1",
    }
    assert env["PYTHONUNBUFFERED"] == "1" and env["OMP_NUM_THREADS"] == "2"


@pytest.mark.parametrize(
    ("target", "kwargs", "options", "error", "match"),
    [
        ("train", {}, {}, InvalidArgumentError, "names no function"),
        ("missing.py:train", {}, {}, InvalidArgumentError, "does not exist"),
        ("pkg.mod:train", {"x": object()}, {}, InvalidArgumentError, "JSON-serialisable"),
        ("pkg.mod:train", {}, {"threads_per_replica": 0}, InvalidArgumentError, ">= 1"),
        ("pkg.mod:train", {}, {"files": ["no/such/dir"]}, UserError, "do not exist"),
    ],
    ids=["no-function", "no-file", "kwargs-not-json", "no-threads", "missing-input"],
)
def test_bad_arguments_are_refused_before_anything_starts(
    target: str, kwargs: dict[str, Any], options: dict[str, Any], error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        launch(target, kwargs, 2, **options)
