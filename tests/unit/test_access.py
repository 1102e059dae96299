"""The rules of a team server's principals (`headwater.access`), and the audit log's rotation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from headwater.access import ANONYMOUS, Principal, check_namespace, hash_token, new_token
from headwater.errors import InvalidArgumentError, PermissionDeniedError
from headwater.ui.audit import AuditLog, read_audit

ALICE = Principal.of("token", "alice", "editor", ["team-a", "team-c"])
VERA = Principal.of("token", "vera", "viewer", ["team-a"])
ROOT = Principal.of("token", "root", "admin", [])


def test_tokens_are_random_and_stored_as_their_sha256() -> None:
    one, two = new_token(), new_token()
    assert one != two and one.startswith("hwt_") and len(one) > 40
    assert hash_token(one) == hash_token(one) != hash_token(two)
    assert len(hash_token(one)) == 64 and one not in hash_token(one)


def test_namespaces_isolate_and_roles_limit_changes() -> None:
    ALICE.check("team-a", write=True, what="run 1")
    with pytest.raises(PermissionDeniedError, match=r"namespace .team-b.*token alice"):
        ALICE.check("team-b", what="run 2")
    VERA.check("team-a", what="run 1")
    with pytest.raises(PermissionDeniedError, match="viewer"):
        VERA.check("team-a", write=True, what="run 1")
    ROOT.check("anything", write=True)
    ANONYMOUS.check("anything", write=True)  # a server without principals
    with pytest.raises(PermissionDeniedError, match="only an admin"):
        ALICE.check_admin("change the shared pipeline p")


def test_lists_show_the_namespaces_held_and_new_records_need_one() -> None:
    assert ALICE.list_namespaces() == ["team-a", "team-c"]
    assert ALICE.list_namespaces("team-c") == ["team-c"]
    with pytest.raises(PermissionDeniedError):
        ALICE.list_namespaces("team-b")
    assert ROOT.list_namespaces() is None and ANONYMOUS.list_namespaces() is None
    assert VERA.default_namespace("", "A run") == "team-a"  # the only one held
    assert ALICE.default_namespace("team-c", "A run") == "team-c"
    with pytest.raises(InvalidArgumentError, match=r"empty namespace.*team-a, team-c"):
        ALICE.default_namespace("", "A run")
    assert ANONYMOUS.default_namespace("", "A run") == ""
    assert check_namespace("team-a") == "team-a"
    with pytest.raises(InvalidArgumentError, match="namespace name"):
        check_namespace("Team A")


def test_the_audit_log_rotates_and_reads_back_oldest_first(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", max_bytes=2048, backups=3)
    for i in range(120):
        log.write({"n": i, "principal": "alice", "pad": "x" * 40})
    log.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2", "audit.jsonl.3"]
    assert all(p.stat().st_size <= 2048 for p in tmp_path.iterdir())
    kept = [r["n"] for r in read_audit(tmp_path / "audit.jsonl")]
    assert kept == list(range(kept[0], 120)) and kept[0] > 0  # the oldest rotated away
    (tmp_path / "audit.jsonl").write_text('{"n": 120}\n{"cut sho')  # a crash mid-line
    assert [r["n"] for r in read_audit(tmp_path / "audit.jsonl")][-1] == 120
    with pytest.raises(InvalidArgumentError, match="no audit log"):
        list(read_audit(tmp_path / "elsewhere.jsonl"))
    assert json.loads((tmp_path / "audit.jsonl.1").read_text().splitlines()[0])["principal"]
