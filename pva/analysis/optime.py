"""Operator time cost (after SigmaStar's get_op_time_cost.py, seed 001): who spends the execution time.

Time is attributed per execution step, each cycle of the run counted once (`counted_once`): where
steps overlap, on one IPU or across IPUs (a Sync of idle tiles spanning other tiles' exchange and
compute), a cycle goes to the step of the highest rank covering it: compute, then exchange, then
stream copies, then sync (`STEP_RANK`), and among steps of one rank to the one that started last.
The parts add up to the cycles during which some step ran. An OnTileExecute step's time is split between the vertex types
of its compute set in proportion to their measured cycles (vertex instrumentation) or, without
them, to their estimated cycles; exchange, stream-copy and sync steps count as operators of
their own kind. When debug information is given, operator types come from the debug contexts'
``op_type`` instead (the nearest context with one, walking up parents).
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import defaultdict

import numpy as np

from formats.pop.reader import ProfileReader

from ..lists_and_enums import as_text
from .timeline import step_rank

#: Characters of an operator name shown (longer ones are cut).
MAX_NAME = 1000

#: How non-compute steps are grouped in total mode.
_STEP_KIND = {
    "StreamCopyBegin": "StreamCopy",
    "StreamCopyMid": "StreamCopy",
    "StreamCopyEnd": "StreamCopy",
    "StreamCopy": "StreamCopy",
    "DoExchange": "DoExchange",
    "GlobalExchange": "GlobalExchange",
    "Sync": "Sync",
}


def counted_once(starts: np.ndarray, ends: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """The cycles of each interval when every cycle covered is counted once: a cycle covered by
    several goes to the highest rank, then to the one that started last, then to the first given."""
    count = len(starts)
    found = np.zeros(count, dtype=np.int64)
    if not count:
        return found
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.maximum(np.asarray(ends, dtype=np.int64), starts)
    order = np.lexsort((np.arange(count), starts)).tolist()
    start_list, end_list, rank_list = starts.tolist(), ends.tolist(), np.asarray(ranks).tolist()
    times = np.unique(np.concatenate([starts, ends])).tolist()
    heap: list[tuple[int, int, int]] = []
    taken = [0] * count
    at = 0
    for time, following in zip(times, times[1:]):
        while at < count and start_list[order[at]] <= time:
            k = order[at]
            heapq.heappush(heap, (-rank_list[k], -start_list[k], k))
            at += 1
        while heap and end_list[heap[0][2]] <= time:
            heapq.heappop(heap)
        if heap:
            taken[heap[0][2]] += following - time
    found[:] = taken
    return found


def step_cycles_counted_once(reader: ProfileReader, kinds: dict[int, str]) -> dict[int, int]:
    """Step id -> its cycles of the run, every cycle counted once over all IPUs (`counted_once`)."""
    rows = reader.step_intervals()
    if not rows:
        return {}
    table = np.array(rows, dtype=np.int64).reshape(len(rows), 4)
    ranks = np.array([step_rank(kinds.get(step, "")) for step in table[:, 1].tolist()], dtype=np.int64)
    cycles = counted_once(table[:, 2], table[:, 3], ranks)
    found: dict[int, int] = defaultdict(int)
    for step, value in zip(table[:, 1].tolist(), cycles.tolist()):
        found[step] += value
    return dict(found)


def run_time_by_type(reader: ProfileReader) -> dict[str, int]:
    """Cycles of the run by step type (exchange, sync and stream copies grouped as in total mode,
    compute as OnTileExecute), every cycle counted once as `operator_times` counts it."""
    kinds = {step: as_text(kind) for step, kind, *_ in reader.steps_labelled(MAX_NAME)}
    found: dict[str, int] = defaultdict(int)
    for step, cycles in step_cycles_counted_once(reader, kinds).items():
        kind = kinds.get(step, "")
        found[_STEP_KIND.get(kind, kind)] += cycles
    return dict(sorted(found.items(), key=lambda item: (-item[1], item[0])))


@dataclasses.dataclass(frozen=True)
class OperatorTime:
    """Time of one operator (each mode) or operator type (total mode)."""

    index: int
    type: str
    name: str
    cycles: float
    share: float  # fraction of the total, 0..1


def op_types_from_debug(reader: ProfileReader, debug_path: str) -> dict[int, str]:
    """Program id -> operator type: the ``op_type`` of the nearest debug context (itself or an ancestor)."""
    from formats.debug.debug_cbor import DebugInfoReader

    records = DebugInfoReader(debug_path).records
    found: dict[int, str | None] = {}

    def op_type(context: int) -> str | None:
        if context in found:
            return found[context]
        seen = set()
        queue = [context]
        result = None
        while queue and result is None:
            current = queue.pop(0)
            if current in seen or current not in records:
                continue
            seen.add(current)
            data = records[current].data
            value = data.get("op_type") or data.get("opType")
            if value:
                result = as_text(value)
            else:
                queue.extend(records.parents_of(current))
        found[context] = result
        return result

    types: dict[int, str] = {}
    for program, context in reader.program_debug_contexts():
        if program not in types:
            value = op_type(context)
            if value is not None:
                types[program] = value
    return types


def _vertex_weights(reader: ProfileReader) -> tuple[dict[int, dict[str, float]], dict[int, dict[str, float]]]:
    """Per step (measured) and per compute set (estimated): vertex type name -> weight."""
    names = dict(reader.vertex_type_names())
    measured: dict[int, dict[str, float]] = defaultdict(dict)
    for step, vertex_type, cycles in reader.measured_cycles_by_step_and_vertex_type():
        measured[step][as_text(names.get(vertex_type, vertex_type))] = float(cycles)
    estimated: dict[int, dict[str, float]] = defaultdict(dict)
    for cs, vertex_type, weight in reader.estimated_vertex_weights():
        estimated[cs][as_text(names.get(vertex_type, vertex_type))] = float(weight)
    return measured, estimated


def _split(total: float, weights: dict[str, float]) -> dict[str, float]:
    whole = sum(weights.values())
    if whole <= 0:
        return {}
    return {name: total * w / whole for name, w in weights.items()}


def _operator_name(kind: str, name: str, sync_type, program, cs) -> str:
    """The step's name, or what it is when it has none (a sync's kind, the program or compute set)."""
    if name:
        return name
    if kind == "Sync":
        return f"{as_text(sync_type) or 'Internal'} sync"
    if kind == "OnTileExecute" and cs is not None:
        return f"compute set {cs}"
    return f"{kind} (program {program})" if program is not None else kind


def operator_times(
    reader: ProfileReader, mode: str = "total", op_types: dict[int, str] | None = None
) -> list[OperatorTime]:
    """Operator time shares: by type in descending order (total), or per operator in program order (each).

    `op_types` maps program ids to operator types taken from debug contexts, when known.
    """
    if mode not in ("total", "each"):
        raise ValueError(f"mode must be 'total' or 'each', got {mode!r}")
    measured, estimated = _vertex_weights(reader)
    steps = [row[:6] for row in reader.steps_labelled(MAX_NAME)]
    times = step_cycles_counted_once(reader, {step: as_text(kind) for step, kind, *_ in steps})
    by_type: dict[str, float] = defaultdict(float)
    by_operator: dict[tuple, list] = {}
    for step, kind, program, cs, name, sync_type in steps:
        time = float(times.get(step, 0))
        kind = as_text(kind)
        name = _operator_name(kind, as_text(name), sync_type, program, cs)
        if kind != "OnTileExecute":
            # Exchange, sync and stream copies are their own kind, whatever operator their program serves.
            parts = {_STEP_KIND.get(kind, kind): time}
        elif op_types and program in op_types:
            parts = {as_text(op_types[program]): time}
        else:
            parts = _split(time, measured.get(step) or estimated.get(cs, {})) or {"OnTileExecute": time}
        for type_name, value in parts.items():
            by_type[type_name] += value
        key = ("cs", cs) if kind == "OnTileExecute" and cs is not None else ("program", program, kind, name)
        entry = by_operator.setdefault(key, [name, defaultdict(float)])
        for type_name, value in parts.items():
            entry[1][type_name] += value
    total = sum(by_type.values())
    share = (lambda v: v / total) if total else (lambda v: 0.0)
    if mode == "total":
        ranked = sorted(by_type.items(), key=lambda item: (-item[1], item[0]))
        return [OperatorTime(i, t, t, c, share(c)) for i, (t, c) in enumerate(ranked)]
    result = []
    for index, (name, parts) in enumerate(by_operator.values()):
        cycles = sum(parts.values())
        dominant = max(parts.items(), key=lambda item: (item[1], item[0]))[0] if parts else ""
        result.append(OperatorTime(index, dominant, name, cycles, share(cycles)))
    return result
