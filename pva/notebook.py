"""How pva objects show in a notebook: a short HTML summary with small inline SVG charts.

Reports, compilation reports and execution reports define ``_repr_html_`` through these
functions (lists, query results and traces through pva.notebook_tables). The HTML is
self-contained: no script, no style sheet and no network resource, only inline styles and SVG.
Its size is bounded whatever the report's size: the charts have at most MEMORY_BARS bars and
LIVENESS_POINTS points, the tables a few rows.
"""

from __future__ import annotations

import os
from typing import Any

from formats.errors import PvaError

from .analysis.chart_options import Limits, format_size
from .analysis.html import chart_data
from .analysis.report_source import query_layer
from .analysis.summary import summary_data
from .notebook_tables import (
    escape,
    html_box,
    html_facts,
    html_failed,
    html_heading,
    html_note,
    html_table,
    number,
    percent,
)

#: Bars of the memory chart over all IPUs of a replica (tiles are grouped when there are more).
MEMORY_BARS = 128
#: Points of the liveness chart (steps are grouped when there are more, keeping each group's largest).
LIVENESS_POINTS = 200
#: Compute sets in the table of the largest.
TOP_COMPUTE_SETS = 5
#: Width and height of a chart, in CSS pixels.
CHART_WIDTH, CHART_HEIGHT = 640, 110


#: Colours of the cycle split by kind, those of the step types in `pva html`'s timeline.
_KIND_COLOURS = {
    "compute": chart_data.TYPE_COLOURS["OnTileExecute"],
    "internal_exchange": chart_data.TYPE_COLOURS["DoExchange"],
    "global_exchange": chart_data.TYPE_COLOURS["GlobalExchange"],
    "host_exchange": chart_data.TYPE_COLOURS["StreamCopyBegin"],
    "sync": chart_data.TYPE_COLOURS["Sync"],
}


# -- small pieces ---------------------------------------------------------------------------


def _bytes(value: object) -> str:
    if value is None:
        return "not recorded"
    number = int(value)  # type: ignore[call-overload]
    return f"{number:,} B" if abs(number) < 1024 else f"{number:,} B ({format_size(number)})"


def _svg(body: str, label: str, height: int = CHART_HEIGHT) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(label)}" width="{CHART_WIDTH}" '
        f'height="{height}" viewBox="0 0 {CHART_WIDTH} {height}" style="display: block; margin: 2px 0 6px 0" '
        f'font-family="sans-serif" font-size="10">{body}</svg>'
    )


# -- charts ---------------------------------------------------------------------------------


def _memory_scale(limit: int, largest: int) -> float:
    """The top of the memory chart: the tile limit, unless every tile holds less than half of it."""
    if largest < limit / 2:
        return max(largest, 1) * 1.1
    return max(limit, largest, 1) * 1.05


def memory_chart(memory: dict) -> str:
    """Bars of the largest tile memory (including gaps) of each group of tiles, by IPU, with the tile limit."""
    limit, largest = int(memory["limit"]), int(memory["largest"])
    ipus = memory["ipus"]
    bars = sum(len(ipu["max"]) for ipu in ipus)
    if not bars:
        return ""
    top = _memory_scale(limit, largest)
    plot_h, base, left = CHART_HEIGHT - 24, CHART_HEIGHT - 14, 4
    gap = 6 if len(ipus) <= 16 else 0  # many IPUs: their bars side by side
    width = (CHART_WIDTH - left - gap * (len(ipus) - 1)) / bars
    parts, x = [], float(left)
    bucket, per_ipu = int(memory["bucket"]), int(memory["tiles_per_ipu"])
    for ipu in ipus:
        first, start = int(ipu["first_tile"]), x
        for k, (value, tile) in enumerate(zip(ipu["max"], ipu["max_tile"])):
            h = plot_h * int(value) / top
            colour = chart_data.LIMIT_COLOUR if int(value) > limit else chart_data.CATEGORY_COLOURS[0]
            lo = first + k * bucket
            hi = min(lo + bucket, first + per_ipu) - 1
            tiles = f"tile {lo}" if lo == hi else f"tiles {lo}-{hi}"
            parts.append(
                f'<rect x="{x:.1f}" y="{base - h:.1f}" width="{max(width - 0.4, 0.6):.1f}" height="{h:.1f}" '
                f'fill="{colour}"><title>{tiles}: largest tile {int(tile)} holds {int(value):,} B</title></rect>'
            )
            x += width
        if x - start >= 36:  # room for its label
            parts.append(f'<text x="{start:.1f}" y="{CHART_HEIGHT - 3}" fill="currentColor">IPU {ipu["ipu"]}</text>')
        x += gap
    if limit <= top:
        y = base - plot_h * limit / top
        label = f"tile memory {format_size(limit)}"
        parts.append(
            f'<line x1="0" x2="{CHART_WIDTH}" y1="{y:.1f}" y2="{y:.1f}" stroke="{chart_data.LIMIT_COLOUR}" '
            f'stroke-dasharray="4 3"/>'
        )
    else:
        y, label = 10.0, f"largest tile {format_size(largest)}; tile memory {format_size(limit)} is above the chart"
    parts.append(
        f'<text x="{CHART_WIDTH - 4}" y="{max(y - 3, 9):.1f}" text-anchor="end" '
        f'fill="{chart_data.LIMIT_COLOUR}">{escape(label)}</text>'
    )
    return _svg("".join(parts), "memory by tile")


def liveness_chart(liveness: dict) -> str:
    """Live memory over the liveness steps: always-live below, not-always-live above it, the peak marked."""
    always = int(liveness["always_live"])
    values = [int(v) + always for v in liveness["not_always_live"]]
    if not values:
        return ""
    peak = liveness["peak"]
    top = max(int(peak["total"]), 1) * 1.1
    plot_h, base = CHART_HEIGHT - 24, CHART_HEIGHT - 14
    step = CHART_WIDTH / max(len(values) - 1, 1)
    points = " ".join(f"{i * step:.1f},{base - plot_h * v / top:.1f}" for i, v in enumerate(values))
    always_y = base - plot_h * always / top
    px = (int(peak["index"]) // max(int(liveness["bucket"]), 1)) * step
    py = base - plot_h * int(peak["total"]) / top
    live, kept = chart_data.NOT_ALWAYS_LIVE_COLOUR, chart_data.ALWAYS_LIVE_COLOUR
    last = (len(values) - 1) * step
    body = (
        f'<polygon points="0,{always_y:.1f} {points} {last:.1f},{always_y:.1f}" fill="{live}" fill-opacity="0.35" '
        f'stroke="{live}"><title>not always live, largest of each point\'s steps</title></polygon>'
        f'<rect x="0" y="{always_y:.1f}" width="{max(last, 1):.1f}" height="{base - always_y:.1f}" fill="{kept}" '
        f'fill-opacity="0.35"><title>always live: {always:,} B</title></rect>'
        f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3" fill="{chart_data.LIMIT_COLOUR}"><title>peak at step '
        f"{peak['step']:,}: {int(peak['total']):,} B live</title></circle>"
        f'<text x="{CHART_WIDTH - 4}" y="9" text-anchor="end" fill="currentColor">peak {format_size(peak["total"])} '
        f"at step {peak['step']:,}</text>"
        f'<text x="0" y="{CHART_HEIGHT - 3}" fill="currentColor">step {liveness["first_step"]:,}</text>'
        f'<text x="{CHART_WIDTH}" y="{CHART_HEIGHT - 3}" text-anchor="end" fill="currentColor">'
        f"{liveness['steps']:,} liveness steps</text>"
    )
    return _svg(body, "live memory by step")


def cycles_chart(tile_cycles: dict) -> str:
    """One bar split into compute, exchanges and sync (tile-cycles over all tiles), with a legend."""
    kinds = [(k, int(tile_cycles.get(k) or 0)) for k in _KIND_COLOURS]
    whole = sum(v for _k, v in kinds)
    if not whole:
        return ""
    parts, x = [], 0.0
    for kind, value in kinds:
        w = CHART_WIDTH * value / whole
        label = kind.replace("_", " ")
        if w > 0:
            parts.append(
                f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="14" fill="{_KIND_COLOURS[kind]}">'
                f"<title>{label}: {value:,} tile-cycles ({percent(value, whole)})</title></rect>"
            )
        x += w
    legend, lx = [], 0.0
    for kind, value in kinds:
        text = f"{kind.replace('_', ' ')} {percent(value, whole)}"
        legend.append(
            f'<rect x="{lx:.1f}" y="22" width="9" height="9" fill="{_KIND_COLOURS[kind]}"/>'
            f'<text x="{lx + 12:.1f}" y="30" fill="currentColor">{text}</text>'
        )
        lx += 12 + 6 * len(text) + 14
    return _svg("".join(parts + legend), "tile-cycles by kind", height=36)


def _share_bar(share: float) -> str:
    width = max(0.0, min(100.0, share))
    return (
        f'<svg width="80" height="9" role="img" aria-label="{width:.1f}%"><rect width="80" height="9" fill="#999" '
        f'fill-opacity="0.2"/><rect width="{0.8 * width:.1f}" height="9" '
        f'fill="{chart_data.CATEGORY_COLOURS[0]}"/></svg>'
    )


def compute_sets_table(sets: dict | None) -> str:
    """The compute sets with the most cycles: name, cycles, share."""
    if not sets or not sets["rows"]:
        return ""
    rows = [
        [escape(r["name"]), number(r["cycles"]), f"{r['percent']:.1f}%", _share_bar(r["percent"])]
        for r in sets["rows"][:TOP_COMPUTE_SETS]
    ]
    source = "measured" if sets["measured"] else "estimated"
    heading = html_heading(f"Top compute sets by cycles ({source}; {sets['total_rows']:,} in all)")
    return heading + html_table(["compute set", "cycles", "share", ""], rows, [False, True, True, False])


# -- the figures a user looks for first -----------------------------------------------------


def _target_line(card: dict) -> str:
    t = card["target"]
    clock = "" if t["clock_frequency"] is None else f", {t['clock_frequency'] / 1e6:,.0f} MHz"
    return (
        f"{escape(t['type'])} {escape(t['architecture'])}: {number(t['num_ipus'])} IPU(s) × {number(t['tiles_per_ipu'])} tiles "
        f"= {number(t['num_tiles'])} tiles, {_bytes(t['bytes_per_tile'])} per tile{clock}"
    )


def _memory_facts(card: dict, figures: dict) -> list[tuple[str, str]]:
    t, m = card["target"], figures["memory"]
    capacity = (t["bytes_per_tile"] or 0) * (t["tiles_per_replica"] or 0)
    used = m["including_gaps"]
    largest = m["max_tile_including_gaps"] or {}
    pairs = [
        ("memory used", f"{_bytes(used)}, {percent(used or 0, capacity)} of {_bytes(capacity)}"),
        ("excluding gaps", _bytes(m["excluding_gaps"])),
    ]
    if largest.get("tile") is not None:
        share = percent(largest["bytes"], t["bytes_per_tile"] or 0)
        pairs.append(("largest tile", f"tile {largest['tile']:,}: {_bytes(largest['bytes'])} ({share} of a tile)"))
    if m["tiles_out_of_memory"]:
        pairs.append(
            ("out of memory", f'<b style="color: {chart_data.LIMIT_COLOUR}">{m["tiles_out_of_memory"]:,} tiles</b>')
        )
    live = figures["liveness"]
    if live["max_live_bytes"]:
        peak = f"{_bytes(live['max_live_bytes'])} ({_bytes(live['always_live_bytes'])} always live)"
    else:
        peak = "no liveness recorded"
    pairs.append(("peak live memory", peak))
    return pairs


def _execution_facts(figures: dict) -> list[tuple[str, str]]:
    x = figures["execution"]
    if not x["runs"]:
        return [("execution", "no execution profile (compile-only report)")]
    micro = "" if x["microseconds"] is None else f" ({x['microseconds']:,.1f} µs)"
    return [
        ("cycles", f"{x['total_cycles']:,}{micro}"),
        ("runs and steps", f"{x['runs']:,} run(s), {x['steps']:,} steps"),
    ]


def _graph_facts(figures: dict) -> list[tuple[str, str]]:
    g = figures["graph"]
    keys = (("num_vertices", "vertices"), ("num_compute_sets", "compute sets"), ("num_vars", "variables"))
    found = [f"{number(g[k])} {label}" for k, label in keys if k in g]
    return [("graph", ", ".join(found))] if found else []


def _figures(reader) -> tuple[dict, dict]:
    figures = summary_data(reader)
    return figures, chart_data.summary(reader, figures)


def _memory_part(reader) -> list[str]:
    per_ipu = max(1, MEMORY_BARS // max(1, int(reader.target["ipus_per_replica"])))
    memory = chart_data.memory(reader, Limits(max_tiles=per_ipu))
    if memory is None:
        return []
    grouped = f", {memory['bucket']:,} tiles a bar" if memory["downsampled"] else ""
    return [html_heading(f"Memory by tile (largest tile of each bar, including gaps{grouped})"), memory_chart(memory)]


def _liveness_part(reader) -> list[str]:
    live = chart_data.liveness(reader, Limits(max_liveness_points=LIVENESS_POINTS, peak_variables=1))
    if live is None:
        return []
    return [html_heading("Live memory by liveness step"), liveness_chart(live)]


def _execution_part(reader, figures: dict) -> list[str]:
    if not figures["execution"]["runs"]:
        return []
    chart = cycles_chart(figures["execution"]["tile_cycles"])
    parts = [html_heading("Tile-cycles by kind"), chart] if chart else []
    parts.append(compute_sets_table(chart_data.compute_sets(reader, Limits(max_table_rows=TOP_COMPUTE_SETS))))
    return parts


# -- the objects ----------------------------------------------------------------------------


def report_html(report: Any) -> str:
    """A Report: source, target, memory, cycles, charts of memory, liveness and cycles, top compute sets."""
    if report.closed:
        return html_box(f"Report {escape(os.path.basename(report.path))} (closed)", [])
    reader = query_layer(report)
    try:
        figures, card = _figures(reader)
        poplar = f"Poplar {card['poplar_version']}" if card["poplar_version"] else ""
        producer = " · ".join(escape(v) for v in (card["producer"], poplar) if v)
        facts = [("target", _target_line(card)), *_graph_facts(figures), *_memory_facts(card, figures)]
        facts += _execution_facts(figures)
        parts = [html_note(producer), html_facts(facts)]
        parts += _memory_part(reader) + _liveness_part(reader) + _execution_part(reader, figures)
    except PvaError as exc:
        return html_failed(f"Report {os.path.basename(report.path)}", exc)
    return html_box(f"Report {escape(card['name'])}", parts)


def compilation_html(compilation: Any) -> str:
    """A CompilationReport: target, graph, memory and liveness, with their charts."""
    reader = query_layer(compilation)
    if reader.file.closed:
        return html_box("CompilationReport (closed)", [])
    try:
        figures, card = _figures(reader)
        facts = [("target", _target_line(card)), *_graph_facts(figures), *_memory_facts(card, figures)]
        parts = [html_facts(facts), *_memory_part(reader), *_liveness_part(reader)]
    except PvaError as exc:
        return html_failed("CompilationReport", exc)
    return html_box(f"CompilationReport of {escape(card['name'])}", parts)


def execution_html(execution: Any) -> str:
    """An ExecutionReport: cycles, runs and steps, the split of tile-cycles, the top compute sets."""
    reader = query_layer(execution)
    if reader.file.closed:
        return html_box("ExecutionReport (closed)", [])
    try:
        figures, card = _figures(reader)
        parts = [html_facts(_execution_facts(figures)), *_execution_part(reader, figures)]
    except PvaError as exc:
        return html_failed("ExecutionReport", exc)
    return html_box(f"ExecutionReport of {escape(card['name'])}", parts)
