"""What the CLI prints for people: a run on a real terminal (a pseudo-terminal), `runs show`
and `lineage` text, each through the real `headwater` command in a subprocess."""

from __future__ import annotations

import re
import shlex

import pytest
from cli_harness import Cli, pipeline, run_in_pty

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
