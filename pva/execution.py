"""The execution report: runs, steps, per-IPU step figures and cycle totals (libpva section 2.2).

Steps and their per-IPU figures are read in bulk (one column of one IPU per SQL scan, on first
use), so walking every step of a large report costs a few list look-ups per value. Per-tile cycles are also available as
a whole (a numpy matrix, an Arrow table, or per-tile totals), streamed chunk by chunk from the file:
see `ExecutionReport.cyclesByTileArray`, `cyclesByTileTable`, `cyclesByTileTotals` and
`iterCyclesByTile`.
"""

from __future__ import annotations

import concurrent.futures
import functools
import os
import sys
from collections.abc import Iterator
from itertools import repeat
from typing import TYPE_CHECKING, Any

from formats.gcpause import gc_paused
from formats.lazy_import import lazy_module

from . import compilation as _compilation
from .errors import InconsistentReportError
from .lists_and_enums import EngineOption, PvaList, refuse_pickle
from .vectors import VectorCache

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
else:
    np = lazy_module("numpy")
    pa = lazy_module("pyarrow")

if TYPE_CHECKING:
    from formats.pop.reader import MatrixReader, ProfileReader

    from .programs import Program


__all__ = [
    "Block",
    "CycleRange",
    "CyclesInfo",
    "ExecutionReport",
    "ExecutionStep",
    "Ipu",
    "Period",
    "Run",
    "TileCycleTotals",
]

#: Step types for which tileBalance and activeTileBalance are meaningful (seed 004, Ipu).
_TILE_BALANCE_TYPES = frozenset(
    {"OnTileExecute", "GlobalExchange", "DoExchange", "StreamCopy", "StreamCopyBegin", "StreamCopyMid", "StreamCopyEnd"}
)
#: Step types for which dataIn, dataOut and dataBalance are meaningful (seed 004, Ipu).
_DATA_TYPES = frozenset(
    {"GlobalExchange", "DoExchange", "StreamCopy", "StreamCopyBegin", "StreamCopyMid", "StreamCopyEnd"}
)

_STEP_MATRIX = "step_cycles_by_tile"
_STEP_CS_MATRIX = "step_compute_set_cycles_by_tile"
#: Per-tile cycle values of recently read steps kept as Python lists.
_ROW_CACHE_VALUES = 1 << 22


# -- small value classes --------------------------------------------------------------------


class Period:
    """A period of time from `start` to `end` (microseconds or cycles; libpva Period)."""

    __slots__ = ("start", "end")

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Period) and (self.start, self.end) == (other.start, other.end)

    def __hash__(self) -> int:
        return hash((self.start, self.end))

    def __repr__(self) -> str:
        return f"<Period {self.start}..{self.end}>"


class CycleRange:
    """The smallest, largest and mean of a cycle count over tiles (libpva CycleRange)."""

    __slots__ = ("min", "max", "average")

    def __init__(self, min: int, max: int, average: int) -> None:
        self.min = min
        self.max = max
        self.average = average

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CycleRange) and (self.min, self.max, self.average) == (
            other.min,
            other.max,
            other.average,
        )

    def __hash__(self) -> int:
        return hash((self.min, self.max, self.average))

    def __repr__(self) -> str:
        return f"<CycleRange min {self.min} max {self.max} average {self.average}>"


class CyclesInfo:
    """Where a step starts and ends on an IPU's tiles (libpva CyclesInfo).

    libpva's ``from()`` and ``to()`` are `cyclesFrom` and `cyclesTo` in Python (``from`` is a
    keyword). Values are absolute cycle counts of the IPU.
    """

    __slots__ = ("cyclesFrom", "cyclesTo")

    def __init__(self, cyclesFrom: CycleRange, cyclesTo: CycleRange) -> None:
        self.cyclesFrom = cyclesFrom
        self.cyclesTo = cyclesTo

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CyclesInfo) and (self.cyclesFrom, self.cyclesTo) == (other.cyclesFrom, other.cyclesTo)

    def __hash__(self) -> int:
        return hash((self.cyclesFrom, self.cyclesTo))

    def __repr__(self) -> str:
        return f"<CyclesInfo from {self.cyclesFrom.min}..{self.cyclesFrom.max} to {self.cyclesTo.min}..{self.cyclesTo.max}>"


class TileCycleTotals:
    """Cycles summed over tiles, by activity (libpva TileCycleTotals)."""

    __slots__ = (
        "activeCompute",
        "compute",
        "interIpuExchange",
        "streamCopyBegin",
        "streamCopy",
        "streamCopyEnd",
        "internalExchange",
        "sync",
        "total",
    )

    activeCompute: int
    compute: int
    interIpuExchange: int
    streamCopyBegin: int
    streamCopy: int
    streamCopyEnd: int
    internalExchange: int
    sync: int
    total: int

    def __init__(self, *values: Any) -> None:
        if len(values) != len(self.__slots__):
            raise TypeError(f"TileCycleTotals takes {len(self.__slots__)} values, got {len(values)}")
        for name, value in zip(self.__slots__, values):
            setattr(self, name, int(value or 0))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TileCycleTotals) and all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in self.__slots__))

    def __repr__(self) -> str:
        return f"<TileCycleTotals total {self.total:,} cycles>"


class Block:
    """A lightweight-profiling block measured on one tile (libpva Block)."""

    __slots__ = ("_e", "id", "tile", "_program", "cyclesFrom", "cyclesTo", "isStreamCopy", "isCommon", "isOverflow")

    def __init__(
        self,
        execution: ExecutionReport,
        block_id: int,
        tile: int,
        program: int | None,
        cycles_from: int,
        cycles_to: int,
        is_stream_copy: int,
        is_common: int,
        is_overflow: int,
    ) -> None:
        self._e = execution
        self.id = block_id
        self.tile = tile
        self._program = program
        self.cyclesFrom = cycles_from
        self.cyclesTo = cycles_to
        self.isStreamCopy = bool(is_stream_copy)
        self.isCommon = bool(is_common)
        self.isOverflow = bool(is_overflow)

    @property
    def program(self) -> Program | None:
        """The program measured, or None when unknown."""
        if self._program is None:
            return None
        return self._e._report.compilation._program_table.get(self._program)

    def __repr__(self) -> str:
        return f"<Block {self.id} tile {self.tile} cycles {self.cyclesFrom}..{self.cyclesTo}>"


# -- per-IPU figures of a step --------------------------------------------------------------

#: Ipu members read from steps_by_ipu: name -> (figure of the query layer, kind), where kind says
#: which rows keep their value: every profiled row, or only rows of the step types a note names.
_IPU_COLUMNS: dict[str, tuple[str, str]] = {
    "cycles": ("cycles", "profiled"),
    "activeTiles": ("active_tiles", "profiled"),
    "threadBalance": ("thread_balance", "profiled"),
    "tileBalance": ("tile_balance", "tile_balance"),
    "activeTileBalance": ("active_tile_balance", "tile_balance"),
    "dataIn": ("data_in", "data"),
    "dataOut": ("data_out", "data"),
    "dataBalance": ("data_balance", "data"),
    **{
        f"{span}{end.title()}{stat.title()}": (f"{span}_cycles_{end}_{stat}", "profiled")
        for span in ("all", "active")
        for end in ("from", "to")
        for stat in ("min", "max", "avg")
    },
}
_FLOAT_COLUMNS = frozenset({"threadBalance", "tileBalance", "activeTileBalance", "dataBalance"})
#: Python types of the numbers json.loads returns.
_NUMBER_TYPES = frozenset({int, float})


class _IpuTable:
    """One IPU's rows of steps_by_ipu as Python lists indexed by step, each column read in one SQL
    scan on first use.

    ``column[step]`` is the value of a step. `position` maps steps to rows: ``range(num_steps)``
    when every step has a row; otherwise -1 for steps without one, which read the 0 (or False)
    appended to every column as read: an IPU without a row reads as not profiled. Values of IPUs
    not profiled, and balances and data figures of steps whose type they do not apply to, are 0
    (seed 004, Ipu).
    """

    def __init__(self, owner: _StepIpus, reader: ProfileReader, ipu: int, num_steps: int) -> None:
        self._owner = owner
        self._reader = reader
        self._ipu = ipu
        self._num_steps = num_steps

    __reduce_ex__ = refuse_pickle

    def _load(self, figure: str, name: str, step_types: Any = None) -> list:
        count, low, high, values = self._reader.step_ipu_figure(
            self._ipu, figure, step_types=step_types, real=name in _FLOAT_COLUMNS
        )
        if "position" not in self.__dict__:
            self._set_position(count, low, high)
        if not _NUMBER_TYPES.issuperset(map(type, values)):
            bad = next((v for v in values if not isinstance(v, (int, float)) or isinstance(v, bool)), None)
            raise InconsistentReportError(
                f"{self._reader.path!r}: steps_by_ipu: expected numbers for {name} of IPU {self._ipu}, found {bad!r}",
                self._reader.path,
            )
        return values

    def _set_position(self, count: int, low: Any, high: Any) -> None:
        n = self._num_steps
        if count == n and (n == 0 or (low == 0 and high == n - 1)):  # (step_id, ipu) is unique: all present
            self.position: range | list[int] = range(n)
            return
        # Rows are missing: they may be filed under an IPU the target does not have (a full scan,
        # so only done here; rows of other IPUs never change this IPU's values).
        self._owner.check_ipus()
        path = self._reader.path
        if count and not (isinstance(low, int) and isinstance(high, int) and low >= 0 and high < n):
            raise InconsistentReportError(
                f"{path!r}: steps_by_ipu has rows for steps {low!r}..{high!r} on IPU {self._ipu}, but the report has "
                f"{n} steps",
                path,
            )
        position = np.full(n, -1, dtype=np.int64)
        position[np.asarray(self._reader.step_ids_of_ipu(self._ipu), dtype=np.int64)] = np.arange(count)
        self.position = position.tolist()

    def __getattr__(self, name: str) -> Any:
        if name == "position":
            self.profiled  # noqa: B018 (loading a column sets the positions)
            return self.__dict__["position"]
        if name == "profiled":
            values = [v != 0 for v in self._load("profiled", "profiled")]
            values.append(False)
        else:
            spec = _IPU_COLUMNS.get(name)
            if spec is None:
                raise AttributeError(name)
            figure, kind = spec
            types = None if kind == "profiled" else _TILE_BALANCE_TYPES if kind == "tile_balance" else _DATA_TYPES
            values = self._load(figure, name, types)
            if name in _FLOAT_COLUMNS:
                values = [float(v) for v in values]
                values.append(0.0)
            else:
                values.append(0)
        position = self.__dict__["position"]
        if not isinstance(position, range):  # some steps have no row: index the values by step
            values = list(map(values.__getitem__, position))
        setattr(self, name, values)
        return values


class _StepIpus:
    """The per-IPU tables of steps_by_ipu, and the Ipu objects handed out for a step."""

    def __init__(self, reader: ProfileReader, num_steps: int, num_ipus: int) -> None:
        self.num_ipus = num_ipus
        self._num_steps = num_steps
        self._reader = reader
        self._ipus_checked = False
        self.tables = [_IpuTable(self, reader, k, num_steps) for k in range(num_ipus)]
        self._ids = range(num_ipus)
        #: Sets of Ipu objects handed out before, to be reused once nothing else holds them (see ipus_of).
        self._pool: list[list[Ipu]] = []
        self._unshared = _UNSHARED * num_ipus  # the sum of the counts when no object is held elsewhere

    def check_ipus(self) -> None:
        """Check once that every row of steps_by_ipu is for an IPU of the target."""
        if self._ipus_checked:
            return
        reader = self._reader
        bad = reader.step_ipu_outside(self.num_ipus)
        if bad is not None:
            raise InconsistentReportError(
                f"{reader.path!r}: steps_by_ipu has a row for step {bad[0]!r} on IPU {bad[1]!r}, but the target has "
                f"{self.num_ipus} IPUs",
                reader.path,
            )
        self._ipus_checked = True

    def ipus_of(self, step: int) -> PvaList:
        """A new list of the Ipu objects of a step.

        Walking the steps makes an Ipu object per IPU and step, most of them dropped at once (a
        loop reading ``step.ipus[0]`` keeps none). An Ipu object handed out before that nothing
        but this object refers to any more cannot be seen by anyone: it is given the new step
        instead of making another. Reference counts say which are free; an object someone still
        holds is never changed. A set is taken from the pool while it is changed, so threads
        never share one.
        """
        pool = self._pool
        try:
            spare = pool.pop()
        except IndexError:
            spare = list(map(Ipu, self.tables, repeat(step, self.num_ipus), self._ids))
        else:
            if _UNSHARED and sum(map(_refcount, spare)) == self._unshared:  # none is held elsewhere
                for ipu in spare:
                    ipu._r = step
            else:
                for k, count in enumerate(list(map(_refcount, spare)) if _UNSHARED else [0] * self.num_ipus):
                    if count == _UNSHARED:
                        spare[k]._r = step
                    else:
                        spare[k] = Ipu(self.tables[k], step, k)
        ipus = PvaList(spare)  # made before the set goes back: its objects are now held
        pool.append(spare)
        return ipus


_refcount = sys.getrefcount


def _unshared_count() -> int:
    """sys.getrefcount, called through map, of an object that only one list holds; 0 when counts
    cannot tell (an interpreter without reference counts, or one whose counts do not grow by one
    per holder), which turns reuse off."""
    if sys.implementation.name != "cpython" or not getattr(sys, "_is_gil_enabled", lambda: True)():
        return 0
    probe = [object()]
    free = list(map(_refcount, probe))[0]
    held = probe[0]
    if list(map(_refcount, probe))[0] != free + 1:
        return 0
    del held
    return free


#: See _unshared_count.
_UNSHARED = _unshared_count()


#: Threads summing per-tile cycles (decoding chunks releases the GIL).
_SUM_THREADS = min(4, os.cpu_count() or 1)


def _sum_chunks(matrix: MatrixReader, lo: int, hi: int, total: np.ndarray) -> np.ndarray:
    """Add the column totals of rows lo..hi-1 to `total`, chunk by chunk."""
    for _first, block in matrix.iter_chunks(lo, hi):
        # narrow chunks are summed in 32 bits when no column total of the chunk can overflow them
        if block.dtype.itemsize <= 2 and block.shape[0] <= 65536:
            total += block.sum(axis=0, dtype=np.uint32)
        else:
            total += block.sum(axis=0, dtype=np.uint64)
    return total


def _ipu_value(name: str, doc: str) -> property:
    def get(self: Ipu) -> Any:
        return getattr(self._t, name)[self._r]

    return property(get, doc=doc)


class Ipu:
    """What one step did on one IPU (libpva Ipu). Every figure is 0 if the IPU was not profiled."""

    __slots__ = ("_t", "_r", "id")

    def __init__(self, table: _IpuTable, step: int, ipu_id: int) -> None:
        self._t = table
        self._r = step
        self.id = ipu_id

    @property
    def cycles(self) -> int:
        """Cycles executed on this IPU, summed over its tiles."""
        return self._t.cycles[self._r]

    @property
    def profiled(self) -> bool:
        """Whether this IPU was profiled (with replicaToProfile only some are)."""
        return self._t.profiled[self._r]

    @property
    def allCycles(self) -> CyclesInfo:
        """Where the step starts and ends over all tiles of this IPU."""
        t = self._t
        r = self._r
        return CyclesInfo(
            CycleRange(t.allFromMin[r], t.allFromMax[r], t.allFromAvg[r]),
            CycleRange(t.allToMin[r], t.allToMax[r], t.allToAvg[r]),
        )

    @property
    def activeCycles(self) -> CyclesInfo:
        """Where the step starts and ends over the tiles of this IPU that took part in it."""
        t = self._t
        r = self._r
        return CyclesInfo(
            CycleRange(t.activeFromMin[r], t.activeFromMax[r], t.activeFromAvg[r]),
            CycleRange(t.activeToMin[r], t.activeToMax[r], t.activeToAvg[r]),
        )

    activeTiles = _ipu_value("activeTiles", "Tiles computing (or exchanging, for exchanges).")
    threadBalance = _ipu_value("threadBalance", "Hardware thread utilisation, 0 to 1.")
    tileBalance = _ipu_value(
        "tileBalance", "Tile utilisation, 0 to 1; 0 unless the step is OnTileExecute, an exchange or a stream copy."
    )
    activeTileBalance = _ipu_value(
        "activeTileBalance",
        "Utilisation of the active tiles, 0 to 1; 0 unless the step is OnTileExecute, an exchange or a stream copy.",
    )
    dataIn = _ipu_value("dataIn", "Bytes received by this IPU; 0 unless the step is an exchange or a stream copy.")
    dataOut = _ipu_value("dataOut", "Bytes sent by this IPU; 0 unless the step is an exchange or a stream copy.")
    dataBalance = _ipu_value(
        "dataBalance", "Balance of data per tile, 0 to 1; 0 unless the step is an exchange or a stream copy."
    )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ipu) and other._t is self._t and other._r == self._r

    def __hash__(self) -> int:
        return hash(("Ipu", self._r, self.id))

    def __repr__(self) -> str:
        if not self.profiled:
            return f"<Ipu {self.id} of step {self._r}, not profiled>"
        return f"<Ipu {self.id} of step {self._r}: {self.cycles:,} cycles on {self.activeTiles} tiles>"


# -- compute sets of a step -----------------------------------------------------------------


class VertexInstances(_compilation.VertexInstances):
    """The instances of one vertex type executed in a step's compute set (libpva execution::VertexInstances).

    `count` is the instances executed and `cycles` their measured cycles, summed; both come from the
    compiled compute set (with `cycles` 0) when the report has no per-vertex execution figures.
    """

    __slots__ = ("cycles",)

    def __init__(
        self, compilation: Any, vertex_type: int, count: int, estimated_cycles: int, count_row: Any, cycles: int
    ) -> None:
        super().__init__(compilation, vertex_type, count, estimated_cycles, count_row)
        self.cycles = cycles

    def __repr__(self) -> str:
        return f"<VertexInstances {self.count:,} x {self.type.name}, {self.cycles:,} cycles>"


class ComputeSet(_compilation.ComputeSet):
    """A compute set as executed in one step (libpva execution::ComputeSet)."""

    __slots__ = ("_e", "_step", "_cycles_row")

    def __init__(
        self, execution: ExecutionReport, step: int, cs_id: int, name: str, estimate_row: Any, cycles_row: int | None
    ) -> None:
        super().__init__(execution._report.compilation, cs_id, name, estimate_row)
        self._e = execution
        self._step = step
        self._cycles_row = cycles_row

    @property
    def cyclesByTile(self) -> PvaList:
        """Cycles of this compute set in this step on every tile."""
        if self._cycles_row is None:
            return self._e._step_cycles_by_tile(self._step)
        row, reader = self._cycles_row, self._e._reader
        return self._e._vectors.get((_STEP_CS_MATRIX, row), lambda: reader.matrix_row(_STEP_CS_MATRIX, row))

    @property
    def vertices(self) -> PvaList:
        """The vertex instances executed, one entry per vertex type, with their cycles."""
        reader = self._e._reader
        rows = reader.step_vertex_instances(self._step, self._id)
        compilation = self._c
        if rows:
            return PvaList(
                VertexInstances(compilation, vt, count, estimate or 0, count_row, cycles)
                for vt, count, cycles, estimate, count_row in rows
            )
        compiled = reader.compute_set_vertices(self._id)
        return PvaList(VertexInstances(compilation, *row, 0) for row in compiled)

    def __repr__(self) -> str:
        return f"<ComputeSet {self._id} {self.name!r} in step {self._step}>"


# -- steps and runs -------------------------------------------------------------------------


class ExecutionStep:
    """One step of execution: one program run on the IPUs (libpva ExecutionStep)."""

    __slots__ = ("_e", "_id")

    def __init__(self, execution: ExecutionReport, step_id: int) -> None:
        self._e = execution
        self._id = step_id

    @property
    def program(self) -> Program:
        """The program executed; an ImplicitSyncProgram for a sync the execution added."""
        return self._e._step_program(self._id)

    @property
    def cyclesByTile(self) -> PvaList:
        """Cycles of this step on every tile (0 on tiles that were not profiled); empty without per-tile data."""
        return self._e._step_cycles_by_tile(self._id)

    @property
    def ipus(self) -> PvaList:
        """What the step did on each IPU of the target, indexed by IPU id."""
        return self._e._ipus_of(self._id)

    @property
    def computeSets(self) -> PvaList:
        """The compute sets executed in this step, with their cycles."""
        return self._e._step_compute_sets(self._id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExecutionStep) and other._e is self._e and other._id == self._id

    def __hash__(self) -> int:
        return hash(("ExecutionStep", self._id))

    def __repr__(self) -> str:
        e = self._e
        name = e._step_names[self._id]
        label = f" {name!r}" if name else ""
        return f"<ExecutionStep {self._id} {e._step_types[self._id]}{label}>"


class Run:
    """One Engine::run (libpva Run)."""

    __slots__ = ("_e", "_id", "name", "microseconds", "_first", "_count")

    def __init__(
        self, execution: ExecutionReport, run_id: int, name: str, us_start: int, us_end: int, first: int, count: int
    ) -> None:
        self._e = execution
        self._id = run_id
        self.name = name
        self.microseconds = Period(us_start, us_end)
        self._first = first
        self._count = count

    @property
    def steps(self) -> PvaList:
        """The steps of this run, in order."""
        return PvaList(self._e.steps[self._first : self._first + self._count])

    @property
    def cyclesByIpu(self) -> PvaList:
        """The cycle counter of each IPU at the start and end of this run; may be empty."""
        rows = self._e._reader.run_cycles_by_ipu(self._id)
        return PvaList(Period(start, end) for start, end in rows)

    @property
    def executionParameters(self) -> PvaList:
        """The options set for this run, as (name, value) engine options; may be empty."""
        rows = self._e._reader.run_parameters(self._id)
        return PvaList(EngineOption(name, value) for name, value in rows)

    @property
    def totalCycles(self) -> TileCycleTotals:
        """Cycles by activity summed over all tiles and IPUs in this run (pva addition)."""
        return self._e._cycle_totals(self._id)

    # -- columnar access (pva additions) --

    def cyclesByTileArray(self) -> np.ndarray:
        """Cycles of every step of this run on every tile, as a (steps, tiles) uint64 array."""
        return self._e.cyclesByTileArray(run=self)

    def cyclesByTileTotals(self) -> np.ndarray:
        """Cycles of this run on each tile, summed over its steps, as a uint64 array."""
        return self._e.cyclesByTileTotals(run=self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Run) and other._e is self._e and other._id == self._id

    def __hash__(self) -> int:
        return hash(("Run", self._id))

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self.name else ""
        return f"<Run {self._id}{name}, {self._count:,} steps>"


# -- the report -----------------------------------------------------------------------------


class ExecutionReport:
    """Information collected while the program ran (libpva ExecutionReport).

    A compile-only report has no runs and no steps, and `totalCycles.total` is 0.
    """

    def __init__(self, reader: ProfileReader, report: Any) -> None:
        self._reader = reader
        self._report = report
        self._num_ipus = int(reader.target["num_ipus"])
        self._vectors = VectorCache(_ROW_CACHE_VALUES)

    __reduce_ex__ = refuse_pickle

    # -- libpva members --

    @functools.cached_property
    def runs(self) -> PvaList:
        """Every Engine::run, in order; empty for a compile-only report."""
        rows = self._reader.runs()
        num_steps = self._num_steps
        runs = []
        for index, (run_id, name, us_start, us_end, first, count) in enumerate(rows):
            if run_id != index:
                raise InconsistentReportError(
                    f"{self._reader.path!r}: run ids must be 0..{len(rows) - 1}, found id {run_id} at position {index}",
                    self._reader.path,
                )
            if (
                not isinstance(first, int)
                or not isinstance(count, int)
                or first < 0
                or count < 0
                or (first + count > num_steps)
            ):
                covers = (
                    f"steps {first}..{first + count - 1}"
                    if isinstance(first, int) and isinstance(count, int)
                    else f"steps from {first!r} ({count!r} of them)"
                )
                raise InconsistentReportError(
                    f"{self._reader.path!r}: run {run_id} covers {covers}, but the report has {num_steps} steps",
                    self._reader.path,
                )
            runs.append(Run(self, run_id, name, us_start, us_end, first, count))
        return PvaList(runs)

    @functools.cached_property
    def steps(self) -> PvaList:
        """Every step of every run, in order."""
        count = self._num_steps
        with gc_paused():
            return PvaList(map(ExecutionStep, repeat(self, count), range(count)))

    @property
    def totalCycles(self) -> TileCycleTotals:
        """Cycles by activity summed over all tiles, IPUs, replicas and runs; all 0 without execution data."""
        return self._cycle_totals(None)

    def blocks(self, tile: int) -> PvaList:
        """The lightweight-profiling blocks measured on a tile, in order of their first cycle."""
        if not isinstance(tile, (int, np.integer)) or isinstance(tile, bool):
            raise TypeError(f"tile must be an integer, not {type(tile).__name__}")
        rows = self._reader.blocks_of_tile(int(tile))
        return PvaList(Block(self, *row) for row in rows)

    # -- columnar access to per-tile cycles (pva additions) --

    def _step_range(self, run: Any, start: int | None, stop: int | None) -> tuple[int, int]:
        num_steps = self._num_steps
        if run is None:
            lo, hi = 0, num_steps
        else:
            if isinstance(run, Run):
                if run._e is not self:
                    raise ValueError("run belongs to another report")
            elif isinstance(run, (int, np.integer)) and not isinstance(run, bool):
                runs = self.runs
                if not -len(runs) <= run < len(runs):
                    raise IndexError(f"run {run} out of range: the report has {len(runs)} runs")
                run = runs[run]
            else:
                raise TypeError(f"run must be a Run or an index, not {type(run).__name__}")
            lo, hi = run._first, run._first + run._count
        count = hi - lo
        begin, end, _ = slice(start, stop).indices(count)
        return lo + begin, lo + max(begin, end)

    def _cycles_matrix(self) -> MatrixReader | None:
        return self._reader.matrix(_STEP_MATRIX)

    def _num_tiles(self) -> int:
        return int(self._reader.target["num_tiles"])

    def iterCyclesByTile(
        self, run: Any = None, start: int | None = None, stop: int | None = None
    ) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(firstStep, cycles)`` for the selected steps, one stored chunk at a time.

        `cycles` is a read-only (steps, tiles) array of the narrowest unsigned type that holds the
        chunk (widen with ``.astype(np.uint64)`` before summing). Select all steps, those of one
        `run` (a Run or its index), or a range: `start` and `stop` count steps of the run when one is
        given, of the whole execution otherwise (negative values count from the end).
        """
        lo, hi = self._step_range(run, start, stop)
        matrix = self._cycles_matrix()
        if matrix is None or lo >= hi:
            return
        self._check_matrix_rows(matrix)
        yield from matrix.iter_chunks(lo, hi)

    def cyclesByTileArray(self, run: Any = None, start: int | None = None, stop: int | None = None) -> np.ndarray:
        """Cycles of the selected steps on every tile, as one (steps, tiles) uint64 array.

        Steps are selected as in `iterCyclesByTile`. Without per-tile data the array has 0 columns.
        """
        lo, hi = self._step_range(run, start, stop)
        matrix = self._cycles_matrix()
        if matrix is None:
            return np.zeros((hi - lo, 0), dtype=np.uint64)
        self._check_matrix_rows(matrix)
        return matrix.rows(lo, hi)

    def cyclesByTileTotals(self, run: Any = None, start: int | None = None, stop: int | None = None) -> np.ndarray:
        """Cycles on each tile summed over the selected steps, as a uint64 array of one value per tile.

        Streams the file chunk by chunk; memory does not grow with the number of steps.
        """
        lo, hi = self._step_range(run, start, stop)
        matrix = self._cycles_matrix()
        if matrix is None:
            return np.zeros(0, dtype=np.uint64)
        self._check_matrix_rows(matrix)
        total = np.zeros(matrix.num_cols, dtype=np.uint64)
        if lo >= hi:
            return total
        # Decoding (SQLite reads, decompression) and numpy sums release the GIL: split the steps
        # at chunk boundaries over a few threads.
        per_chunk = matrix.rows_per_chunk
        chunks = (hi - 1) // per_chunk - lo // per_chunk + 1
        workers = max(1, min(_SUM_THREADS, chunks // 8))
        if workers == 1:
            return _sum_chunks(matrix, lo, hi, total)
        bounds = [lo] + [((lo + (hi - lo) * k // workers) // per_chunk) * per_chunk for k in range(1, workers)] + [hi]
        bounds = sorted(set(bounds))
        with concurrent.futures.ThreadPoolExecutor(len(bounds) - 1, thread_name_prefix="pva-sum") as pool:
            parts = list(
                pool.map(lambda a, b: _sum_chunks(matrix, a, b, np.zeros_like(total)), bounds[:-1], bounds[1:])
            )
        for part in parts:
            total += part
        return total

    def cyclesByTileTable(self, run: Any = None, start: int | None = None, stop: int | None = None) -> pa.Table:
        """Cycles of the selected steps as an Arrow table: ``step`` (int64) and ``cyclesByTile``
        (fixed-size list of uint64, one value per tile), built chunk by chunk."""
        lo, hi = self._step_range(run, start, stop)
        num_tiles = self._num_tiles()
        matrix = self._cycles_matrix()
        if matrix is not None:
            self._check_matrix_rows(matrix)
            num_tiles = matrix.num_cols
        schema = pa.schema(
            [
                pa.field("step", pa.int64(), nullable=False),
                pa.field(
                    "cyclesByTile", pa.list_(pa.field("item", pa.uint64(), nullable=False), num_tiles), nullable=False
                ),
            ]
        )
        batches = []
        if matrix is not None:
            for first, block in matrix.iter_chunks(lo, hi):
                values = pa.FixedSizeListArray.from_arrays(
                    pa.array(block.reshape(-1).astype(np.uint64, copy=False), type=pa.uint64()), num_tiles
                )
                steps = pa.array(np.arange(first, first + block.shape[0], dtype=np.int64))
                batches.append(pa.record_batch([steps, values.cast(schema.field(1).type)], schema=schema))
        return pa.Table.from_batches(batches, schema=schema)

    def _check_matrix_rows(self, matrix: MatrixReader) -> None:
        if matrix.num_rows != self._num_steps:
            raise InconsistentReportError(
                f"{self._reader.path!r}: matrix {_STEP_MATRIX!r} has {matrix.num_rows} rows but the report has "
                f"{self._num_steps} steps",
                self._reader.path,
            )

    # -- bulk-loaded step columns --

    @functools.cached_property
    def _num_steps(self) -> int:
        count, low, high = self._reader.step_count()
        if count and (low != 0 or high != count - 1):
            raise InconsistentReportError(
                f"{self._reader.path!r}: step ids must be 0..{count - 1}, found ids {low!r}..{high!r}",
                self._reader.path,
            )
        return count

    def _step_column(self, column: str) -> list:
        values = self._reader.step_column(column)
        if len(values) != self._num_steps:
            raise InconsistentReportError(
                f"{self._reader.path!r}: table steps changed while it was read", self._reader.path
            )
        return values

    @functools.cached_property
    def _step_types(self) -> list:
        return self._step_column("type")

    @functools.cached_property
    def _step_programs(self) -> list:
        return self._step_column("program")

    @functools.cached_property
    def _step_names(self) -> list:
        return self._step_column("name")

    @functools.cached_property
    def _ipu_columns(self) -> _StepIpus:
        return _StepIpus(self._reader, self._num_steps, self._num_ipus)

    @functools.cached_property
    def _ipus_of(self) -> Any:
        return self._ipu_columns.ipus_of

    @functools.cached_property
    def _implicit_syncs(self) -> dict[str, Program]:
        return {}

    def _step_program(self, step: int) -> Program:
        program = self._step_programs[step]
        if program is not None:
            return self._report.compilation._program_table.get(program)
        name = self._step_names[step]
        found = self._implicit_syncs.get(name)
        if found is None:
            from .programs import ImplicitSyncProgram, Program

            found = ImplicitSyncProgram(
                self._report.compilation, None, Program.Type.Sync, name, [None, None, "Internal", None, None, None]
            )
            self._implicit_syncs[name] = found
        return found

    def _step_cycles_by_tile(self, step: int) -> PvaList:
        """A step's per-tile cycles (recently read rows are handed out again while unmodified)."""
        matrix = self._cycles_matrix()
        if matrix is None:
            return PvaList()
        return self._vectors.get(("step", step), lambda: matrix.row(step))

    @functools.cached_property
    def _compute_set_names(self) -> dict[int, tuple[str, Any]]:
        return {cs: (name, row) for cs, name, row in self._reader.compute_sets()}

    def _step_compute_sets(self, step: int) -> PvaList:
        rows = self._reader.step_compute_sets(step)
        if not rows:
            compute_set = self._reader.step_compute_set(step)
            rows = [] if compute_set is None else [(compute_set, None)]
        names = self._compute_set_names
        sets = []
        for compute_set, cycles_row in rows:
            known = names.get(compute_set)
            if known is None:
                raise InconsistentReportError(
                    f"{self._reader.path!r}: step {step} executes compute set {compute_set}, which is not defined",
                    self._reader.path,
                )
            sets.append(ComputeSet(self, step, compute_set, known[0], known[1], cycles_row))
        return PvaList(sets)

    def _cycle_totals(self, run: int | None) -> TileCycleTotals:
        return TileCycleTotals(*self._reader.cycle_totals(run))

    def __repr__(self) -> str:
        if self._reader.file.closed:
            return "<ExecutionReport (closed)>"
        return f"<ExecutionReport {len(self.runs)} run(s), {len(self.steps):,} steps>"

    def _repr_html_(self) -> str:
        from .notebook import execution_html  # how a notebook shows the execution report

        return execution_html(self)
