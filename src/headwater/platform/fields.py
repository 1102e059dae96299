"""Reading the fields of a kfp-kubernetes executor config: selectors, names, paths, lists.

Each function checks one kind of field and raises `PlatformError` naming where it is
(`at`), so that `kubernetes.parse_settings` can refuse a bad document before a run starts.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping
from typing import Any

from headwater.errors import HeadwaterError, PlatformError, UserError
from headwater.platform.secrets import CONFIG_MAP, LocalSecretStore, check_name

ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*\Z")


def resolve_name(selector: Mapping[str, Any], resolve: Callable[..., Any], kind: str) -> str | None:
    """The name `selector` gives, or None when it comes from an input that is null or was not
    given (KFP's `ErrResolvedParameterNull`).

    Raises:
        PlatformError: The selector does not resolve, or resolves to something not a name.
    """
    try:
        value = resolve(selector)
    except HeadwaterError as exc:
        if input_not_given(selector, exc):
            return None
        raise PlatformError(f"cannot tell which {kind} to use: {exc}") from exc
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise PlatformError(f"the {kind} name resolved to {value!r}, not a name")
    return value


def resolves_to_null(selector: Mapping[str, Any], resolve: Callable[..., Any]) -> bool:
    """Whether `selector` resolves to null (one that does not resolve at all is not null)."""
    try:
        return resolve(selector) is None
    except HeadwaterError as exc:
        return input_not_given(selector, exc)


def input_not_given(selector: Mapping[str, Any], exc: HeadwaterError) -> bool:
    """Whether `exc` says an input of the enclosing DAG was not given (an optional one left out).

    The engine reports that as an unavailable input, never as a `UserError` (a selector that
    selects nothing is one).
    """
    return "componentInputParameter" in selector and not isinstance(exc, UserError)


def name_selector(item: Mapping[str, Any], name_key: str, kind: str, at: str) -> Mapping[str, Any]:
    """The input selector naming the object, from the current field or the deprecated ones."""
    param_key = f"{name_key}Parameter" if name_key else "pvcNameParameter"
    if item.get(param_key):
        selector = as_mapping(item[param_key], f"{at}.{param_key}")
    elif name_key and item.get(name_key):
        selector = {"runtimeValue": {"constant": item[name_key]}}
    elif item.get("constant"):
        selector = {"runtimeValue": {"constant": item["constant"]}}
    elif item.get("taskOutputParameter"):
        selector = {"taskOutputParameter": item["taskOutputParameter"]}
    elif item.get("componentInputParameter"):
        selector = {"componentInputParameter": item["componentInputParameter"]}
    else:
        raise PlatformError(f"{at}: a {kind} setting names no {kind}")
    constant = (selector.get("runtimeValue") or {}).get("constant")
    if isinstance(constant, str) and "{{" not in constant:
        check_name(constant, kind)
    return selector


def mount_path_of(item: Mapping[str, Any], at: str) -> str:
    """The mount path, absolute: a relative one is under `/`, as the container runtime takes it
    (KFP's own test pipelines mount at 'path')."""
    path = str(item.get("mountPath") or "")
    if not path.strip("/") or ":" in path:
        raise PlatformError(f"{at}: mount path {path!r} must be a path other than '/', without ':'")
    return posixpath.normpath("/" + path.lstrip("/"))


def env_name_of(value: Any, at: str) -> str:
    if not isinstance(value, str) or not ENV_NAME.match(value):
        raise PlatformError(
            f"{at}: {value!r} is not a valid environment variable name "
            "(letters, digits, '_', '-' and '.', not starting with a digit)"
        )
    return value


def missing_message(store: LocalSecretStore, name: str, key: str | None, used_as: str) -> str:
    flag = " --config-map" if store.kind == CONFIG_MAP else ""
    example = f"{key or 'KEY'}=VALUE"
    fix = f"add it with: headwater secrets set{flag} {name} {example}"
    if not store.exists(name):
        return f"{store.kind} {name!r} (for {used_as}) is not in {store.root}: {fix}"
    keys = ", ".join(store.keys(name)) or "none"
    return f"{store.kind} {name!r} has no key {key!r} (for {used_as}; its keys: {keys}): {fix}"


def as_mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PlatformError(
            f"malformed platform spec: {where} should be a mapping, got {value!r:.60}"
        )
    return value


def list_of(config: Mapping[str, Any], key: str, at: str) -> list[Mapping[str, Any]]:
    value = config.get(key) or []
    if not isinstance(value, list):
        raise PlatformError(f"malformed platform spec: {at}.{key} should be a list")
    return [as_mapping(v, f"{at}.{key}[{i}]") for i, v in enumerate(value)]
