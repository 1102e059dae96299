"""The `@dsl.component` of every component Headwater ships, naming `HEADWATER_COMPONENT_IMAGE`.

KFP writes a component's image into its spec when the decorator runs, and a compiled pipeline
names that image; so the variable is read here, once per component, when the module that
defines the component is imported (set it before importing the components to compile with
your image). Nothing reads it when `headwater` or `headwater.components` is imported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from headwater import config


def component(*, packages_to_install: Sequence[str]) -> Callable[[Callable[..., Any]], Any]:
    """`@dsl.component` with the image `HEADWATER_COMPONENT_IMAGE` names (default
    `python:3.11-slim`), for the components of `headwater.components`.

    Args:
        packages_to_install: What a pod without Headwater installs first (Headwater checks
            they are installed instead).

    Returns:
        The decorator: a function becomes a KFP component.
    """
    from kfp import dsl

    decorator: Callable[[Callable[..., Any]], Any] = dsl.component(
        base_image=config.component_image(), packages_to_install=list(packages_to_install)
    )
    return decorator
