"""Tests for the in-task side: env from files, the pod record, CreatePVC and DeletePVC."""

import json
import os
from pathlib import Path
from typing import Any

import pytest

from headwater.errors import PlatformError
from headwater.platform.apply import apply_platform, secret_masker


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A private copy of the environment for apply_platform to write into."""
    env = dict(os.environ)
    monkeypatch.setattr(os, "environ", env)
    return env


def _payload(tmp_path: Path, **plan: Any) -> dict[str, Any]:
    return {"workdir": str(tmp_path), "platform": {"env": {}, "env_files": [], **plan}}


def test_values_are_read_in_the_task_and_an_optional_missing_one_is_skipped(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    (tmp_path / "pw").write_bytes(b"hunter2\xff")  # not UTF-8: kept byte for byte
    files = [
        {"env": "PW", "path": str(tmp_path / "pw"), "optional": False, "what": "key 'pw'"},
        {"env": "OPT", "path": str(tmp_path / "none"), "optional": True, "what": "key 'o'"},
    ]
    pod = {"name": "run-1", "labels": {"team": "ml"}}
    done = apply_platform(_payload(tmp_path, env={"POD": "run-1"}, env_files=files, pod=pod))
    assert done is False
    assert environ["PW"].encode("utf-8", "surrogateescape") == b"hunter2\xff"
    assert environ["POD"] == "run-1" and "OPT" not in environ
    assert json.loads((tmp_path / "pod.json").read_text()) == pod


def test_a_required_value_gone_since_planning_fails_naming_it(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    files = [{"env": "PW", "path": str(tmp_path / "gone"), "optional": False, "what": "key 'pw'"}]
    with pytest.raises(PlatformError, match=r"cannot read key 'pw' for \$PW"):
        apply_platform(_payload(tmp_path, env_files=files))
    assert "PW" not in environ


def test_create_pvc_writes_the_name_output_and_delete_pvc_removes_the_volume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "volumes"
    out_file = tmp_path / "outputs" / "name"
    payload = _payload(tmp_path, operation={"kind": "create", "root": str(root), "name": "v-1"})
    payload["executor_input"] = {"outputs": {"parameters": {"name": {"outputFile": str(out_file)}}}}
    assert apply_platform(payload) is True
    assert out_file.read_text() == "v-1" and (root / "v-1").is_dir()
    delete = _payload(tmp_path, operation={"kind": "delete", "root": str(root), "name": "v-1"})
    assert apply_platform(delete) is True
    assert not (root / "v-1").exists()
    assert "created volume 'v-1'" in capsys.readouterr().out


def test_the_masker_has_every_secret_value_given_as_a_key_or_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, api = tmp_path / "secrets" / "db", tmp_path / "secrets" / "api"
    db.mkdir(parents=True)
    api.mkdir()
    (db / "password").write_bytes(b"db-password-1")
    (db / "pin").write_bytes(b"123")
    (api / "token").write_bytes(b"api-token-2")
    (api / "unused").write_bytes(b"not-given-3")

    masker = secret_masker([str(db), str(api / "token"), str(api / "gone")], warn=True)

    assert masker is not None
    assert masker.mask("db-password-1 api-token-2 not-given-3 123") == "*** *** not-given-3 123"
    warning = capsys.readouterr().err
    assert "key 'pin' of secret 'db' is shorter than 4 characters" in warning
    assert "123" not in warning
    assert secret_masker([]) is None and secret_masker([str(db / "pin")]) is None
