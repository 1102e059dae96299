"""kfp-kubernetes settings named by optional pipeline inputs: skipped when the input is left out.

KFP's driver skips a secret, config map, node selector, affinity, toleration or image pull
secret whose name or JSON resolves to null (`ErrResolvedParameterNull`); so does Headwater,
and a value given still applies. The pipeline is KFP's `missing_kubernetes_optional_inputs`.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from cli_harness import Cli, run_ok

pytestmark = pytest.mark.integration


def _mounts_work() -> bool:
    """Whether a task here may enter a mount namespace (probed in a throwaway process)."""
    probe = "from headwater.platform.volumes import enter_namespace; enter_namespace()"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def _platform_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "kfp-kubernetes" in line]


def test_settings_named_by_optional_inputs_left_out_are_skipped(headwater: Cli) -> None:
    result = headwater.run("k8s_optional_inputs")
    summary = run_ok(result)
    assert summary["outputs"]["Output"] == "<unset>|<unset>|<absent>|<absent>"
    # Nothing is left of the ignored settings either, so there is nothing to warn about.
    assert _platform_warnings(result.stderr) == []


@pytest.mark.skipif(not _mounts_work(), reason="this system refuses mounts")
def test_settings_named_by_optional_inputs_that_are_given_apply(headwater: Cli) -> None:
    assert headwater("secrets", "set", "db", "password=pw-1").returncode == 0
    assert headwater("secrets", "set", "--config-map", "cfg", "setting=fast").returncode == 0
    params = {
        "optional_secret_name": "db",
        "optional_config_map_name": "cfg",
        "optional_selector": json.dumps({"disktype": "ssd"}),
    }
    result = headwater.run("k8s_optional_inputs", params=params)
    summary = run_ok(result)
    digest = hashlib.sha256(b"pw-1").hexdigest()[:12]
    assert summary["outputs"]["Output"] == f"{digest}|fast|['password']|['setting']"
    assert _platform_warnings(result.stderr) == [
        "headwater: warning: task 'report': kfp-kubernetes settings with no meaning on one "
        "machine are ignored: node selector"
    ]
