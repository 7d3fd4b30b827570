"""A walk over every object reachable from a report that only reads (for the reliability tests).

tests/hostile_worker.py's walker also visits nested lists as objects and so calls their mutating
methods (pop, append, clear); this one reads properties and argument-free getters of pva objects
only, and looks inside nested lists instead of calling them.
"""

from __future__ import annotations

from collections import deque

from hostile_worker import _children

#: Items of each list that are visited (first ones, then last ones).
HEAD, TAIL = 12, 2


def _is_model_object(value) -> bool:
    return type(value).__module__.startswith("pva") and not isinstance(
        value, (int, float, str, bytes, list, tuple, dict, set)
    )


def _sample(values) -> list:
    values = list(values)
    return values[:HEAD] + values[-TAIL:] if len(values) > HEAD else values


def walk(report, budget: int = 4000) -> int:
    """Visit pva objects reachable from `report` breadth-first, reading every getter; returns how many."""
    queue = deque([report])
    visited = 0
    while queue and visited < budget:
        obj = queue.popleft()
        visited += 1
        for _name, value in list(_children(obj)):
            pending = [value]
            while pending:
                item = pending.pop()
                if isinstance(item, (list, tuple)):
                    repr(item)
                    pending.extend(_sample(item))
                elif _is_model_object(item):
                    repr(item)
                    queue.append(item)
    return visited
