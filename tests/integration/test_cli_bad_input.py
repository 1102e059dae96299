"""Bad input to the CLI is one line on stderr and exit 2; nothing ever ends in a traceback.

Each case runs the real `headwater` in a subprocess, with HEADWATER_HOME in tmp_path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_harness import Cli, CliResult, one_line, pipeline, run_ok

pytestmark = pytest.mark.integration

HUGE = "123456789012345678901234567890"  # 30 digits: beyond any 64-bit id
ROOT = os.geteuid() == 0


@pytest.fixture
def recorded(headwater: Cli) -> Cli:
    """The CLI with one successful run of storage_lineage in its store."""
    run_ok(headwater.run("storage_lineage"))
    return headwater


# --- arguments out of range or not among the choices -----------------------------------------


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["lineage", "1", "--depth", "-5"], "depth"),
        (["runs", "list", "--state", "BOGUS"], "BOGUS"),
        (["runs", "list", "--limit", "-1"], "limit"),
        (["runs", "list", "--limit", HUGE], "limit"),
        (["runs", "list", "--offset", "-2"], "offset"),
        (["artifacts", "show", HUGE], HUGE),
        (["lineage", HUGE], HUGE),
        (["lineage", f"e:{HUGE}"], HUGE),
        (["artifacts", "show", "999"], "999"),
        (["runs", "show", "no-such-run"], "no-such-run"),
    ],
    ids=[
        "depth-negative",
        "state-unknown",
        "limit-negative",
        "limit-huge",
        "offset-negative",
        "artifact-id-30-digits",
        "lineage-id-30-digits",
        "lineage-execution-30-digits",
        "artifact-unknown",
        "run-unknown",
    ],
)
def test_bad_argument_is_one_line(recorded: Cli, args: list[str], names: str) -> None:
    assert names in one_line(recorded(*args))


def test_repeated_param_is_one_line(headwater: Cli) -> None:
    result = headwater("run", pipeline("storage_lineage"), "--param", "rows=1", "--param", "rows=2")
    line = one_line(result)
    assert "rows" in line and "twice" in line
    assert headwater.runs() == []


# --- stores that do not exist ------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [["runs", "list"], ["runs", "show", "x"], ["lineage", "1"], ["cache", "clear"],
     ["run", pipeline("storage_lineage")]],
    ids=["runs-list", "runs-show", "lineage", "cache-clear", "run"],
)  # fmt: skip
def test_a_metadata_url_in_a_missing_directory_is_an_error(
    headwater: Cli, tmp_path: Path, command: list[str]
) -> None:
    missing = tmp_path / "no" / "such" / "dir"
    result = headwater("--metadata-url", f"sqlite:///{missing / 'md.db'}", *command)
    assert "does not exist" in one_line(result)
    assert not (tmp_path / "no").exists()


def test_a_missing_file_in_an_existing_directory_is_an_error_to_readers(
    headwater: Cli, tmp_path: Path
) -> None:
    db = tmp_path / "typo.db"
    assert "no metadata store" in one_line(headwater("--metadata-url", f"sqlite:///{db}",
                                                     "runs", "list"))  # fmt: skip
    assert not db.exists()


def test_the_default_store_is_created_only_by_a_run(headwater: Cli) -> None:
    assert headwater.runs() == []
    assert headwater("runs", "list").stderr.strip() == "no runs"
    assert not headwater.home.exists()  # reading created nothing
    run_ok(headwater.run("storage_lineage"))
    assert (headwater.home / "metadata.db").is_file()


# --- unwritable places -------------------------------------------------------------------------


def _directory(tmp_path: Path) -> Path:
    folder = tmp_path / "out.yaml"  # a directory with the name of the file to write
    folder.mkdir()
    return folder


def _sysfs(tmp_path: Path) -> Path:
    return Path("/sys/headwater-test-output.yaml")


def _read_only_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    return folder / "out.yaml"


@pytest.mark.parametrize(
    "target",
    [
        pytest.param(_directory, id="a-directory"),
        pytest.param(_sysfs, id="sysfs"),  # unwritable even to root
        pytest.param(
            _read_only_dir,
            id="read-only-directory",
            marks=pytest.mark.skipif(ROOT, reason="root writes anywhere"),
        ),
    ],
)
def test_compile_onto_an_unwritable_output_is_one_line(
    headwater: Cli, tmp_path: Path, target: object
) -> None:
    out = target(tmp_path)  # type: ignore[operator]
    line = one_line(headwater("compile", pipeline("storage_lineage"), "-o", str(out)))
    assert str(out) in line


def test_compile_of_a_file_that_exits_is_one_line(headwater: Cli, tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text("import sys\nsys.exit(3)\n")
    line = one_line(headwater("compile", str(script), "-o", str(tmp_path / "out.yaml")))
    assert "sys.exit(3)" in line
    assert not (tmp_path / "out.yaml").exists()


def test_compile_writes_the_ir(headwater: Cli, tmp_path: Path) -> None:
    out = tmp_path / "ir" / "lineage.yaml"
    result = headwater("compile", pipeline("storage_lineage"), "-o", str(out))
    assert result.returncode == 0, result.describe()
    run_ok(headwater("run", str(out), "--json"))


@pytest.mark.parametrize(
    "how",
    [
        "sysfs",  # a symlink into /sys: unwritable even to root
        pytest.param("chmod", marks=pytest.mark.skipif(ROOT, reason="root writes anywhere")),
    ],
)
def test_an_unwritable_runs_folder_is_one_line_and_records_nothing(
    headwater: Cli, how: str
) -> None:
    headwater.home.mkdir()
    runs = headwater.home / "runs"
    if how == "sysfs":
        runs.symlink_to("/sys")
    else:
        runs.mkdir()
        runs.chmod(0o555)
    line = one_line(headwater.run("storage_lineage"))
    assert "runs" in line
    assert not (headwater.home / "metadata.db").exists()  # nothing was recorded
    assert headwater.runs() == []


# --- a reader that goes away, Ctrl-C, and our own bugs ---------------------------------------


@pytest.mark.parametrize(
    "command", [["runs", "list"], ["runs", "show", "RUN"], ["runs", "list", "--json"]]
)
def test_a_closed_stdout_is_silent(recorded: Cli, command: list[str]) -> None:
    [run] = recorded.runs()
    argv = recorded.argv(*[run["run_id"] if a == "RUN" else a for a in command])
    read_end, write_end = os.pipe()
    os.close(read_end)  # as `| head -3` once it has its lines: every write fails with EPIPE
    try:
        done = subprocess.run(
            argv, stdout=write_end, stderr=subprocess.PIPE, text=True, env=recorded.env,
            cwd=recorded.cwd, timeout=60, check=False,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == 141  # as the shell reports a command killed by SIGPIPE


def _with_fault(cli: Cli, raise_statement: str, *args: str) -> CliResult:
    """Run the CLI in a real process whose `runs` command raises instead of listing."""
    script = textwrap.dedent(
        f"""
        import sys
        from headwater.cli import inspect, main
        from headwater.errors import HeadwaterSystemError

        def fault(args):
            {raise_statement}

        inspect.cmd_runs = fault
        sys.exit(main.main(sys.argv[1:]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, env=cli.env,
        cwd=cli.cwd, timeout=60, check=False,
    )  # fmt: skip
    return CliResult.of(done.returncode, done.stdout, done.stderr)


def test_an_unexpected_exception_is_one_line_and_its_traceback_is_saved(headwater: Cli) -> None:
    headwater.home.mkdir()
    result = _with_fault(headwater, "raise RuntimeError('boom\\nsecond line')", "runs", "list")
    line = one_line(result, code=1)
    saved = headwater.home / "last-error.txt"
    assert "RuntimeError: boom" in line and str(saved) in line
    text = saved.read_text()
    assert "Traceback" in text and "def fault" not in text and "in fault" in text


@pytest.mark.parametrize(
    ("statement", "code", "shown"),
    [
        ("raise KeyboardInterrupt", 130, "interrupted"),
        ("raise HeadwaterSystemError('disk on fire')", 1, "disk on fire"),
    ],
    ids=["ctrl-c", "system-error"],
)
def test_interrupts_and_system_errors_are_one_line(
    headwater: Cli, statement: str, code: int, shown: str
) -> None:
    assert shown in one_line(_with_fault(headwater, statement, "runs", "list"), code=code)
