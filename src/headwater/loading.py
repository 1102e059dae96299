"""Find the user's code: an importable `module:Class`, or a class in a Python file.

The PyTorch training components take their LightningModule and LightningDataModule, and the
model server its custom handlers, either as an importable path (`"mypkg.models:Net"`) or as a
Python file plus the class name in it (`"handler.py:Handler"`, or a code artifact with
`module="Net"`). The file's directory goes on `sys.path`, so the file may import its
siblings; it is loaded once per process, under a module name derived from its path.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from typing import Any

from headwater.errors import UserError


def split(spec: str) -> tuple[str, str]:
    """`"pkg.mod:Class"` -> `("pkg.mod", "Class")`; `"Class"` -> `("", "Class")`."""
    module, _, name = spec.strip().rpartition(":")
    return module, name


def code_file(code_path: str, module: str = "") -> Path:
    """The Python file a code artifact holds: the artifact itself, or `module` in its directory.

    Raises:
        UserError: No such file, or a directory with no single `.py` file and no `module` name.
    """
    where = Path(code_path)
    if where.is_file():
        return where
    if where.is_dir():
        if module:
            for candidate in (where / module, where / f"{module}.py"):
                if candidate.is_file():
                    return candidate
        found = sorted(where.glob("*.py"))
        if len(found) == 1 and not module:
            return found[0]
        listing = ", ".join(p.name for p in found) or "no .py files"
        raise UserError(
            f"code artifact {code_path!r} is a directory ({listing}); name the file in the class "
            "path, as 'model.py:Net'"
        )
    raise UserError(f"code artifact {code_path!r} does not exist")


def load_file(path: Path) -> Any:
    """The module defined by the Python file at `path` (loaded once per process)."""
    resolved = path.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:12]
    name = f"headwater_user_code_{resolved.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    # A KFP artifact's file has no extension: read it as Python source whatever its name.
    loader = importlib.machinery.SourceFileLoader(name, str(resolved))
    spec = importlib.util.spec_from_file_location(name, resolved, loader=loader)
    if spec is None or spec.loader is None:
        raise UserError(f"{str(path)!r} cannot be loaded as Python source")
    found = importlib.util.module_from_spec(spec)
    parent = str(resolved.parent)
    if parent not in sys.path:
        sys.path.insert(0, parent)
    sys.modules[name] = found
    try:
        spec.loader.exec_module(found)
    except Exception as exc:
        del sys.modules[name]
        raise UserError(
            f"loading {path.name!r} failed: {type(exc).__name__}: {exc}".splitlines()[0]
        ) from exc
    return found


def _in_code(code_path: str, module_name: str) -> bool:
    """Whether a class path refers to the code artifact (a bare class name, or a file in it)
    rather than to an importable module."""
    if not module_name or module_name.endswith(".py"):
        return True
    where = Path(code_path)
    if where.is_dir():
        return (where / module_name).is_file() or (where / f"{module_name}.py").is_file()
    return module_name in (where.name, where.stem)


def load_class(spec: str, code_path: str | None = None, *, role: str = "class") -> type:
    """The class `spec` names: `"module:Class"` importable here, `"path/file.py:Class"`, or
    `Class` in `code_path`.

    Args:
        spec: `"pkg.mod:Class"`, or with `code_path` the class name (`"Net"`, or
            `"model.py:Net"` when the code artifact is a directory of files).
        code_path: A Python file (or a directory of them) holding the class, or None; a
            `"pkg.mod:Class"` naming no file there is still imported.
        role: What the class is for, to name it in errors ("LightningModule").

    Raises:
        UserError: The module or file cannot be loaded, or defines no such class.
    """
    module_name, name = split(spec)
    if not name:
        raise UserError(f"no {role} named: give 'module:Class' or a code file and a class name")
    if code_path and _in_code(code_path, module_name):
        path = code_file(code_path, module_name)
        module = load_file(path)
        where = repr(path.name)
    elif module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise UserError(f"{role} file {module_name!r} does not exist")
        module = load_file(path)
        where = repr(path.name)
    elif module_name:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise UserError(
                f"cannot import {module_name!r} for the {role} {spec!r} ({exc}); install the "
                "package in the task's image or pass the code as a file artifact"
            ) from exc
        where = f"module {module_name!r}"
    else:
        raise UserError(
            f"{role} {spec!r} names no module: give 'package.module:{name}', or pass the code "
            "as a file artifact"
        )
    found = getattr(module, name, None)
    if not isinstance(found, type):
        classes = sorted(
            k
            for k, v in vars(module).items()
            if isinstance(v, type) and getattr(v, "__module__", None) == module.__name__
        )
        raise UserError(
            f"{where} defines no class {name!r} for the {role} (classes there: "
            f"{', '.join(classes) or 'none'})"
        )
    return found
