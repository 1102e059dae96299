"""The layer table of the architecture map, checked on every import in `src/headwater`.

A package or top-level module may import its own row and the rows below it, never a row above.
Every `import` counts: function-local ones and those under `TYPE_CHECKING` too, since a lazy
import is still a dependency. Within a row, packages must not import each other in a cycle.
`headwater/__init__.py`, the lazy facade, names every layer by string and is not checked.
A new package or top-level module gets a row here, and in the map, in the commit that adds it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

import headwater

SRC = Path(headwater.__file__).parent

#: Row -> the packages and top-level modules in it (the map's table, top row first).
LAYERS: dict[int, set[str]] = {
    8: {"cli", "ui", "server", "__main__"},  # faces
    7: {"components", "hpo", "endpoints"},  # workflows
    6: {"serving", "compute"},  # services
    5: {"api", "headwater"},  # the API (`headwater` is the facade, imported as a package)
    4: {"engine"},
    3: {"executors", "caching"},  # run services
    2: {"metadata", "artifacts"},  # stores
    1: {"task", "spec", "platform", "sandbox", "loading", "machine", "models", "step_metrics"},
    0: {
        "errors",
        "config",
        "_deps",
        "security",
        "identify",
        "access",
        "processes",
        "paths",
        "outcome",
        "_version",
        "logs",
    },
}
ROW = {unit: row for row, units in LAYERS.items() for unit in units}


def _module_name(path: Path) -> str:
    parts = ["headwater", *path.relative_to(SRC).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import of a `headwater` module in `path`, at any depth."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return _imports_in(path.read_text(encoding="utf-8"), package)


def _imports_in(text: str, package: str) -> list[tuple[int, str]]:
    """`_imports` of module source `text` whose package is `package`."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            # `from headwater import config` imports the module `headwater.config`.
            found += [
                (node.lineno, f"{module}.{alias.name}" if module == "headwater" else module)
                for alias in node.names
            ]
    return [(line, m) for line, m in found if m == "headwater" or m.startswith("headwater.")]


def _unit(module: str) -> str:
    """The row-table entry that `module` belongs to: `headwater.engine.loop` -> `engine`."""
    parts = module.split(".")
    if len(parts) == 1:
        return "headwater"
    if parts[1] not in ROW and not (SRC / parts[1]).is_dir() and len(parts) == 2:
        return "headwater"  # a name the facade exports (`from headwater import run`)
    return parts[1]


MODULES = sorted(p for p in SRC.rglob("*.py") if p != SRC / "__init__.py")


def test_every_package_and_module_has_a_row() -> None:
    units = {_unit(_module_name(p)) for p in MODULES}
    assert units - set(ROW) == set(), "give these a row in LAYERS and in ARCHITECTURE.md"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_imports_only_its_own_row_and_below(path: Path) -> None:
    unit = _unit(_module_name(path))
    upward = [
        f"line {line}: {module} (row {ROW.get(_unit(module))}, above row {ROW[unit]})"
        for line, module in _imports(path)
        if ROW.get(_unit(module), 99) > ROW[unit]
    ]
    assert upward == [], f"{unit} (row {ROW[unit]}) imports upward"


def test_no_import_cycles_between_packages() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for path in MODULES:
        unit = _unit(_module_name(path))
        edges[unit] |= {_unit(m) for _, m in _imports(path)} - {unit}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        if start == goal:
            return True
        seen.add(start)
        return any(reaches(n, goal, seen) for n in edges.get(start, set()) - seen)

    cycles = sorted(
        f"{a} -> {b} -> ... -> {a}" for a in edges for b in edges[a] if reaches(b, a, set())
    )
    assert cycles == []


def test_the_checker_sees_function_local_and_relative_imports() -> None:
    # A checker that missed any of these would pass everything.
    text = (
        "def f():\n    from headwater.cli import main\n"
        "from ..ui import app\nfrom headwater import config\nimport headwater.serving.app\n"
        "if TYPE_CHECKING:\n    from headwater.api.runs import RunInfo\n"
    )
    found = {m for _, m in _imports_in(text, "headwater.engine")}
    assert found == {
        "headwater.cli",
        "headwater.ui",
        "headwater.config",
        "headwater.serving.app",
        "headwater.api.runs",
    }


def _module_cycles() -> list[list[str]]:
    """Cycles of modules importing each other (through any import, at any depth), each once,
    as the modules on it. Packages' `__init__` modules are left out: a package re-exporting
    its modules' names, which import each other through it, is how a package has a face."""
    names = {_module_name(p): p for p in MODULES if p.name != "__init__.py"}
    edges: dict[str, set[str]] = {}
    for name, path in names.items():
        found = set()
        for _, module in _imports(path):
            # `from headwater.spec import ir` names the module `headwater.spec.ir`.
            target = module if module in names else module.rpartition(".")[0]
            if target in names and target != name:
                found.add(target)
        edges[name] = found
    cycles: list[list[str]] = []
    seen_cycles: set[frozenset[str]] = set()

    def walk(start: str, node: str, path: list[str], on_path: set[str]) -> None:
        for nxt in edges.get(node, ()):
            if nxt == start and frozenset(path) not in seen_cycles:
                seen_cycles.add(frozenset(path))
                cycles.append([*path, start])
            elif nxt not in on_path and nxt > start and len(path) < 6:
                walk(start, nxt, [*path, nxt], on_path | {nxt})

    for name in sorted(edges):
        walk(name, name, [name], {name})
    return cycles


def test_no_module_imports_itself_through_others() -> None:
    """Not even under `TYPE_CHECKING` or inside a function: a circle there is a circle in
    the design (what both sides need belongs in a third module, or in a Protocol)."""
    assert [" -> ".join(c) for c in _module_cycles()] == []


#: The most lines a module of `src/headwater` may have (ARCHITECTURE.md: 150-400 is the aim).
MAX_MODULE_LINES = 500


def test_no_module_is_over_500_lines() -> None:
    long = {
        str(p.relative_to(SRC)): n
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, "split these into modules of one concept each"
