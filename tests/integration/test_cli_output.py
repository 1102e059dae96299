"""What the CLI prints for people: a run on a real terminal (a pseudo-terminal), `runs show`
and `lineage` text, each through the real `headwater` command in a subprocess."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from cli_harness import Cli, pipeline, run_failed, run_in_pty, run_ok

pytestmark = pytest.mark.integration

_ESCAPES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def screen_lines(output: str) -> list[str]:
    """The lines a person sees in terminal `output`: each status-line redraw ("\\r") resolved
    to what stays on screen, escape codes removed."""
    text = _ESCAPES.sub("", output).replace("\r\n", "\n")
    return [line.rsplit("\r", 1)[-1] for line in text.split("\n")]


@pytest.mark.timeout(180)
def test_a_terminal_shows_every_task_that_ran_and_the_model_registered(headwater: Cli) -> None:
    code, output = run_in_pty(headwater, "run", pipeline("models_register"), timeout=120)
    lines = screen_lines(output)
    assert code == 0, lines
    for task in ("train", "evaluate", "register-model"):
        assert any(re.fullmatch(rf"  succeeded {task} in [0-9.]+s", x) for x in lines), lines
    # The model is named with a next step that works as printed: this home is not the default.
    home = shlex.quote(str(headwater.home))
    serve = f"HEADWATER_HOME={home} headwater serve toy:1"
    assert f"headwater: registered model toy:1; serve it with: {serve}" in lines, lines


def test_runs_show_prints_the_names_written_and_paths_that_differ(headwater: Cli) -> None:
    run_id = headwater.run_ok("show_names", params={"cpus": "1"})["run_id"]
    text = headwater("runs", "show", run_id).stdout
    assert "pipelinechannel--" not in text, text
    root = f"{headwater.home}/artifacts/show-names/{run_id}/"
    assert f"artifacts  {root}" in text, text
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    # Two tasks whose artifact paths differ only in their last folders: both shown whole.
    assert "data=make/data" in rows["make"] and "data=make-2/data" in rows["make-2"], text
    assert {'cpus="1"', 'label="x"', "data=make-2/data"} <= set(rows["use"].split()), text
    assert rows["use"].rstrip().endswith(" use/log.txt"), text
    # Each relative path is pasteable after the root it is relative to.
    assert (headwater.home / "artifacts" / "show-names" / run_id / "make-2" / "data").is_file()


def test_lineage_takes_a_registered_model_and_prints_task_parameters(headwater: Cli) -> None:
    run_id = headwater.run_ok("models_register", params={"seed": 7})["run_id"]
    for spec in ("toy:1", "toy", "toy@production"):
        made = headwater("lineage", spec, "--upstream")
        assert made.returncode == 0, made.describe()
        assert f"task e:1 train (SUCCEEDED) run {run_id} params seed=7" in made.stdout
        assert "[model toy v1, production]" in made.stdout
    missing = headwater("lineage", "toy:2")
    assert missing.returncode == 2, missing.describe()
    assert missing.stderr.strip() == (
        "headwater: error: model 'toy' has no version 2 (registered versions: 1)"
    )


def test_a_big_loop_is_counted_not_listed_and_its_failures_come_first(headwater: Cli) -> None:
    made = headwater("run", pipeline("big_loop"), "--param", "n=60", "--param", "fail_from=40")
    assert made.returncode == 1, made.describe()
    lines = made.stderr.splitlines()
    # The loop's first iterations are listed as any task; the rest are counted.
    started = [x for x in lines if re.fullmatch(r"  started   step\[\d+\]", x)]
    assert len(started) == 5, lines
    failed = [x for x in lines if x.startswith("  FAILED step[")]
    assert failed, lines  # every failure is shown, listed or not
    assert all("step" in x and "fails until" in x for x in failed), failed
    counted = [x for x in lines if x.startswith("  loop      step[*]: ")]
    assert counted and "(past its first 5)" in counted[-1], lines
    assert len(lines) < 40 + 2 * len(failed), lines
    found = re.search(r"run ([0-9a-f-]{36}) FAILED", made.stderr)
    assert found, lines
    run_id = found.group(1)

    text = headwater("runs", "show", run_id).stdout
    rows = [x for x in text.splitlines() if x.startswith("step")]
    folded = [x for x in rows if x.startswith("step[*]")]
    assert len(folded) == 1, text
    assert re.search(r"step\[\*\]\s+60 tasks: \d+ FAILED, ", folded[0]), folded
    failed_rows = rows[: rows.index(folded[0])]
    assert failed_rows and all(x.split()[1] == "FAILED" for x in failed_rows), text
    home = shlex.quote(str(headwater.home))
    assert f"every task: HEADWATER_HOME={home} headwater runs show {run_id} --all)" in text
    every = headwater("runs", "show", run_id, "--all").stdout
    assert len([x for x in every.splitlines() if re.match(r"step\[\d+\] ", x)]) == 60, every


def test_a_resumed_big_loop_reruns_only_what_had_not_succeeded(
    headwater: Cli, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    params = {"n": 150, "fail_from": 100, "gate": str(gate)}
    first = run_failed(headwater.run("big_loop", params=params))
    succeeded = {t["name"] for t in first["tasks"] if t["state"] == "SUCCEEDED"}
    assert 100 <= len(succeeded) < 152, len(succeeded)  # make-items, steps 0-99, some others
    gate.touch()
    resumed = run_ok(headwater("run", "--resume", first["run_id"], "--json"))
    assert resumed["outputs"] == {"Output": sum(range(1, 151))}
    reused = {t["name"] for t in resumed["tasks"] if t["cached"]}
    ran = {t["name"] for t in resumed["tasks"] if not t["cached"]}
    assert reused == succeeded and len(ran) == 152 - len(succeeded), (len(reused), len(ran))
