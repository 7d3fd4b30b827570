"""The figures the HTML report and `pva plot` draw, read from a report's query layer with numpy.

Every function takes a `formats.pop.reader.ProfileReader` (its query layer) and returns plain data (numpy
arrays, lists, numbers); large series are downsampled here, and each result says what it
downsampled so the page and the plots can tell the reader.
"""

from __future__ import annotations

import math
import os

import numpy as np

from formats.pop.reader import ProfileReader

from ..chart_options import Limits
from ..summary import summary_data
from ..timeline import lanes, merge_short, step_rank

#: Colours of storage categories, in stacking order (Tableau 10); "other" and "gaps" follow.
CATEGORY_COLOURS = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#86bcb6",
)
OTHER_COLOUR = "#8c8c8c"
GAPS_COLOUR = "#d9d9d9"
ALWAYS_LIVE_COLOUR = "#9c755f"
NOT_ALWAYS_LIVE_COLOUR = "#4e79a7"
LIMIT_COLOUR = "#d62728"

#: Colours of execution steps by Program.Type name; other types take FALLBACK_COLOURS in turn.
TYPE_COLOURS = {
    "OnTileExecute": "#4e79a7",
    "DoExchange": "#f28e2b",
    "GlobalExchange": "#b07aa1",
    "StreamCopyBegin": "#59a14f",
    "StreamCopyMid": "#8cd17d",
    "StreamCopyEnd": "#3b7a32",
    "Sync": "#bab0ac",
    "SyncAns": "#79706e",
    "Sans": "#d4a6c8",
    "Call": "#edc948",
    "Repeat": "#86bcb6",
    "Sequence": "#d7d7d7",
    "WriteUndef": "#ff9da7",
}
FALLBACK_COLOURS = ("#e15759", "#76b7b2", "#9d7660", "#f1ce63", "#499894", "#d37295", "#a0cbe8")


#: Characters of a name shown in a chart, a title or a table; longer names keep their start and end.
MAX_NAME = 200
#: Characters of a report's name in a chart's title.
MAX_TITLE_NAME = 80


def cut(text: str | None, limit: int = MAX_NAME) -> str:
    """`text` for display: whole up to `limit` characters, else its start and end around an ellipsis ("" for None)."""
    text = "" if text is None else str(text)
    if len(text) <= limit:
        return text
    head = (limit * 3) // 5
    return text[:head] + "\u2026" + text[len(text) - (limit - head - 1) :]


def type_colour(name: str, index: int = 0) -> str:
    """The colour of a Program.Type name."""
    return TYPE_COLOURS.get(name) or FALLBACK_COLOURS[index % len(FALLBACK_COLOURS)]


def _luminance(colour: str) -> float:
    """WCAG relative luminance of a #rrggbb colour."""
    channels = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_on_white(colour: str) -> float:
    """WCAG contrast ratio of a #rrggbb colour against white."""
    return 1.05 / (_luminance(colour) + 0.05)


def text_colour(name: str, index: int = 0) -> str:
    """The colour of a Program.Type name written as text on white: its chart colour, darkened until the text
    reads (WCAG contrast 4.5:1), so light greys such as Sequence and Sync stay legible."""
    colour = type_colour(name, index)
    channels = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    while contrast_on_white("#" + "".join(f"{c:02x}" for c in channels)) < 4.5:
        channels = [int(c * 0.9) for c in channels]
    return "#" + "".join(f"{c:02x}" for c in channels)


def _buckets(count: int, limit: int) -> int:
    """Items per bucket so that `count` items make at most `limit` buckets."""
    return max(1, math.ceil(count / max(1, limit)))


def _bucket_reduce(values: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, max, index of the max) of consecutive buckets of `size` values."""
    n = values.shape[0]
    if size <= 1:
        return values.astype(np.float64), values.copy(), np.arange(n)
    starts = np.arange(0, n, size)
    counts = np.diff(np.append(starts, n))
    sums = np.add.reduceat(values, starts)
    maxima = np.maximum.reduceat(values, starts)
    padded = np.full(len(starts) * size, np.iinfo(np.int64).min, dtype=np.int64)
    padded[:n] = values
    where = padded.reshape(len(starts), size).argmax(axis=1) + starts
    return sums / counts, maxima, where


# -- summary --------------------------------------------------------------------------------


def report_title(reader: ProfileReader) -> str:
    """How a chart names its report: the report's directory (or file name) and its program or preset name."""
    path = os.path.abspath(reader.path)
    name = os.path.basename(path)
    directory = os.path.basename(os.path.dirname(path))
    where = directory if name == "profile.pop" and directory else name
    program = reader.metadata.get("program_name", "")
    where, shown = cut(where, MAX_TITLE_NAME), cut(program, MAX_TITLE_NAME)
    return f"{where} ({shown})" if program and program != where else where


def summary(reader: ProfileReader, figures: dict | None = None) -> dict:
    """The summary card: source, target, graph counts, cycles and time, memory and liveness totals."""
    figures = summary_data(reader) if figures is None else figures
    t = reader.target
    execution = figures["execution"]
    memory = figures["memory"]
    return {
        "source": os.path.basename(reader.path),
        "name": report_title(reader),
        "producer": " ".join(
            v for v in (reader.metadata.get("producer"), reader.metadata.get("producer_version")) if v
        ),
        "poplar_version": reader.metadata.get("poplar_version") or "",
        "created": reader.metadata.get("created") or "",
        # figures["target"] holds None for what the source did not record
        "target": {
            k: figures["target"].get(k, t[k])
            for k in (
                "type",
                "architecture",
                "num_ipus",
                "tiles_per_ipu",
                "num_tiles",
                "bytes_per_tile",
                "clock_frequency",
                "num_replicas",
                "ipus_per_replica",
                "tiles_per_replica",
            )
        },
        "graph": dict(figures["graph"]),
        "execution": {
            "runs": execution["runs"],
            "steps": execution["steps"],
            "total_cycles": execution["total_cycles"],
            "microseconds": execution["microseconds"],
        },
        "memory": {
            "including_gaps": memory["including_gaps"],
            "excluding_gaps": memory["excluding_gaps"],
            "tiles_out_of_memory": memory["tiles_out_of_memory"],
            "max_tile": memory["max_tile_including_gaps"],
        },
        "liveness": dict(figures["liveness"]),
    }


# -- memory ---------------------------------------------------------------------------------


def memory(reader: ProfileReader, limits: Limits = Limits()) -> dict | None:
    """Memory per tile by category, per IPU of one replica, with the tile limit and out-of-memory tiles.

    Categories are stacked largest first (top `limits.top_categories`, then "other", then "gaps":
    memory including gaps minus the categories; `gaps` is its index, drawn only on request). With
    more tiles per IPU than `limits.max_tiles`, tiles are grouped into buckets: each bar is the
    bucket's mean, `max` its largest tile including gaps, `max_excluding` excluding them.
    """
    t = reader.target
    num_tiles, per_ipu, ipus = t["tiles_per_replica"], t["tiles_per_ipu"], t["ipus_per_replica"]
    limit = int(t["bytes_per_tile"])
    rows = [row[:3] for row in reader.tile_memory()]
    if not rows:
        return None
    table = np.array(rows, dtype=np.int64).reshape(len(rows), 3)
    keep = (table[:, 0] >= 0) & (table[:, 0] < num_tiles)
    total = np.zeros(num_tiles, dtype=np.int64)
    including = np.zeros(num_tiles, dtype=np.int64)
    total[table[keep, 0]] = table[keep, 1]
    including[table[keep, 0]] = table[keep, 2]
    names = [name for _id, name in reader.category_id_names()]
    matrix = reader.matrix("memory_category_by_tile")
    if matrix is not None and matrix.num_rows and names and matrix.num_cols == 6 * len(names):
        block = matrix.rows(0, num_tiles).astype(np.int64)
        per_category = np.zeros((num_tiles, len(names)), dtype=np.int64)
        per_category[: block.shape[0]] = block.reshape(block.shape[0], len(names), 6).sum(axis=2)
        by_category = True
    else:
        per_category = total.reshape(-1, 1)
        names = ["total (no categories recorded)"]
        by_category = False
    sums = per_category.sum(axis=0)
    order = [int(i) for i in np.argsort(-sums, kind="stable") if sums[i] > 0]
    shown, rest = order[: limits.top_categories], order[limits.top_categories :]
    series_names = [names[i] for i in shown]
    series = [per_category[:, i] for i in shown]
    colours = [CATEGORY_COLOURS[k % len(CATEGORY_COLOURS)] for k in range(len(shown))]
    if rest:
        series_names.append(f"other ({len(rest)} categories)")
        series.append(per_category[:, rest].sum(axis=1))
        colours.append(OTHER_COLOUR)
    gaps = np.maximum(including - per_category.sum(axis=1), 0)
    gaps_index = None
    if gaps.any():
        gaps_index = len(series)
        series_names.append("gaps")
        series.append(gaps)
        colours.append(GAPS_COLOUR)
    size = _buckets(per_ipu, limits.max_tiles)
    oom = including > limit
    result_ipus = []
    for ipu in range(ipus):
        lo, hi = ipu * per_ipu, (ipu + 1) * per_ipu
        means = [np.rint(_bucket_reduce(s[lo:hi], size)[0]).astype(np.int64) for s in series]
        _mean, maxima, where = _bucket_reduce(including[lo:hi], size)
        excluding = per_category[lo:hi].sum(axis=1)
        _mean, maxima_excluding, where_excluding = _bucket_reduce(excluding, size)
        oom_counts = np.add.reduceat(oom[lo:hi].astype(np.int64), np.arange(0, per_ipu, size))
        oom_tiles = np.flatnonzero(oom[lo:hi]) + lo
        peak = int(np.argmax(including[lo:hi])) + lo
        peak_excluding = int(np.argmax(excluding)) + lo
        result_ipus.append(
            {
                "ipu": ipu,
                "first_tile": lo,
                "series": means,
                "max": maxima,
                "max_tile": where + lo,
                "max_excluding": maxima_excluding,
                "max_tile_excluding": where_excluding + lo,
                "oom": oom_counts,
                "oom_count": int(oom_tiles.size),
                "oom_tiles": oom_tiles[:50],
                "peak_tile": peak,
                "peak_bytes": int(including[peak]),
                "peak_tile_excluding": peak_excluding,
                "peak_bytes_excluding": int(excluding[peak_excluding - lo]),
                "total": int(including[lo:hi].sum()),
            }
        )
    return {
        "limit": limit,
        "names": series_names,
        "colours": colours,
        "by_category": by_category,
        "tiles_per_ipu": per_ipu,
        "bucket": size,
        "downsampled": size > 1,
        "ipus": result_ipus,
        "largest": int(including.max()) if including.size else 0,
        "largest_excluding": int(per_category.sum(axis=1).max()) if including.size else 0,
        "gaps": gaps_index,
        "tiles_out_of_memory": int(oom.sum()),
    }


# -- liveness -------------------------------------------------------------------------------


def _program_label(reader: ProfileReader, program: int | None) -> tuple[str, str]:
    if program is None:
        return "", ""
    row = reader.program_label(program)
    return (cut(row[0], MAX_TYPE), cut(row[1])) if row else ("", "")


def peak_variables(reader: ProfileReader, step: int, limit: int) -> list[tuple[str, int]]:
    """The largest not-always-live variables live in a liveness step: (name, bytes over all tiles)."""
    rows = reader.live_variables_at_step(step, limit)
    return [(cut(name), int(size)) for name, size in rows]


def liveness(reader: ProfileReader, limits: Limits = Limits(), always_live: int | None = None) -> dict | None:
    """Live memory over the liveness steps: always-live (constant) plus not-always-live, with the peak.

    With more steps than `limits.max_liveness_points`, steps are grouped into buckets and each
    bucket shows its largest value, so the peak is never lost.
    """
    rows = reader.liveness_step_summaries()
    if not rows:
        return None
    table = np.array(rows, dtype=np.int64).reshape(len(rows), 4)
    if always_live is None:
        always_live = int(reader.always_live_bytes())
    values = table[:, 3]
    peak_index = int(np.argmax(values))
    peak_step = int(table[peak_index, 0])
    program = int(table[peak_index, 1])
    kind, name = _program_label(reader, None if program < 0 else program)
    size = _buckets(len(values), limits.max_liveness_points)
    _mean, maxima, _where = _bucket_reduce(values, size)
    return {
        "steps": len(values),
        "first_step": int(table[0, 0]),
        "bucket": size,
        "downsampled": size > 1,
        "always_live": int(always_live),
        "not_always_live": maxima,
        "peak": {
            "step": peak_step,
            "index": peak_index,
            "not_always_live": int(values[peak_index]),
            "total": int(always_live) + int(values[peak_index]),
            "program_type": kind,
            "program": name,
            "depth": int(table[peak_index, 2]),
            "variables": peak_variables(reader, peak_step, limits.peak_variables),
        },
        "colours": {"always_live": ALWAYS_LIVE_COLOUR, "not_always_live": NOT_ALWAYS_LIVE_COLOUR},
    }


# -- execution timeline ---------------------------------------------------------------------


def _lane(segments: tuple[np.ndarray, ...], kinds: np.ndarray, steps: np.ndarray, resolution: int, span: int) -> dict:
    """One lane's segments (start, end, kind, step, count), short ones merged to `resolution` per span."""
    seg_start, seg_end, index = segments
    start, end, kind, step, count = merge_short(seg_start, seg_end, kinds[index], steps[index], resolution, 0, span)
    return {"start": start, "end": end, "kind": kind, "step": step, "count": count}


def timeline(reader: ProfileReader, limits: Limits = Limits()) -> dict | None:
    """Execution steps per IPU on a cycle axis, coloured by program type, in the two lanes of pva.analysis.timeline.

    Times are cycles from the earliest step start over all IPUs (cycles_base + all_cycles_from_min
    to cycles_base + all_cycles_to_max). Each IPU has its `path` (every cycle of its run to one step:
    compute, then exchange, stream copies, sync) and its `overlapped` lane (steps running beside the path's, such as a Sync
    of idle tiles); `cycles_by_type` is the path's cycles, so they add up to the IPU's busy cycles.
    With more segments than `limits.timeline_resolution`, runs of segments shorter than 1/resolution
    of the span are merged into one.
    """
    steps = [
        (sid, kind, label) for sid, kind, _p, _cs, label, _sync, _overlap in reader.steps_labelled(MAX_LABEL, MAX_TYPE)
    ]
    if not steps:
        return None
    ids = np.array([s[0] for s in steps], dtype=np.int64)
    types, type_index = _index_strings(s[1] for s in steps)
    names, name_index = _index_strings(s[2] for s in steps)
    type_rank = np.array([step_rank(t) for t in types], dtype=np.int64)
    rows = reader.step_intervals()
    if not rows:
        return None
    table = np.array(rows, dtype=np.int64).reshape(len(rows), 4)
    position = np.searchsorted(ids, table[:, 1])
    known = (position < ids.size) & (ids[np.minimum(position, ids.size - 1)] == table[:, 1])
    table, position = table[known], position[known]
    if not table.size:
        return None
    table[:, 3] = np.maximum(table[:, 3], table[:, 2])
    t0 = int(table[:, 2].min())
    span = max(1, int(table[:, 3].max()) - t0)
    result_ipus = []
    merged_any = False
    for ipu in np.unique(table[:, 0]).tolist():
        mask = table[:, 0] == ipu
        part, pos = table[mask], position[mask]
        kinds = type_index[pos]
        found = lanes(part[:, 2] - t0, part[:, 3] - t0, type_rank[kinds])
        path = _lane(found["path"], kinds, part[:, 1], limits.timeline_resolution, span)
        overlapped = _lane(found["overlapped"], kinds, part[:, 1], limits.timeline_resolution, span)
        merged_any |= path["start"].size < found["path"][0].size
        merged_any |= overlapped["start"].size < found["overlapped"][0].size
        p_start, p_end, p_index = found["path"]
        cycles_by_type = np.bincount(kinds[p_index], weights=p_end - p_start, minlength=len(types))
        first, last = int(part[:, 2].min()) - t0, int(part[:, 3].max()) - t0
        result_ipus.append(
            {
                "ipu": int(ipu),
                **path,
                "overlapped": overlapped,
                "steps": int(part.shape[0]),
                "cycles_by_type": np.rint(cycles_by_type).astype(np.int64),
                "first_cycle": first,
                "end_cycle": last,
                "idle_cycles": (last - first) - int((p_end - p_start).sum()),
            }
        )
    return {
        "t0": t0,
        "span": span,
        "types": [str(x) for x in types],
        "colours": [type_colour(str(x), i) for i, x in enumerate(types)],
        "step_ids": ids,
        "step_names": name_index,
        "names": [cut(str(x)) for x in names],
        "resolution": limits.timeline_resolution,
        "downsampled": merged_any,
        "ipus": result_ipus,
        "clock_frequency": (
            0.0 if "target.clock_frequency" in reader.not_recorded() else float(reader.target["clock_frequency"])
        ),
    }


def timeline_shares(tl: dict) -> list[tuple[str, float]]:
    """(type, percent of the IPUs' run cycles on the path) of each type present, and "idle" if any, as drawn."""
    run = sum(ipu["end_cycle"] - ipu["first_cycle"] for ipu in tl["ipus"]) or 1
    totals = np.zeros(len(tl["types"]), dtype=np.int64)
    for ipu in tl["ipus"]:
        totals += ipu["cycles_by_type"]
    shares = [(name, 100 * int(totals[i]) / run) for i, name in enumerate(tl["types"]) if totals[i] > 0]
    idle = sum(ipu["idle_cycles"] for ipu in tl["ipus"])
    if idle > 0:
        shares.append(("idle", 100 * idle / run))
    return shares


# -- cycles by vertex type and compute set --------------------------------------------------


def vertex_types(figures: dict) -> dict | None:
    """Cycles by vertex type (from summary_data), largest first."""
    rows = figures["execution"]["cycles_by_vertex_type"]
    if not rows:
        return None
    total = sum(r["cycles"] for r in rows) or 1
    return {
        "estimated": bool(figures["execution"]["cycles_by_vertex_type_estimated"]),
        "rows": [
            {
                "name": cut(r["vertex_type"]),
                "instances": r["instances"],
                "cycles": r["cycles"],
                "percent": 100 * r["cycles"] / total,
            }
            for r in rows
        ],
    }


def compute_sets(reader: ProfileReader, limits: Limits = Limits()) -> dict | None:
    """Cycles by compute set with the compiler's estimates, largest first.

    Measured cycles come from the execution steps (the longest IPU of each step, summed over the
    compute set's executions); a converted legacy report without steps may instead record the
    cycles of each compute set's last execution (compute_sets.measured_cycles).
    """
    info = reader.compute_set_figures()
    measured = {cs: (n, c) for cs, n, c in reader.measured_cycles_by_compute_set()}
    if not info and not measured:
        return None
    source = "steps" if measured else "last execution" if any(row[5] is not None for row in info) else None
    rows = []
    for cs, name, vertices, est_max, est_total, last in info:
        if source == "steps":
            executions, cycles = measured.get(cs, (0, 0))
        else:
            executions, cycles = None, last or 0
        rows.append(
            {
                "id": cs,
                "name": cut(name),
                "vertices": vertices,
                "executions": executions,
                "cycles": int(cycles or 0),
                "estimated_max": est_max,
                "estimated_total": est_total,
            }
        )
    known = {row[0] for row in info}
    rows += [
        {
            "id": cs,
            "name": f"compute set {cs}",
            "vertices": None,
            "executions": n,
            "cycles": int(c or 0),
            "estimated_max": None,
            "estimated_total": None,
        }
        for cs, (n, c) in measured.items()
        if cs not in known
    ]
    total = sum(r["cycles"] for r in rows)
    for r in rows:
        r["percent"] = 100 * r["cycles"] / total if total else 0.0
    rows.sort(key=lambda r: (-r["cycles"], -(r["estimated_max"] or 0), r["name"]))
    return {
        "rows": rows[: limits.max_table_rows],
        "total_rows": len(rows),
        "measured": source is not None,
        "source": source,
        "total_cycles": total,
    }


# -- program tree ---------------------------------------------------------------------------


#: Characters of a program label kept (longer names are cut).
MAX_LABEL = 1000
#: Characters of a program type name kept.
MAX_TYPE = 100


def _index_strings(values) -> tuple[list[str], np.ndarray]:
    """The distinct strings (sorted) and each value's index among them."""
    texts = ["" if v is None else str(v) for v in values]
    distinct = sorted(set(texts))
    position = {text: i for i, text in enumerate(distinct)}
    return distinct, np.array([position[t] for t in texts], dtype=np.int64)


def program_tree(reader: ProfileReader) -> dict | None:
    """The program tree: programs by position, their children, the control programs and functions.

    Each program has a type (index into `types`), a label (index into `labels`) and a child count;
    `repeat`, `calls` and `executed` list, by program position, repeat counts, call targets, and
    executions with their cycles (the longest IPU of each step, summed).
    """
    programs = reader.programs_labelled(MAX_LABEL, MAX_TYPE)
    if not programs:
        return None
    ids = np.array([p[0] for p in programs], dtype=np.int64)
    types, type_index = _index_strings(p[1] for p in programs)
    labels, label_index = _index_strings(p[2] for p in programs)

    def positions(values) -> np.ndarray:
        values = np.asarray(values, dtype=np.int64).reshape(-1)
        pos = np.searchsorted(ids, values)
        ok = (pos < ids.size) & (ids[np.minimum(pos, ids.size - 1)] == values)
        return np.where(ok, pos, -1)

    links = reader.program_child_links()
    if links:
        pairs = np.array(links, dtype=np.int64).reshape(len(links), 2)
        parent, child = positions(pairs[:, 0]), positions(pairs[:, 1])
        ok = (parent >= 0) & (child >= 0)
        parent, child = parent[ok], child[ok]
        order = np.argsort(parent, kind="stable")
        parent, child = parent[order], child[order]
        counts = np.bincount(parent, minlength=ids.size)
    else:
        child = np.zeros(0, dtype=np.int64)
        counts = np.zeros(ids.size, dtype=np.int64)
    repeat = np.array([(i, p[3]) for i, p in enumerate(programs) if p[3] is not None], dtype=np.int64).reshape(-1, 2)
    calls = np.array([(i, p[4]) for i, p in enumerate(programs) if p[4] is not None], dtype=np.int64).reshape(-1, 2)
    executed = np.array(reader.measured_cycles_by_program(), dtype=np.int64).reshape(-1, 3)
    executed_pos = positions(executed[:, 0])
    executed = executed[executed_pos >= 0]
    control = positions(reader.control_program_ids())
    functions = positions(reader.function_program_ids())
    return {
        "count": int(ids.size),
        "ids": ids,
        "types": [str(x) for x in types],
        "colours": [text_colour(str(x), i) for i, x in enumerate(types)],
        "type": type_index,
        "labels": [cut(str(x)) for x in labels],
        "label": label_index,
        "children_count": counts,
        "children": child,
        "repeat": {"program": repeat[:, 0], "count": repeat[:, 1]},
        "calls": {"program": calls[:, 0], "target": positions(calls[:, 1]), "target_id": calls[:, 1]},
        "executed": {"program": executed_pos[executed_pos >= 0], "count": executed[:, 1], "cycles": executed[:, 2]},
        "control": control[control >= 0],
        "functions": functions[functions >= 0],
    }


# -- everything -----------------------------------------------------------------------------


def report_data(reader: ProfileReader, limits: Limits = Limits()) -> dict:
    """Every chart's data for one report."""
    figures = summary_data(reader)
    return {
        "summary": summary(reader, figures),
        "memory": memory(reader, limits),
        "liveness": liveness(reader, limits, always_live=figures["liveness"]["always_live_bytes"]),
        "timeline": timeline(reader, limits),
        "vertex_types": vertex_types(figures),
        "compute_sets": compute_sets(reader, limits),
        "programs": program_tree(reader),
    }
