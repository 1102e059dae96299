"""The XGBoost modules import neither XGBoost, Dask nor KFP until a function runs."""

from __future__ import annotations

import json
import subprocess
import sys


def test_importing_the_functions_imports_no_heavy_library() -> None:
    script = (
        "import json, sys\n"
        "import headwater.components.xgboost\n"
        "import headwater.components.xgboost.training, headwater.components.xgboost.evaluation\n"
        "heavy = ('xgboost', 'dask', 'distributed', 'kfp', 'pandas', 'pyarrow')\n"
        "print(json.dumps(sorted(h for h in heavy if h in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
