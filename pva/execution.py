"""The execution report: runs, steps and cycle totals (libpva section 2.2)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from ._base import PvaList

if TYPE_CHECKING:
    from formats.profile_reader import ProfileReader

_ACTIVITIES = (
    "active_compute",
    "compute",
    "inter_ipu_exchange",
    "stream_copy_begin",
    "stream_copy",
    "stream_copy_end",
    "internal_exchange",
    "sync",
    "total",
)


__all__ = [
    "ExecutionReport",
    "ExecutionStep",
    "Run",
    "TileCycleTotals",
]

class TileCycleTotals:
    """Cycles summed over tiles by activity (libpva TileCycleTotals)."""

    __slots__ = ("activeCompute", "compute", "interIpuExchange", "streamCopyBegin", "streamCopy", "streamCopyEnd",
                 "internalExchange", "sync", "total")

    def __init__(self, *values: int) -> None:
        for name, value in zip(self.__slots__, values):
            setattr(self, name, int(value or 0))

    def __repr__(self) -> str:
        return f"<TileCycleTotals total {self.total:,} cycles>"


class Run:
    """One Engine::run (libpva Run)."""

    __slots__ = ("_e", "_id", "name", "_first", "_count")

    def __init__(self, execution: "ExecutionReport", run_id: int, name: str, first: int, count: int) -> None:
        self._e = execution
        self._id = run_id
        self.name = name
        self._first = first
        self._count = count

    @property
    def steps(self) -> PvaList:
        """The steps of this run."""
        return PvaList(self._e.steps[self._first : self._first + self._count])

    def __repr__(self) -> str:
        return f"<Run {self._id} {self.name!r}, {self._count:,} steps>"


class ExecutionStep:
    """One step of execution: one program run on the IPUs (libpva ExecutionStep)."""

    __slots__ = ("_e", "_id", "_program")

    def __init__(self, execution: "ExecutionReport", step_id: int, program) -> None:
        self._e = execution
        self._id = step_id
        self._program = program

    @property
    def program(self):
        """The program executed."""
        return self._e._report.compilation._program_table.get(self._program)

    def __repr__(self) -> str:
        return f"<ExecutionStep {self._id}>"


class ExecutionReport:
    """Information collected while the program ran (libpva ExecutionReport)."""

    def __init__(self, reader: "ProfileReader", report) -> None:
        self._reader = reader
        self._report = report

    @functools.cached_property
    def runs(self) -> PvaList:
        """Every Engine::run, in order; empty for a compile-only report."""
        rows = self._reader.query("SELECT id, name, first_step, num_steps FROM runs ORDER BY id")
        return PvaList(Run(self, *row) for row in rows)

    @functools.cached_property
    def steps(self) -> PvaList:
        """Every step of every run, in order."""
        rows = self._reader.query("SELECT id, program FROM steps ORDER BY id")
        return PvaList(ExecutionStep(self, *row) for row in rows)

    @property
    def totalCycles(self) -> TileCycleTotals:
        """Cycles by activity summed over all tiles, IPUs and runs; all 0 without execution data."""
        sums = ", ".join(f"sum({a})" for a in _ACTIVITIES)
        return TileCycleTotals(*self._reader.query_one(f"SELECT {sums} FROM cycle_totals"))

    def __repr__(self) -> str:
        return f"<ExecutionReport {len(self.runs)} run(s), {len(self.steps):,} steps>"
