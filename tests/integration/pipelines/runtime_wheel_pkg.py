"""A component that installs a local wheel; its path comes from HEADWATER_TEST_WHEEL."""

import os

from kfp import dsl

WHEEL = os.environ["HEADWATER_TEST_WHEEL"]


@dsl.component(packages_to_install=[WHEEL])
def use_wheel() -> str:
    import hwtestpkg

    return f"{hwtestpkg.VALUE}@{hwtestpkg.__file__}"


@dsl.pipeline
def runtime_wheel_pkg() -> str:
    return use_wheel().output
