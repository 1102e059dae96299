"""The CLI's start: a parser built for the one command given, and the fork server started
ahead of a local run and never left behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from headwater.cli import main as cli
from headwater.executors import prestart

COMMANDS = (
    "{run,endpoints,runs,artifacts,lineage,cache,models,secrets,"
    "serve,server,tensorboard,ui,compile}"
)


@pytest.fixture(autouse=True)
def fixed_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")  # argparse wraps its help to the terminal


def parsed(
    parser_command: str | None, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[object, str, str]:
    """What parsing `argv` with `build_parser(parser_command)` exits with and prints."""
    with pytest.raises(SystemExit) as exited:
        cli.build_parser(parser_command).parse_args(argv)
    printed = capsys.readouterr()
    return exited.value.code, printed.out, printed.err


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--help"],
        ["run", "p.yaml", "--max-parallel", "many"],
        ["run", "p.yaml", "--bogus"],
        ["compile", "--help"],
        ["compile", "p.py"],
    ],
    ids=["run-help", "run-bad-value", "run-unknown-option", "compile-help", "compile-missing"],
)
def test_the_parser_of_one_command_says_what_the_whole_parser_says(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    whole = parsed(None, argv, capsys)
    one = parsed(argv[0], argv, capsys)

    assert one == whole
    assert whole[1] or whole[2]


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == cli.EXIT_OK

    printed = capsys.readouterr().out
    assert printed.startswith("usage: headwater [-h] [--metadata-url URL]")
    assert COMMANDS in printed


def test_run_help_is_the_help_of_the_whole_parser(capsys: pytest.CaptureFixture[str]) -> None:
    whole = parsed(None, ["run", "--help"], capsys)[1]

    assert cli.main(["run", "--help"]) == cli.EXIT_OK
    assert capsys.readouterr().out == whole
    assert whole.startswith("usage: headwater run [-h] [--resume RUN_ID]")


def test_the_run_parser_imports_no_other_command() -> None:
    script = (
        "import json, sys\n"
        "from headwater.cli.main import build_parser\n"
        "build_parser('run').parse_args(['run', 'p.yaml'])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith("
        "('headwater.cli.', 'headwater.serving')))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["headwater.cli.main"]


@pytest.mark.parametrize(
    ("argv", "starts"),
    [
        (["run", "p.yaml"], True),
        (["run", "p.yaml", "--executor", "local", "--no-cache"], True),
        (["run", "p.yaml", "--executor=local"], True),
        (["run", "--resume", "abc"], True),
        (["run", "p.yaml", "--executor", "dask"], False),
        (["run", "p.yaml", "--executor=dask"], False),
        (["run", "p.yaml", "--exec", "dask"], False),
        (["run", "p.yaml", "--executor"], False),
        (["run", "--help"], False),
        (["run", "p.yaml", "-h"], False),
        (["runs", "list"], False),
        (["--metadata-url", "sqlite://", "run", "p.yaml"], False),
        ([], False),
    ],
    ids=[
        "run",
        "executor-local",
        "executor-equals-local",
        "resume",
        "executor-dask",
        "executor-equals-dask",
        "abbreviated-executor",
        "executor-without-value",
        "run-help",
        "run-h",
        "another-command",
        "option-before-run",
        "nothing",
    ],
)
def test_the_fork_server_is_started_ahead_only_for_a_local_run(
    argv: list[str], starts: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str] = []
    monkeypatch.setattr(prestart, "PrestartedServer", lambda **_: made.append("server") or made[-1])

    assert (cli._prestart(argv) is not None) is starts
    assert len(made) == int(starts)


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "{tmp}/missing.yaml"],
        ["run", "{tmp}/bad.yaml"],
        ["run", "{tmp}/bad.yaml", "--max-parallel", "many"],
        ["run", "{tmp}/bad.yaml", "--scheduler", "tcp://nowhere:1"],
        ["run", "{tmp}/bad.yaml", "--sandbox", "--sandbox-read", "{tmp}/nowhere"],
        ["run", "{tmp}/bad.yaml", "--sandbox-read", "{tmp}"],
    ],
    ids=["missing-file", "bad-yaml", "usage-error", "bad-options", "no-such-read", "read-alone"],
)
def test_bad_input_leaves_no_fork_server_behind(
    argv: list[str],
    started: list[subprocess.Popen[bytes]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HEADWATER_HOME", str(tmp_path / "home"))
    (tmp_path / "bad.yaml").write_text("pipelineInfo: [\n")

    assert cli.main([arg.format(tmp=tmp_path) for arg in argv]) == cli.EXIT_USAGE

    assert len(started) == 1
    assert started[0].returncode is not None, "the fork server was not reaped"
    assert started[0].stdin is not None and started[0].stdin.closed
