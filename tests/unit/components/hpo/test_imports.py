"""The tuning modules import neither Ax nor KFP until a function needs them."""

from __future__ import annotations

import json
import subprocess
import sys


def test_importing_the_functions_imports_no_heavy_library() -> None:
    script = (
        "import json, sys\n"
        "import headwater.components.hpo\n"
        "import headwater.components.hpo.experiment, headwater.components.hpo.search_space\n"
        "heavy = ('ax', 'botorch', 'torch', 'kfp', 'pandas')\n"
        "print(json.dumps(sorted(h for h in heavy if h in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_a_pipeline_of_tuning_rounds_is_built_without_importing_ax() -> None:
    # `headwater run` loads the pipeline file in the engine's process: Ax loads in tasks only.
    script = (
        "import json, sys\n"
        "from headwater.hpo import tune\n"
        "from headwater.components.hpo import create_experiment\n"
        "heavy = ('ax', 'botorch', 'torch')\n"
        "print(json.dumps(sorted(h for h in heavy if h in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
