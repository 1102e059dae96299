"""A component whose packages_to_install cannot be satisfied here."""

from kfp import dsl


@dsl.component(packages_to_install=["headwater-no-such-pkg-xyz==1.0"])
def needs_missing() -> str:
    import headwater_no_such_pkg_xyz

    return str(headwater_no_such_pkg_xyz)


@dsl.component
def plain() -> str:
    return "plain"


@dsl.pipeline
def runtime_missing_pkg():
    needs_missing()
    plain()
