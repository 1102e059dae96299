"""The CLI's start: a parser built for the one command given."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from headwater.cli import main as cli

COMMANDS = (
    "{run,endpoints,runs,artifacts,lineage,cache,models,secrets,serve,tensorboard,ui,compile}"
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
