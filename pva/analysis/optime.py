"""Operator time cost (after SigmaStar's get_op_time_cost.py, seed 001): who spends the execution time.

Time is attributed per execution step: a step's time is its longest extent over the IPUs
(cyclesTo.max - cyclesFrom.min). An OnTileExecute step's time is split between the vertex types
of its compute set in proportion to their measured cycles (vertex instrumentation) or, without
them, to their estimated cycles; exchange, stream-copy and sync steps count as operators of
their own kind. When debug information is given, operator types come from the debug contexts'
``op_type`` instead (the nearest context with one, walking up parents).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from formats.pop.reader import ProfileReader

from ..lists_and_enums import as_text

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
    times = dict(reader.step_lengths())
    measured, estimated = _vertex_weights(reader)
    steps = [row[:6] for row in reader.steps_labelled(MAX_NAME)]
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
