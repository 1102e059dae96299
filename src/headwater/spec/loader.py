"""Loading a pipeline: a `@dsl.pipeline` in a .py file, a pipeline object, or a compiled IR file."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import sys
import uuid
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from headwater.errors import PipelineLoadError, PipelineSpecError
from headwater.spec.documents import check_document
from headwater.spec.ir import PipelineIR, parse_pipeline

IR_SUFFIXES = (".yaml", ".yml", ".json")


def load_pipeline(source: Any, *, pipeline_name: str | None = None) -> PipelineIR:
    """Load and validate a pipeline from a path or a KFP pipeline object.

    Args:
        source: A path to a `.py` file defining `@dsl.pipeline` functions or to a compiled
            IR file (`.yaml`, `.yml`, `.json`); or a `@dsl.pipeline` object itself; or a
            `PipelineIR` already loaded (returned as it is).
        pipeline_name: Which pipeline to take when a `.py` file defines several (the pipeline's
            name as compiled, or the Python variable name). Without it, a file whose other
            pipelines are all nested inside one outermost pipeline runs that one.

    Raises:
        PipelineLoadError: The file is missing, unreadable, or has no / several pipelines.
        PipelineSpecError: The IR is not a valid PipelineSpec.
    """
    if isinstance(source, PipelineIR):
        return source
    if isinstance(source, str | Path):
        path = Path(source)
        if not path.exists():
            raise PipelineLoadError(f"pipeline file not found: {str(path)!r}")
        if path.is_dir():
            raise PipelineLoadError(f"{str(path)!r} is a directory; pass a .py, .yaml or .json")
        if path.suffix in IR_SUFFIXES:
            return load_ir_file(path)
        if path.suffix == ".py":
            return ir_from_component(_pick_pipeline(path, pipeline_name))
        raise PipelineLoadError(
            f"cannot run {str(path)!r}: expected a .py file with a @dsl.pipeline, "
            "or a compiled pipeline .yaml/.yml/.json"
        )
    if hasattr(source, "pipeline_spec"):
        return ir_from_component(source)
    raise PipelineLoadError(
        f"cannot run {source!r}: pass a @dsl.pipeline function or a path to a .py/.yaml file"
    )


def ir_from_component(component: Any) -> PipelineIR:
    """Build the IR of a KFP `GraphComponent` (what `@dsl.pipeline` returns)."""
    from google.protobuf import json_format

    try:
        spec = json_format.MessageToDict(component.pipeline_spec)
        platform = json_format.MessageToDict(component.platform_spec)
    except (AttributeError, TypeError) as exc:
        raise PipelineLoadError(
            f"{component!r:.80} is not a compiled KFP pipeline ({exc}): pass a @dsl.pipeline"
        ) from exc
    return parse_pipeline(spec, platform.get("platforms") or {})


def load_ir_file(path: Path) -> PipelineIR:
    """Load a compiled PipelineSpec (YAML, optionally with a second platform document, or JSON)."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PipelineLoadError(f"cannot read {str(path)!r}: {exc}") from exc
    kind = "JSON" if path.suffix == ".json" else "YAML"
    try:
        if path.suffix == ".json":
            docs = [json.loads(text)]
        else:
            docs = [d for d in yaml.load_all(text, Loader=ir_yaml_loader()) if d is not None]
    except (ValueError, yaml.YAMLError, RecursionError) as exc:
        # Python's parsers recurse per level, libyaml stops at 1,000 levels; a compiled
        # pipeline nests a few dozen.
        if isinstance(exc, RecursionError) or "maximum nesting depth" in str(exc):
            raise PipelineLoadError(
                f"{str(path)!r} nests {kind} too deeply to be a PipelineSpec: pass a compiled "
                "KFP pipeline"
            ) from exc
        raise PipelineLoadError(f"{str(path)!r} is not valid {kind}: {_yaml_detail(exc)}") from exc
    if not docs:
        raise PipelineSpecError(f"{str(path)!r} is empty: expected a compiled KFP PipelineSpec")
    check_document(docs, what=str(path))
    platform: Mapping[str, Any] = {}
    if len(docs) > 1 and isinstance(docs[1], Mapping):
        platform = docs[1].get("platforms") or {}
    return parse_pipeline(docs[0], platform)


@functools.cache
def ir_yaml_loader() -> Any:
    """A YAML loader that builds only what JSON holds, as KFP's IR is protobuf JSON.

    libyaml's parser when it is there (about 7x faster than PyYAML's, and it refuses nesting
    past 1,000 levels instead of recursing). Dates stay the text they were written as; a
    mapping key that is not a string, binary data, sets and ordered maps are errors with a line.
    """
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    def refuse(loader: Any, node: Any) -> Any:
        raise yaml.constructor.ConstructorError(
            None, None, f"{node.tag} values have no JSON form", node.start_mark
        )

    def construct_mapping(loader: Any, node: Any, deep: bool = False) -> Any:
        mapping = base.construct_mapping(loader, node, deep=deep)
        for key_node, _ in node.value:
            key = loader.construct_object(key_node)  # already built: the constructor caches it
            if not isinstance(key, str):
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"mapping key {key!r} is not a string (quote it)",
                    key_node.start_mark,
                )
        return mapping

    loader: Any = type("IRYamlLoader", (base,), {"construct_mapping": construct_mapping})
    loader.add_constructor("tag:yaml.org,2002:timestamp", base.construct_yaml_str)
    for tag in ("binary", "set", "omap", "pairs"):
        loader.add_constructor(f"tag:yaml.org,2002:{tag}", refuse)
    return loader


def _yaml_detail(exc: Exception) -> str:
    """The problem and where, on one line ("found character ... (line 3, column 5)")."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem:
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        return f"{problem}{where}"
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def import_kfp() -> None:
    """Import the KFP SDK for defining and compiling pipelines, without its API client.

    `import kfp` also imports `kfp.client` and the generated server API (~0.6 s of a CLI
    run's ~0.8 s) unless `_KFP_RUNTIME` is set, as KFP's own executor images do. We set it
    only while the top-level package is imported, then import the DSL normally, and make
    `kfp.Client` load on first use so user code that touches it still works.
    """
    if "kfp" in sys.modules:
        return
    previous = os.environ.get("_KFP_RUNTIME")
    os.environ["_KFP_RUNTIME"] = "true"
    try:
        import kfp
    finally:
        if previous is None:
            del os.environ["_KFP_RUNTIME"]
        else:
            os.environ["_KFP_RUNTIME"] = previous
    import kfp.dsl

    def _lazy(name: str) -> Any:
        if name == "Client":
            from kfp.client import Client

            return Client
        raise AttributeError(f"module 'kfp' has no attribute {name!r}")

    kfp.__getattr__ = _lazy


def _pick_pipeline(path: Path, name: str | None) -> Any:
    import_kfp()
    from kfp.dsl.graph_component import GraphComponent

    module = _import_file(path)
    found: dict[str, Any] = {}
    for var, obj in vars(module).items():
        if isinstance(obj, GraphComponent) and obj not in found.values():
            found[var] = obj
    if not found:
        raise PipelineLoadError(
            f"{str(path)!r} defines no pipeline: decorate a function with @dsl.pipeline"
        )
    if name is None:
        if len(found) == 1:
            return next(iter(found.values()))
        top = _outermost(found)
        if len(top) == 1:
            return found[top[0]]
        choices = ", ".join(sorted(found))
        raise PipelineLoadError(
            f"{str(path)!r} defines {len(found)} pipelines ({choices}): choose one with --pipeline"
        )
    for var, obj in found.items():
        if name in (var, obj.name):
            return obj
    choices = ", ".join(sorted(found))
    raise PipelineLoadError(f"no pipeline {name!r} in {str(path)!r} (found: {choices})")


def _outermost(found: dict[str, Any]) -> list[str]:
    """The pipelines of a file that no other pipeline of it uses as a nested pipeline."""
    used: set[str] = set()
    for var, obj in found.items():
        # Only DAG components can be nested pipelines; a plain component may share the name.
        components = {n for n, c in obj.pipeline_spec.components.items() if c.HasField("dag")}
        for other_var, other in found.items():
            if other_var == var:
                continue
            base = "comp-" + re.sub(r"[^-0-9a-z]+", "-", other.name.lower()).strip("-")
            if any(c == base or re.fullmatch(re.escape(base) + r"-\d+", c) for c in components):
                used.add(other_var)
    return [var for var in found if var not in used]


def _import_file(path: Path) -> Any:
    module_name = f"_headwater_pipeline_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise PipelineLoadError(f"cannot import {str(path)!r}")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent.resolve()))
    sys.modules[module_name] = module
    try:
        with warnings.catch_warnings():
            # KFP warns about its future default base image on every @dsl.component.
            warnings.simplefilter("ignore", FutureWarning)
            spec.loader.exec_module(module)
    except SystemExit as exc:
        # A script's `sys.exit()` (or argparse's) would end Headwater with the file's code.
        raise PipelineLoadError(
            f"{str(path)!r} called sys.exit({exc.code!r}) while loading{_where(exc, path)}: "
            "put the script part of the file under `if __name__ == '__main__':`"
        ) from exc
    except Exception as exc:
        raise PipelineLoadError(
            f"importing {str(path)!r} failed{_where(exc, path)}: "
            f"{type(exc).__name__}: {_first_line(exc)}"
        ) from exc
    finally:
        sys.path.remove(str(path.parent.resolve()))
    return module


def _where(exc: BaseException, path: Path) -> str:
    """ " at line N" of `path` where `exc` was raised (its deepest frame in that file)."""
    import traceback  # only for a pipeline that failed to load

    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        return f" at line {exc.lineno}"
    line = None
    target = str(path.resolve())
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == target or frame.filename == str(path):
            line = frame.lineno
    return f" at line {line}" if line is not None else ""


def _first_line(exc: BaseException) -> str:
    """The exception's message on one line (the CLI prints one line per error)."""
    if isinstance(exc, SyntaxError):
        return exc.msg
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else "(no message)"
