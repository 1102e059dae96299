"""A component whose own subprocess imports a package that only `--install-packages` provides.

The wheel's path comes from HEADWATER_TEST_WHEEL (see `cli_harness.build_wheel`), as a
notebook component's kernel would import what the component asked for.
"""

import os

from kfp import dsl

WHEEL = os.environ["HEADWATER_TEST_WHEEL"]


@dsl.component(packages_to_install=[WHEEL])
def import_in_subprocess() -> str:
    import subprocess
    import sys

    child = subprocess.run(
        [sys.executable, "-c", "import hwtestpkg; print(hwtestpkg.VALUE, hwtestpkg.__file__)"],
        capture_output=True,
        text=True,
    )
    if child.returncode != 0:
        raise RuntimeError(f"the subprocess could not import hwtestpkg: {child.stderr}")
    return child.stdout.strip()


@dsl.pipeline
def task_pkg_subprocess() -> str:
    return import_in_subprocess().output
