"""The profile summary text of Poplar's printProfileSummary (seed 003, "Profile summary output")."""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any, TextIO

import numpy as np

from formats.pop.reader import ProfileReader

#: Display names of storage categories in the "By Data Type" rows, in the order Poplar prints them.
DATA_TYPE_LABELS = {
    "variable": "Variables",
    "constant": "Constants",
    "message": "Internal Exchange Message Buffers",
    "globalMessage": "Global Exchange Message Buffers",
    "hostMessage": "Host Exchange Message Buffers",
    "rearrangement": "Data Rearrangement Buffers",
    "outputEdge": "Output Edge Buffers",
    "hostExchangePacketHeader": "Host Exchange Packet Headers",
    "globalExchangePacketHeader": "Global Exchange Packet Headers",
    "stack": "Stack",
    "vertexInstanceState": "Vertex Instances",
    "copyDescriptor": "Copy Descriptors",
    "vectorListDescriptor": "VectorList Descriptors",
    "vertexFieldData": "Vertex Field Data",
    "controlTable": "Control Table",
    "controlCode": "Control Code",
    "controlId": "Control IDs",
    "vertexCode": "Vertex Code",
    "internalExchangeCode": "Internal Exchange Code",
    "hostExchangeCode": "Host Exchange Code",
    "globalExchangeCode": "Global Exchange Code",
    "instrumentationResults": "Instrumentation Results",
    "sharedCodeStorage": "Shared Code Storage",
    "sharedDataStorage": "Shared Data Storage",
    "multiple": "Multiple Categories",
    "dwarf": "DWARF Debugging Information",
}

#: Rows Poplar prints in "By Data Type" even when they are zero (the SDK 0.9 sample shows them).
ALWAYS_SHOWN = (
    "variable",
    "constant",
    "hostExchangePacketHeader",
    "globalExchangePacketHeader",
    "stack",
    "vertexInstanceState",
    "copyDescriptor",
    "vectorListDescriptor",
    "vertexFieldData",
    "controlTable",
    "controlCode",
    "vertexCode",
    "internalExchangeCode",
    "hostExchangeCode",
    "globalExchangeCode",
    "instrumentationResults",
    "sharedCodeStorage",
    "sharedDataStorage",
)

#: Characters of a name shown where names repeat for every step (longer ones are cut).
MAX_NAME = 1000
#: Deepest nesting the liveness tree indents (deeper steps are drawn at this depth).
_MAX_DEPTH = 64

_OPTION_NAMES = {
    "showVarStorage": "show_var_storage",
    "showOptimizations": "show_optimizations",
    "showExecutionSteps": "show_execution_steps",
    "showPerIpuMemoryUsage": "show_per_ipu_memory",
    "colours": "colours",
    "executionTotals": "execution_totals",
}


@dataclasses.dataclass
class SummaryOptions:
    """What the summary shows; the names follow Poplar's printProfileSummary options."""

    show_var_storage: bool = False
    show_optimizations: bool = False
    show_execution_steps: bool = False
    show_per_ipu_memory: bool = False
    colours: bool | None = None  # None: decide from the terminal and the environment
    execution_totals: bool = False  # the older Execution layout: totals over all tiles, not tile averages

    @classmethod
    def from_poplar(cls, options: Mapping[str, object] | None = None, **kwargs: object) -> SummaryOptions:
        """Options from Poplar-style names (showVarStorage="true") or from field names."""
        values: dict[str, Any] = {}  # field names checked; strings parsed, other values passed as given
        for source in (options or {}, kwargs):
            for key, value in source.items():
                field = _OPTION_NAMES.get(key, key)
                if field not in cls.__dataclass_fields__:
                    raise ValueError(
                        f"unknown profile summary option {key!r}; expected one of {', '.join(_OPTION_NAMES)}"
                    )
                if isinstance(value, str):
                    if value.lower() not in ("true", "false"):
                        raise ValueError(f"option {key!r} must be 'true' or 'false', got {value!r}")
                    value = value.lower() == "true"
                values[field] = value
        return cls(**values)


def use_colour(requested: bool | None, stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Whether to colour: CLICOLOR_FORCE=1 forces it, NO_COLOR or CLICOLOR=0 forbid it, else the option, else a tty."""
    env = os.environ if environ is None else environ
    if env.get("CLICOLOR_FORCE", "0") not in ("", "0"):
        return True
    if env.get("NO_COLOR"):
        return False
    if env.get("CLICOLOR") == "0":
        return False
    if requested is not None:
        return requested
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class _Style:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text

    def heading(self, text: str) -> str:
        return self._wrap("1", text)

    def warn(self, text: str) -> str:
        return self._wrap("31", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)


# -- number formats ----------------------------------------------------------------------------


#: What is printed for a figure the source did not record.
NOT_RECORDED = "not recorded"


def _n(value: float | int) -> str:
    return f"{int(value):,}"


def _kb(value: float) -> str:
    return f"{value / 1024:,.1f} kB"


def _mb(value: float) -> str:
    return f"{value / 1024 / 1024:,.1f} MB"


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


# -- data -----------------------------------------------------------------------------------


class _Data:
    """Everything the summary prints, read from a report with bulk queries."""

    def __init__(self, reader: ProfileReader) -> None:
        self.r = reader
        self.t = reader.target
        self.g = reader.graph
        self.categories = dict(reader.category_id_names(MAX_NAME))
        memory = reader.tile_memory()
        self.tile_ids = np.array([m[0] for m in memory], dtype=np.int64)
        self.memory = np.array([m[1:] for m in memory], dtype=np.int64).reshape(len(memory), 6)
        #: "table.column" figures the source did not record
        self.missing = reader.not_recorded()
        #: device-wide memory figures of a converted text summary, used when there are no per-tile rows
        self.totals = reader.summary_memory_totals() if not len(memory) else None

    def recorded(self, table: str, column: str) -> bool:
        if table == "target" and column in ("num_tiles", "tiles_per_replica"):
            # products of the tiles per IPU and the IPUs
            return self.recorded("target", "tiles_per_ipu") and self.recorded("target", "num_ipus")
        return f"{table}.{column}" not in self.missing

    def tile_memory(self, tiles: np.ndarray | None = None) -> np.ndarray:
        """Rows of (total, including gaps, interleaved, non-interleaved, overflowed, always-live) per tile."""
        if tiles is None:
            return self.memory
        return self.memory[np.isin(self.tile_ids, tiles)]

    def categories_by_overlap(self, tiles: np.ndarray | None = None) -> dict[int, dict[str, int]]:
        """Bytes per category name for overlapped (1) and non-overlapped (0) memory."""
        result: dict[int, dict[str, int]] = {0: defaultdict(int), 1: defaultdict(int)}
        if tiles is None:
            for category, overlapped, total in self.r.memory_by_category_and_overlap():
                result[1 if overlapped else 0][self.categories.get(category, str(category))] += int(total)
            return result
        matrix = self.r.matrix("memory_category_by_tile")
        if matrix is None:
            return result
        rows = matrix.take(tiles)
        sums = rows.sum(axis=0, dtype=np.uint64)
        for index, (_cid, name) in enumerate(sorted(self.categories.items())):
            base = 6 * index
            result[0][name] += int(sums[base] + sums[base + 2] + sums[base + 4])
            result[1][name] += int(sums[base + 1] + sums[base + 3] + sums[base + 5])
        return result

    def vertex_memory(self, tiles: np.ndarray | None = None) -> tuple[dict[str, int], list[tuple[str, int]]]:
        """Vertex data bytes by category and total vertex memory by type."""
        tile_list = None if tiles is None else tiles.tolist()
        row = self.r.vertex_memory_totals(tile_list)
        by_category = dict(
            zip(
                ("Internal vertex state", "Edge pointers", "Copy pointers", "Padding", "Descriptors"),
                (int(v) for v in row),
            )
        )
        by_type = self.r.vertex_memory_by_type(tile_list, MAX_NAME)
        return by_category, [(name, int(b)) for name, b in by_type]


# -- sections -------------------------------------------------------------------------------


def _target_lines(d: _Data, s: _Style) -> Iterator[str]:
    t = d.t
    yield s.heading("Target:")
    rows = [
        ("Number of IPUs:", "num_ipus", _n),
        ("Tiles per IPU:", "tiles_per_ipu", _n),
        ("Total Tiles:", "num_tiles", _n),
        ("Memory Per-Tile:", "bytes_per_tile", _kb),
        ("Total Memory:", "total_memory", _mb),
        ("Clock Speed (approx):", "clock_frequency", lambda v: f"{v / 1e6:,.1f} MHz"),
        ("Number of Replicas:", "num_replicas", _n),
        ("IPUs per Replica:", "ipus_per_replica", _n),
        ("Tiles per Replica:", "tiles_per_replica", _n),
        ("Memory per Replica:", "memory_per_replica", _mb),
    ]
    for label, column, fmt in rows:
        value = fmt(t[column]) if d.recorded("target", column) else NOT_RECORDED
        yield f"  {label:<23} {value}"


def _graph_lines(d: _Data, s: _Style) -> Iterator[str]:
    g = d.g
    yield s.heading("Graph:")
    for label, value in (
        ("Number of vertices:", g["num_vertices"]),
        ("Number of edges:", g["num_edges"]),
        ("Number of variables:", g["num_vars"]),
        ("Number of compute sets:", g["num_compute_sets"]),
    ):
        column = {
            "Number of vertices:": "num_vertices",
            "Number of edges:": "num_edges",
            "Number of variables:": "num_vars",
            "Number of compute sets:": "num_compute_sets",
        }[label]
        yield f"  {label:<24} {_n(value) if d.recorded('graph', column) else NOT_RECORDED:>12}"


def _optimisation_lines(d: _Data, s: _Style) -> Iterator[str]:
    metrics = d.r.optimisation_metrics_by_name()
    yield s.heading("Optimizations:")
    if not metrics:
        yield "  (none recorded)"
    width = max((len(name) for name, _ in metrics), default=0)
    for name, value in metrics:
        text = _n(value) if float(value).is_integer() else f"{value:,.3f}"
        yield f"  {name + ':':<{width + 1}} {text:>14}"


def _memory_usage_lines(d: _Data, s: _Style, tiles: np.ndarray | None, indent: str = "") -> Iterator[str]:
    mem = d.tile_memory(tiles)
    total, including, interleaved, non_interleaved, overflowed = (int(mem[:, i].sum()) for i in range(5))
    by_overlap = d.categories_by_overlap(tiles)
    if d.totals is not None and tiles is None:
        totals = d.totals
        total, including, interleaved, non_interleaved, overflowed = (
            int(totals.get(k) or 0)
            for k in ("total", "total_including_gaps", "interleaved", "non_interleaved", "overflowed")
        )
        by_overlap = {
            0: defaultdict(int, {k: int(v) for k, v in (totals.get("by_category") or {}).items()}),
            1: defaultdict(int),
        }
    yield indent + s.heading("Memory Usage:")
    yield indent + "  Total:"
    yield indent + f"    Including Gaps:    {_n(including):>15} B"
    yield indent + "    Excluding Gaps:"
    yield indent + "      By Memory Region:"
    yield indent + f"        Non-interleaved: {_n(non_interleaved):>13} B"
    yield indent + f"        Interleaved:     {_n(interleaved):>13} B"
    overflow_text = f"{_n(overflowed):>13} B"
    yield indent + f"        Overflowed:      {s.warn(overflow_text) if overflowed else overflow_text}"
    yield indent + f"      Total:             {_n(total):>13} B"
    yield indent + "      By Data Type:"
    not_overlapped_total = 0
    for overlapped, title in ((0, "Not Overlapped"), (1, "Overlapped")):
        values = by_overlap[overlapped]
        shown = values if overlapped else {**dict.fromkeys(ALWAYS_SHOWN, 0), **values}
        rows = [
            (DATA_TYPE_LABELS.get(name, name), shown[name])
            for name in _category_order(shown)
            if shown[name] or (not overlapped and name in ALWAYS_SHOWN)
        ]
        if not rows and overlapped:
            continue
        yield indent + f"        {title}"
        for label, value in rows:
            yield indent + f"            {label + ':':<36} {_n(value):>13} B"
        subtotal = sum(v for _, v in rows)
        yield indent + f"          {'Total:':<38} {_n(subtotal):>13} B"
        if overlapped:
            yield (
                indent + f"          {'Total After Overlapping:':<38} {_n(max(0, total - not_overlapped_total)):>13} B"
            )
        else:
            not_overlapped_total = subtotal
    by_category, by_type = d.vertex_memory(tiles)
    yield indent + f"      Vertex Data ({_n(sum(by_category.values()))}B):"
    yield indent + "        By Category:"
    for label, value in by_category.items():
        yield indent + f"          {label + ':':<22} {_n(value):>14} B"
    if by_type:
        yield indent + "        By Type:"
        width = max(len(name) for name, _ in by_type)
        for name, value in by_type:
            yield indent + f"          {name:<{width}} {_n(value):>14} B"


def _category_order(values: Mapping[str, int]) -> list[str]:
    known = [name for name in DATA_TYPE_LABELS if name in values]
    return known + sorted(name for name in values if name not in DATA_TYPE_LABELS)


def histogram_lines(totals: np.ndarray, max_bins: int = 128) -> list[str]:
    """The "Range (KB) Histogram" rows for per-tile byte totals (62 columns wide, as Poplar prints)."""
    if totals.size == 0:
        return []
    low_kb = int(totals.min()) // 1024
    high_kb = int(totals.max()) // 1024 + 1
    width = 1
    while math.ceil(high_kb / width) - low_kb // width > max_bins:
        width *= 2
    first = (low_kb // width) * width
    edges = list(range(first, high_kb + width, width))
    if edges[-1] < high_kb:
        edges.append(edges[-1] + width)
    counts, _ = np.histogram(totals // 1024, bins=np.array(edges))
    top = int(counts.max()) if counts.size else 0
    digits = len(str(edges[-1]))
    lines = []
    for lo, hi, count in zip(edges[:-1], edges[1:], counts):
        stars = 0 if count == 0 else max(1, int(count * 40 / top + 0.5))
        label = f"{lo:>{digits}} - {hi:>{digits}}"
        lines.append(f"    {label:>10} {'*' * stars:<40}{_n(count):>7}")
    return lines


def _by_tile_lines(d: _Data, s: _Style, tiles: np.ndarray | None) -> Iterator[str]:
    mem = d.tile_memory(tiles)
    ids = d.tile_ids if tiles is None else d.tile_ids[np.isin(d.tile_ids, tiles)]
    if mem.shape[0] == 0 and d.totals is not None and tiles is None:
        yield "  By Tile (Excluding Gaps):"
        for label, key in (("Including Gaps", "max_tile_including_gaps"), ("Excluding Gaps", "max_tile")):
            best = d.totals.get(key) or {}
            if best.get("bytes") is None:
                yield f"    Maximum ({label}): {NOT_RECORDED}"
                continue
            value = int(best["bytes"])
            yield f"    Maximum ({label}): {_n(value)} ({value / 1024:,.1f} K) on tile {best.get('tile')}"
        largest = (d.totals.get("max_tile_including_gaps") or {}).get("bytes")
        if largest is not None and d.recorded("target", "bytes_per_tile") and int(largest) <= d.t["bytes_per_tile"]:
            yield "    0 tile(s) out of memory"  # the largest tile fits, so every tile does
        return
    if mem.shape[0] == 0:
        return
    yield "  By Tile (Excluding Gaps):"
    yield "    Range (KB) Histogram (Excluding Gaps)               Count (tiles)"
    yield from histogram_lines(mem[:, 0])
    yield ""
    for label, column in (("Including Gaps", 1), ("Excluding Gaps", 0)):
        index = int(np.argmax(mem[:, column]))
        value = int(mem[index, column])
        yield f"    Maximum ({label}): {_n(value)} ({value / 1024:,.1f} K) on tile {int(ids[index])}"
    oom = int((mem[:, 1] > d.t["bytes_per_tile"]).sum())
    text = f"    {oom} tile(s) out of memory"
    yield s.warn(text) if oom else text


def _oom_tile_lines(d: _Data, s: _Style) -> Iterator[str]:
    over = np.flatnonzero(d.memory[:, 1] > d.t["bytes_per_tile"])
    worst = over[np.argsort(-d.memory[over, 1], kind="stable")][:5]
    for index in worst:
        tile = int(d.tile_ids[index])
        yield ""
        yield s.warn(f"Tile # {tile} memory usage:")
        yield from _memory_usage_lines(d, s, np.array([tile]))


def _liveness_lines(d: _Data, s: _Style, show_var_storage: bool) -> Iterator[str]:
    r = d.r
    always = r.always_live_variables(MAX_NAME)
    always_bytes = int(d.memory[:, 5].sum()) if d.memory.size else 0
    if not always_bytes:
        always_bytes = sum(int(b) for _, b in always)
    peak = r.peak_not_always_live_bytes()
    yield ""
    yield "  " + s.heading("Variable Storage Liveness: All tiles")
    yield ""
    yield f"    Always-live bytes: {_n(always_bytes)}"
    if always:
        yield "    Always-live variables:"
        width = max(len(name) for name, _ in always)
        for name, value in always:
            yield f"      {name:<{width}} {_n(value):>12}"
    yield ""
    yield f"    Maximum live bytes (including always-live): {_n(always_bytes + int(peak))}"
    if show_var_storage:
        yield ""
        yield from _var_storage_tree(d)


def live_variables_by_step(reader: ProfileReader) -> Iterator[tuple[int, dict[str, int]]]:
    """(liveness step, {variable name: bytes}) for every step, from lowered variables and their classes."""
    class_vars: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for cls, name, size in reader.not_always_live_bytes_by_class(MAX_NAME):
        class_vars[cls][name] += int(size)
    intervals = reader.equivalence_class_intervals()
    steps = reader.liveness_step_ids()
    active: dict[tuple[int, int], int] = {}
    position = 0
    for step in steps:
        while position < len(intervals) and intervals[position][1] <= step:
            cls, start, end = intervals[position]
            active[(cls, start)] = end
            position += 1
        for key in [k for k, end in active.items() if end <= step]:
            del active[key]
        live: dict[str, int] = defaultdict(int)
        for cls, _start in active:
            for name, size in class_vars.get(cls, {}).items():
                live[name] += size
        yield step, live


def _var_storage_tree(d: _Data) -> Iterator[str]:
    r = d.r
    rows = r.liveness_steps_labelled(MAX_NAME)
    live = live_variables_by_step(r)
    for (_step, depth, live_bytes, type_name, name), (_step, variables) in zip(rows, live):
        pad = "    " + "  " * min(max(int(depth), 0), _MAX_DEPTH)
        title = type_name or "Unknown"
        if name and type_name not in ("Sequence",):
            title += f": {name}"
        yield pad + title
        if type_name == "Sequence":
            continue
        yield pad + f"  Live Bytes (excluding always-live): {_n(live_bytes)}"
        if variables:
            yield pad + "  Live Vars (excluding always-live):"
            width = max(len(n) for n in variables)
            for var_name in sorted(variables):
                yield pad + f"    {var_name:<{width}} {_n(variables[var_name]):>12}"


def _execution_lines(d: _Data, s: _Style, show_steps: bool, totals_layout: bool = False) -> Iterator[str]:
    r = d.r
    runs = r.row_count("runs")
    yield s.heading("Execution:")
    yield ""
    if not runs:
        yield "  No execution profile: the report holds compilation information only."
        return
    total_cycles = int(r.total_run_cycles())
    clock = d.t["clock_frequency"] if d.recorded("target", "clock_frequency") else 0
    time = f" (approx {total_cycles / (clock / 1e6):,.1f} microseconds)" if clock else ""
    columns = {
        "active_compute": ("active_compute",),
        "compute": ("compute",),
        "internal_exchange": ("internal_exchange",),
        "inter_ipu_exchange": ("inter_ipu_exchange",),
        "stream_copy": ("stream_copy_begin", "stream_copy", "stream_copy_end"),
        "sync": ("sync",),
    }
    unknown = {kind for kind, cols in columns.items() if any(not d.recorded("cycle_totals", c) for c in cols)}
    totals = r.cycle_totals_by_kind()
    active, compute, internal, global_, host, sync, have_totals = (
        int(totals[k])
        for k in ("active_compute", "compute", "internal_exchange", "inter_ipu_exchange", "stream_copy", "sync", "rows")
    )
    tiles = d.t["num_tiles"] if d.recorded("target", "tiles_per_ipu") and d.recorded("target", "num_ipus") else 0

    def total(value: int, kind: str) -> str:
        return NOT_RECORDED if kind in unknown else _n(value)

    if totals_layout or not have_totals or not tiles:
        rows = [("Total cycles:", f"{_n(total_cycles)}{time}")]
        if have_totals:
            rows += [
                ("Total compute cycles (including idle threads):", total(compute, "compute")),
                ("Total compute cycles (excluding idle threads):", total(active, "active_compute")),
                ("Total IPU exchange cycles:", total(internal, "internal_exchange")),
                ("Total global exchange cycles:", total(global_, "inter_ipu_exchange")),
                ("Total host exchange cycles:", total(host, "stream_copy")),
                ("Total shared structure copy cycles:", "0"),
                ("Total sync cycles:", total(sync, "sync")),
                (
                    "Total tile balance:",
                    NOT_RECORDED
                    if "compute" in unknown or not tiles
                    else _pct(compute / (total_cycles * tiles))
                    if total_cycles
                    else "0.0%",
                ),
                (
                    "Total thread balance:",
                    NOT_RECORDED
                    if unknown & {"compute", "active_compute"}
                    else _pct(active / compute)
                    if compute
                    else "0.0%",
                ),
            ]
        width = 46
    else:

        def average(value: int, kind: str) -> str:
            if kind in unknown:
                return NOT_RECORDED
            mean = value / tiles
            share = mean / total_cycles if total_cycles else 0.0
            return f"{mean:,.1f} ({_pct(share)} of total)"

        rows = [
            ("Total cycles:", f"{_n(total_cycles)}{time}"),
            ("Tile average compute cycles (including idle threads):", average(compute, "compute")),
            ("Tile average compute cycles (excluding idle threads):", average(active, "active_compute")),
            ("Tile average IPU exchange cycles:", average(internal, "internal_exchange")),
            ("Tile average global exchange cycles:", average(global_, "inter_ipu_exchange")),
            ("Tile average host exchange cycles:", average(host, "stream_copy")),
            ("Tile average sync cycles:", average(sync, "sync")),
        ]
        width = 53
    for label, value in rows:
        yield f"  {label:<{width}} {value}"
    by_type, estimated = _cycles_by_vertex_type(r)
    if by_type:
        yield ""
        yield (
            "  (Cycles by vertex type are estimated from the cycle estimates, not measured.)"
            if estimated
            else "  (Cycles by vertex type are measured by vertex instrumentation.)"
        )
        yield "  Cycles by vertex type:"
        width = max(len(name) for name, _, _ in by_type)
        inst_width = max(len(f"({count} instances):") for _, count, _ in by_type)
        for name, count, cycles in by_type:
            yield f"    {name:<{width}} {f'({count} instances):':>{inst_width}} {_n(cycles):>12}"
    run_time = _run_time(r)
    if run_time["total_cycles"]:
        yield ""
        yield "  Run time by step type (each cycle once; overlaps go to compute, then exchange, stream copy, sync):"
        width = max(len(name) for name in run_time["by_type"])
        for name, cycles in run_time["by_type"].items():
            yield f"    {name:<{width}} {_n(cycles):>12} ({_pct(cycles / run_time['total_cycles'])})"
    if show_steps:
        yield ""
        yield from _step_lines(d, s)


def _cycles_by_vertex_type(r: ProfileReader) -> tuple[list[tuple[str, int, int]], bool]:
    instances = dict(r.vertex_instances_by_type())
    names = dict(r.vertex_type_names(MAX_NAME))
    measured = r.measured_cycles_by_vertex_type()
    estimated = False
    if not measured:
        measured = r.estimated_cycles_by_vertex_type()
        estimated = bool(measured)
    rows = [(names.get(vt, str(vt)), int(instances.get(vt, 0)), int(c)) for vt, c in measured if c]
    rows.sort(key=lambda row: (-row[2], row[0]))
    return rows, estimated


def _step_lines(d: _Data, s: _Style) -> Iterator[str]:
    r = d.r
    num_ipus = d.t["num_ipus"]
    tiles_per_ipu = d.t["tiles_per_ipu"]
    yield "  " + s.heading("Steps")
    vertex_cycles: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
    for step, name, count, cycles in r.vertex_cycles_by_step(MAX_NAME):
        vertex_cycles[step].append((name, count, cycles))
    steps = [
        (sid, kind, name, sync_type, overlapped)
        for sid, kind, _program, _cs, name, sync_type, overlapped in r.steps_labelled(MAX_NAME)
    ]
    per_ipu = r.step_ipu_figures()
    by_step: dict[int, list[tuple]] = defaultdict(list)
    for row in per_ipu:
        by_step[row[0]].append(row)
    for step, type_name, name, sync_type, overlapped in steps:
        if type_name == "Sync":
            kind = "External" if sync_type == "External" else "Internal"
            yield s.dim(f"    --- {kind} Sync ---")
            continue
        for row in by_step.get(step, []):
            _sid, ipu, profiled, cycles, active, start, end, thread, tile_bal, active_bal, data, data_bal = row
            where = f" on IPU {ipu}" if num_ipus > 1 else ""
            suffix = f": {name}" if name else ""
            yield f"    {type_name} (cycles {_n(start)} - {_n(end)}){where}{suffix}"
            if not profiled:
                yield "      (not profiled)"
                continue
            lines = []
            cycles_text = _n(cycles)
            if type_name in ("OnTileExecute", "DoExchange"):
                cycles_text += f" ({_n(overlapped)} overlapped with previous)"
            lines.append(("Cycles:", cycles_text))
            lines.append(("Active Tiles:", f"{_n(active)} / {_n(tiles_per_ipu)}"))
            if type_name == "OnTileExecute":
                lines.append(("Thread Balance:", _pct(thread)))
            lines.append(("Tile Balance:", _pct(tile_bal)))
            lines.append(("Active Tile Balance:", _pct(active_bal)))
            if type_name not in ("OnTileExecute",):
                lines.append(("Total Data:", f"{_n(data)} B"))
                lines.append(("Data Balance (mean / max data per tile):", _pct(data_bal)))
            for label, value in lines:
                yield f"      {label:<35} {value}"
            if type_name == "OnTileExecute" and vertex_cycles.get(step):
                yield "      By vertex type:"
                entries = vertex_cycles[step]
                width = max(len(n) for n, _, _ in entries)
                for vname, count, vcycles in entries:
                    yield f"        {vname:<{width}} {f'({count} instances):':>20} {_n(vcycles):>12}"


def summary_lines(reader: ProfileReader, options: SummaryOptions, colour: bool = False) -> Iterator[str]:
    """The lines of the profile summary of a report."""
    d = _Data(reader)
    s = _Style(colour)
    yield from _target_lines(d, s)
    yield ""
    yield from _graph_lines(d, s)
    yield ""
    if options.show_optimizations:
        yield from _optimisation_lines(d, s)
        yield ""
    if d.t["ipus_per_replica"] > 1:
        yield s.heading("Memory on all IPUs:")
    yield from _memory_usage_lines(d, s, None)
    yield ""
    yield from _by_tile_lines(d, s, None)
    yield from _oom_tile_lines(d, s)
    if options.show_per_ipu_memory:
        tiles_per_ipu = d.t["tiles_per_ipu"]
        for ipu in range(d.t["ipus_per_replica"]):
            tiles = np.arange(ipu * tiles_per_ipu, (ipu + 1) * tiles_per_ipu)
            yield ""
            yield s.heading(f"Memory on IPU {ipu}:")
            yield from _memory_usage_lines(d, s, tiles)
            yield ""
            yield from _by_tile_lines(d, s, tiles)
    yield from _liveness_lines(d, s, options.show_var_storage)
    yield ""
    yield from _execution_lines(d, s, options.show_execution_steps, options.execution_totals)


def printProfileSummary(
    report, file: TextIO | None = None, options: Mapping[str, object] | None = None, **kwargs: object
) -> None:
    """Print the profile summary of a report (a pva Report or a path) as Poplar's printProfileSummary does.

    Options use Poplar's names, as a dict or keywords: showVarStorage, showOptimizations,
    showExecutionSteps, showPerIpuMemoryUsage and colours ("true"/"false" or booleans).

    >>> pva.printProfileSummary(report, showExecutionSteps=True)     # doctest: +SKIP
    """
    out = sys.stdout if file is None else file
    parsed = SummaryOptions.from_poplar(options, **kwargs)
    colour = use_colour(parsed.colours, out)
    if isinstance(report, (str, os.PathLike)):
        reader = ProfileReader(report)
        try:
            for line in summary_lines(reader, parsed, colour):
                out.write(line + "\n")
        finally:
            reader.close()
        return
    for line in summary_lines(report._reader, parsed, colour):
        out.write(line + "\n")


def summary_data(reader: ProfileReader) -> dict:
    """The summary's figures as a dictionary (what `pva summary --json` prints)."""
    d = _Data(reader)
    t = d.t
    mem = d.tile_memory()
    by_overlap = d.categories_by_overlap()
    by_category, by_type = d.vertex_memory()
    peak = reader.peak_not_always_live_bytes()
    always = int(mem[:, 5].sum()) if mem.size else 0

    def known(table: str, values: dict) -> dict:
        return {k: (v if d.recorded(table, k) else None) for k, v in values.items()}

    data: dict = {
        "target": known(
            "target",
            {
                "num_ipus": t["num_ipus"],
                "tiles_per_ipu": t["tiles_per_ipu"],
                "num_tiles": t["num_tiles"],
                "bytes_per_tile": t["bytes_per_tile"],
                "total_memory": t["total_memory"],
                "clock_frequency": t["clock_frequency"],
                "num_replicas": t["num_replicas"],
                "ipus_per_replica": t["ipus_per_replica"],
                "tiles_per_replica": t["tiles_per_replica"],
                "memory_per_replica": t["memory_per_replica"],
            },
        ),
        "graph": known("graph", dict(d.g)),
        "memory": {
            "including_gaps": int(mem[:, 1].sum()),
            "excluding_gaps": int(mem[:, 0].sum()),
            "interleaved": int(mem[:, 2].sum()),
            "non_interleaved": int(mem[:, 3].sum()),
            "overflowed": int(mem[:, 4].sum()),
            "not_overlapped": {k: v for k, v in by_overlap[0].items() if v},
            "overlapped": {k: v for k, v in by_overlap[1].items() if v},
            "vertex_data": by_category,
            "vertex_memory_by_type": dict(by_type),
            "max_tile_including_gaps": _max_tile(d, mem, 1),
            "max_tile_excluding_gaps": _max_tile(d, mem, 0),
            "tiles_out_of_memory": int((mem[:, 1] > t["bytes_per_tile"]).sum()) if mem.size else 0,
        },
        "not_recorded": sorted(d.missing),
        "liveness": {
            "always_live_bytes": always,
            "peak_not_always_live_bytes": int(peak),
            "max_live_bytes": always + int(peak),
        },
    }
    if d.totals is not None:
        totals_ = d.totals
        memory = data["memory"]
        memory.update(
            {
                "including_gaps": totals_.get("total_including_gaps"),
                "excluding_gaps": totals_.get("total"),
                "interleaved": totals_.get("interleaved"),
                "non_interleaved": totals_.get("non_interleaved"),
                "overflowed": totals_.get("overflowed"),
                "not_overlapped": {k: v for k, v in (totals_.get("by_category") or {}).items() if v},
                "max_tile_including_gaps": totals_.get("max_tile_including_gaps"),
                "max_tile_excluding_gaps": totals_.get("max_tile"),
                "tiles_out_of_memory": None,
            }
        )
    cycle_totals = reader.cycle_totals_by_kind()
    totals = [
        cycle_totals[k]
        for k in (
            "active_compute",
            "compute",
            "internal_exchange",
            "inter_ipu_exchange",
            "stream_copy",
            "sync",
            "total",
        )
    ]
    total_cycles = int(reader.total_run_cycles())
    by_vertex, estimated = _cycles_by_vertex_type(reader)
    clock = t["clock_frequency"] if d.recorded("target", "clock_frequency") else 0
    kind_columns = dict(
        zip(
            ("active_compute", "compute", "internal_exchange", "global_exchange", "host_exchange", "sync", "total"),
            (
                ("active_compute",),
                ("compute",),
                ("internal_exchange",),
                ("inter_ipu_exchange",),
                ("stream_copy_begin", "stream_copy", "stream_copy_end"),
                ("sync",),
                ("total",),
            ),
        )
    )
    data["execution"] = {
        "runs": reader.row_count("runs"),
        "steps": reader.row_count("steps"),
        "total_cycles": total_cycles,
        "microseconds": total_cycles / (clock / 1e6) if clock else None,
        "tile_cycles": {
            kind: (int(v) if all(d.recorded("cycle_totals", c) for c in kind_columns[kind]) else None)
            for kind, v in zip(kind_columns, totals)
        },
        "run_time": _run_time(reader),
        "cycles_by_vertex_type": [{"vertex_type": n, "instances": c, "cycles": cy} for n, c, cy in by_vertex],
        "cycles_by_vertex_type_estimated": estimated,
    }
    return data


def _run_time(reader: ProfileReader) -> dict:
    """The run's cycles by step type, each counted once (pva optime's figures, pva.analysis.optime)."""
    from .optime import run_time_by_type

    by_type = run_time_by_type(reader)
    return {"total_cycles": sum(by_type.values()), "by_type": by_type}


def _max_tile(d: _Data, mem: np.ndarray, column: int) -> dict:
    if mem.shape[0] == 0:
        return {"tile": None, "bytes": 0}
    index = int(np.argmax(mem[:, column]))
    return {"tile": int(d.tile_ids[index]), "bytes": int(mem[index, column])}
