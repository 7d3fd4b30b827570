"""The walk of a program DAG for the estimate: what running each program does to the estimate's state,
composed from its children's effects and memoised per program, so a program that several parents share
(or one parent lists twice) is summarised once: the walk is linear in the DAG, not in its unfolding."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

import numpy as np

from formats.errors import InconsistentReportError

#: Program types whose exchanges a kernel waits for.
EXCHANGES = ("DoExchange", "GlobalExchange", "StreamCopyMid")


@dataclasses.dataclass
class Occurrence:
    """The kernel runs of one compute set: the first one's pending exchange (cycles, tiles), the runs'
    executions summed, and the largest pending exchange cycles of any run."""

    first_cycles: int
    first_tiles: np.ndarray | None
    executions: int
    max_cycles: int


@dataclasses.dataclass
class Effect:
    """What running a program once does: exchanges before its first kernel (`pre`), its first kernel
    (`head`: compute set and executions), the kernels after it (in first-run order), and the exchanges
    after its last kernel (`post`)."""

    pre: tuple[int, np.ndarray | None] = (0, None)
    head: tuple[int, int] | None = None
    kernels: dict[int, Occurrence] = dataclasses.field(default_factory=dict)
    post: tuple[int, np.ndarray | None] = (0, None)

    def scaled(self, factor: int) -> Effect:
        """The effect with every execution count multiplied (a Repeat)."""
        if factor == 1 or self.head is None:
            return self
        kernels = {cs: dataclasses.replace(o, executions=o.executions * factor) for cs, o in self.kernels.items()}
        return Effect(self.pre, (self.head[0], self.head[1] * factor), kernels, self.post)

    def then(self, other: Effect) -> Effect:
        """This effect followed by `other`."""
        if self.head is None:
            pre = _add(self.pre, other.pre)
            return Effect(pre, other.head, other.kernels, other.post) if other.head else Effect(pre)
        if other.head is None:
            return Effect(self.pre, self.head, self.kernels, _add(self.post, other.pre))
        kernels = {cs: dataclasses.replace(o) for cs, o in self.kernels.items()}  # effects are shared: copy
        cycles, tiles = _add(self.post, other.pre)
        _record(kernels, other.head[0], cycles, tiles, other.head[1])
        for cs, occurrence in other.kernels.items():
            _merge(kernels, cs, occurrence)
        return Effect(self.pre, self.head, kernels, other.post)

    def runs(self) -> dict[int, Occurrence]:
        """Every kernel's runs, in first-run order, starting from no pending exchange."""
        kernels: dict[int, Occurrence] = {}
        if self.head is not None:
            _record(kernels, self.head[0], self.pre[0], self.pre[1], self.head[1])
            for cs, occurrence in self.kernels.items():
                _merge(kernels, cs, occurrence)
        return kernels


def _add(a: tuple[int, np.ndarray | None], b: tuple[int, np.ndarray | None]) -> tuple[int, np.ndarray | None]:
    tiles = a[1] if b[1] is None else b[1] if a[1] is None else a[1] | b[1]
    return a[0] + b[0], tiles


def _record(kernels: dict[int, Occurrence], cs: int, cycles: int, tiles: np.ndarray | None, executions: int) -> None:
    _merge(kernels, cs, Occurrence(cycles, tiles, executions, cycles))


def _merge(kernels: dict[int, Occurrence], cs: int, occurrence: Occurrence) -> None:
    known = kernels.get(cs)
    if known is None:
        kernels[cs] = dataclasses.replace(occurrence)
    else:
        known.executions += occurrence.executions
        known.max_cycles = max(known.max_cycles, occurrence.max_cycles)


def walk(
    roots: Iterable[int],
    programs: dict[int, tuple[str, int | None, int | None]],
    children: dict[int, list[int]],
    leaf: Callable[[int, str], Effect],
    path: str,
) -> Effect:
    """The effect of running the control programs `roots` in order; `leaf(program, type)` gives a leaf's.

    Iterative (a deep DAG needs no deep stack); a program that contains itself raises.
    """
    done: dict[int, Effect] = {}
    on_path: set[int] = set()
    total = Effect()
    for root in roots:
        work: list[tuple[int, bool]] = [(root, False)]
        while work:
            program, leaving = work.pop()
            if program in done and not leaving:
                continue
            info = programs.get(program)
            if info is None:
                done[program] = Effect()
                continue
            ptype, repeat, target = info
            kids = list(children.get(program, ()))
            if ptype == "Call" and target is not None:
                kids.append(target)
            if leaving:
                on_path.discard(program)
                effect = Effect()
                for kid in kids:
                    effect = effect.then(done[kid])
                done[program] = effect.scaled(max(1, repeat or 1) if ptype == "Repeat" else 1)
                continue
            if program in on_path:
                raise InconsistentReportError(f"{path!r}: program {program} contains itself", path)
            if not kids:
                done[program] = leaf(program, ptype).scaled(max(1, repeat or 1) if ptype == "Repeat" else 1)
                continue
            on_path.add(program)
            work.append((program, True))
            work.extend((kid, False) for kid in reversed(kids) if kid not in done)
        total = total.then(done.get(root, Effect()))
    return total
