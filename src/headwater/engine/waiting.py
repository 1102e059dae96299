"""Launches that are ready but wait for room on the executor, in the order they became ready.

A 10,000-way loop puts thousands of launches here at once while a few run. Asking the
executor's admission about each of them every time one task ends would cost the run time
quadratic in its tasks, so launches wait by what they ask for (`Launch.resources`): within one
pass, once a request was refused, every later launch asking for the same is refused too
(nothing is given back during a pass), and is not asked about. A pass costs what it starts plus
one question for each distinct request, and still starts launches in the order they came.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable, Iterator

from headwater.task import Launch, ResourceRequest


class Waiting:
    """Ready launches not started yet, grouped by what they ask for, first come first served."""

    def __init__(self) -> None:
        self._groups: dict[ResourceRequest, deque[tuple[int, Launch]]] = {}
        self._count = itertools.count()
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def append(self, launch: Launch) -> None:
        """Queue `launch` behind every launch that came before it."""
        self._groups.setdefault(launch.resources, deque()).append((next(self._count), launch))
        self._size += 1

    def admit(self, try_acquire: Callable[[Launch], bool]) -> Iterator[Launch]:
        """The waiting launches that `try_acquire` takes room for now, in the order they came.

        A request refused once is not asked again in this pass.
        """
        heads = [(group[0][0], request) for request, group in self._groups.items()]
        heapq.heapify(heads)
        while heads:
            _, request = heapq.heappop(heads)
            group = self._groups[request]
            launch = group[0][1]
            if not try_acquire(launch):
                continue  # the same request would be refused again until something ends
            group.popleft()
            self._size -= 1
            if group:
                heapq.heappush(heads, (group[0][0], request))
            else:
                del self._groups[request]
            yield launch
