"""Big loops on a terminal: a loop of thousands of iterations shown as a line, not thousands.

`headwater runs show` folds each loop of more than `FOLD_OVER` iterations into one line of
counts by state, after its failed iterations; `--all` lists every task. `loop_of` names the
loop a task is an iteration of, as the run's progress (`cli/progress.py`) counts them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from headwater.task import split_iterations

#: The most iterations of one loop `runs show` lists one by one (without `--all`).
FOLD_OVER = 20
#: The most failed iterations of one folded loop listed before its line.
FAILED_SHOWN = 20


def loop_of(name: str) -> str | None:
    """The loop a task is an iteration of, as `add[*]` (`add[*][*]` in a nested one); None
    for a task outside a loop."""
    base, indices = split_iterations(name)
    return f"{base}{'[*]' * len(indices)}" if indices else None


@dataclass
class FoldedLoop:
    """The iterations of one loop, counted by state."""

    name: str
    states: Counter[str] = field(default_factory=Counter)
    durations: list[float] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(self.states.values())

    def summary(self) -> str:
        """`10,000 tasks: 9,990 SUCCEEDED, 10 FAILED` (failures first)."""
        order = sorted(self.states, key=lambda s: (s != "FAILED", -self.states[s], s))
        return f"{self.count:,} tasks: " + ", ".join(f"{self.states[s]:,} {s}" for s in order)

    def duration(self) -> str:
        """The median iteration's duration, as `median 0.02s`."""
        if not self.durations:
            return ""
        ordered = sorted(self.durations)
        return f"median {ordered[len(ordered) // 2]:.2f}s"


def fold_loops(tasks: Sequence[Any], *, every: bool = False) -> tuple[list[Any], bool]:
    """`tasks` (each with `name`, `state` and `duration`) with each big loop folded: its failed
    iterations (at most `FAILED_SHOWN`), then a `FoldedLoop`, where its first iteration was.

    Returns the rows and whether any loop was folded. With `every`, `tasks` as they are.
    """
    sizes = Counter(loop_of(t.name) for t in tasks)
    big = {loop for loop, n in sizes.items() if loop is not None and n > FOLD_OVER}
    if every or not big:
        return list(tasks), False
    folds: dict[str, FoldedLoop] = {}
    failed: dict[str, list[Any]] = {}
    rows: list[Any] = []
    for t in tasks:
        loop = loop_of(t.name)
        if loop not in big:
            rows.append(t)
            continue
        assert loop is not None
        fold = folds.get(loop)
        if fold is None:
            fold = folds[loop] = FoldedLoop(loop)
            failed[loop] = []
            rows.append(loop)  # replaced below, once its failures are known
        fold.states[t.state] += 1
        if t.duration is not None:
            fold.durations.append(t.duration)
        if t.state == "FAILED" and len(failed[loop]) < FAILED_SHOWN:
            failed[loop].append(t)
    out: list[Any] = []
    for row in rows:
        if isinstance(row, str):
            out += [*failed[row], folds[row]]
        else:
            out.append(row)
    return out, True
