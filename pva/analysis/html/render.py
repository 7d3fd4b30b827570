"""The self-contained HTML page: summary cards and tables rendered here, charts drawn by the
inlined script from the inlined JSON data. Nothing on the page refers to the network."""

from __future__ import annotations

import base64
import html
import json
import zlib
from importlib import resources

import numpy as np

from formats import __version__

from ..chart_options import format_size
from ..compare import Difference
from .chart_data import cut, timeline_shares

#: Inline data larger than this (bytes of JSON) is stored deflated and base64-encoded.
COMPRESS_ABOVE = 1_000_000
#: Rows of the differences table per section.
DIFF_ROWS = 30
#: Bars of the vertex type chart.
VERTEX_BARS = 20


def _asset(name: str) -> str:
    return (resources.files("pva.analysis.html") / "assets" / name).read_text(encoding="utf-8")


def _e(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


#: Shown for a figure the report's source did not record.
_NOT_RECORDED = "<small>not recorded</small>"


def _int(value) -> str:
    return _NOT_RECORDED if value is None else f"{int(value):,}"


def _human_bytes(value: float) -> str:
    return format_size(value)


def _bytes(value) -> str:
    if value is None:
        return _NOT_RECORDED
    text = f"{int(value):,} B"
    return text if abs(int(value)) < 1024 else f"{text} <small>({_human_bytes(value)})</small>"


# -- JSON payload -----------------------------------------------------------------------------


def _json_default(value):
    """numpy values as JSON-ready Python values (json calls this for types it does not know)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"cannot store a {type(value).__name__} in the page's data")


def _delta(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.int64)
    return np.diff(values, prepend=0) if values.size else values


def _lane_payload(lane: dict) -> dict:
    """One timeline lane as the page script reads it: starts and steps as deltas, durations, kinds, counts."""
    return {
        "start": _delta(lane["start"]),
        "dur": lane["end"] - lane["start"],
        "kind": lane["kind"],
        "step": _delta(lane["step"]),
        "count": None if bool((lane["count"] == 1).all()) else lane["count"],
    }


def _payload(data: dict) -> dict:
    """What the page script needs of one report's chart data (compact encodings)."""
    out: dict = {"memory": data["memory"], "liveness": None, "timeline": None, "vertex_types": None, "programs": None}
    live = data["liveness"]
    if live is not None:
        out["liveness"] = {
            k: live[k] for k in ("steps", "first_step", "bucket", "always_live", "not_always_live", "colours")
        }
        out["liveness"]["peak"] = {k: live["peak"][k] for k in ("step", "index", "total", "not_always_live")}
    tl = data["timeline"]
    if tl is not None:
        ids = np.asarray(tl["step_ids"], dtype=np.int64)
        dense = ids.size == 0 or bool(np.array_equal(ids, np.arange(ids[0], ids[0] + ids.size)))
        out["timeline"] = {
            "t0": tl["t0"],
            "span": tl["span"],
            "types": tl["types"],
            "colours": tl["colours"],
            "names": tl["names"],
            "step_names": tl["step_names"],
            "clock_frequency": tl["clock_frequency"],
            "first_step_id": int(ids[0]) if ids.size else 0,
            "step_ids": None if dense else ids,
            "ipus": [
                {"ipu": r["ipu"], "steps": r["steps"], **_lane_payload(r), "overlapped": _lane_payload(r["overlapped"])}
                for r in tl["ipus"]
            ],
        }
    vt = data["vertex_types"]
    if vt is not None:
        out["vertex_types"] = {"rows": vt["rows"][:VERTEX_BARS]}
    prog = data["programs"]
    if prog is not None:
        ids = prog["ids"]
        dense = bool(np.array_equal(ids, np.arange(ids.size)))
        out["programs"] = {
            k: prog[k]
            for k in (
                "types",
                "colours",
                "type",
                "labels",
                "label",
                "children_count",
                "children",
                "repeat",
                "calls",
                "executed",
                "control",
                "functions",
            )
        }
        out["programs"]["ids"] = None if dense else ids
    return out


def _shared(datasets: list[dict]) -> dict:
    """Scales shared by the columns of a comparison, so equal values look equal."""
    memory_max = liveness_max = nal_max = data_max = data_max_excluding = limit = 1
    span = 1
    for data in datasets:
        mem = data["memory"]
        if mem is not None:
            largest = max([int(mem["largest"])] + [int(np.max(ipu["max"])) for ipu in mem["ipus"] if len(ipu["max"])])
            limit = max(limit, int(mem["limit"]))
            data_max = max(data_max, largest)
            data_max_excluding = max(
                [data_max_excluding, int(mem["largest_excluding"])]
                + [int(np.max(ipu["max_excluding"])) for ipu in mem["ipus"] if len(ipu["max_excluding"])]
            )
            memory_max = max(memory_max, limit, largest)
        live = data["liveness"]
        if live is not None:
            liveness_max = max(liveness_max, int(live["peak"]["total"]))
            nal_max = max(nal_max, int(live["peak"]["not_always_live"]))
        tl = data["timeline"]
        if tl is not None:
            span = max(span, int(tl["span"]))
    return {
        "memory_max": int(memory_max * 1.06),
        "memory_data_max": int(data_max * 1.08),
        "memory_data_max_excluding": int(data_max_excluding * 1.08),
        "memory_limit": limit,
        "liveness_max": int(liveness_max * 1.08),
        "liveness_nal_max": int(nal_max * 1.08),
        "timeline_span": span,
    }


def script_safe_json(text: str) -> str:
    """JSON text that can sit inside a <script> element: every <, > and & as a JSON escape (still valid JSON)."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _data_script(page: dict, compress: bool | None) -> str:
    text = json.dumps(page, separators=(",", ":"), allow_nan=False, ensure_ascii=False, default=_json_default)
    if compress is None:
        compress = len(text.encode("utf-8")) > COMPRESS_ABOVE
    if compress:
        packed = base64.b64encode(zlib.compress(text.encode("utf-8"), 6)).decode("ascii")
        return f'<script type="application/json" id="pva-data" data-encoding="deflate-base64">{packed}</script>'
    safe = script_safe_json(text)
    return f'<script type="application/json" id="pva-data">{safe}</script>'


# -- summary card -----------------------------------------------------------------------------


def _summary_entries(s: dict) -> list[tuple]:
    """(group, key, label, value, html, cost) for the card; cost: a larger value is worse."""
    t, g, x, m, lv = s["target"], s["graph"], s["execution"], s["memory"], s["liveness"]
    clock = _NOT_RECORDED if t["clock_frequency"] is None else f"{t['clock_frequency'] / 1e6:,.1f} MHz"
    micro = x["microseconds"]
    time = (
        "<small>no execution profile</small>"
        if not x["runs"]
        else _NOT_RECORDED
        if micro is None
        else f"{micro:,.1f} \u00b5s"
    )
    largest = m["max_tile"] or {"tile": None, "bytes": None}
    entries = [
        (
            "Target",
            "target.type",
            "Target",
            f"{t['type']} {t['architecture']}",
            _e(f"{t['type']} {t['architecture']}"),
            False,
        ),
        ("Target", "target.num_ipus", "IPUs", t["num_ipus"], _int(t["num_ipus"]), False),
        ("Target", "target.tiles_per_ipu", "Tiles per IPU", t["tiles_per_ipu"], _int(t["tiles_per_ipu"]), False),
        ("Target", "target.num_tiles", "Total tiles", t["num_tiles"], _int(t["num_tiles"]), False),
        ("Target", "target.bytes_per_tile", "Memory per tile", t["bytes_per_tile"], _bytes(t["bytes_per_tile"]), False),
        ("Target", "target.clock_frequency", "Clock", t["clock_frequency"], clock, False),
        ("Target", "target.num_replicas", "Replicas", t["num_replicas"], _int(t["num_replicas"]), False),
        ("Graph", "graph.num_vertices", "Vertices", g["num_vertices"], _int(g["num_vertices"]), True),
        ("Graph", "graph.num_edges", "Edges", g["num_edges"], _int(g["num_edges"]), True),
        ("Graph", "graph.num_vars", "Variables", g["num_vars"], _int(g["num_vars"]), True),
        ("Graph", "graph.num_compute_sets", "Compute sets", g["num_compute_sets"], _int(g["num_compute_sets"]), True),
        ("Execution", "execution.total_cycles", "Total cycles", x["total_cycles"], _int(x["total_cycles"]), True),
        ("Execution", "execution.microseconds", "Total time", x["microseconds"], time, True),
        ("Execution", "execution.steps", "Steps", x["steps"], _int(x["steps"]), True),
        ("Execution", "execution.runs", "Runs", x["runs"], _int(x["runs"]), False),
        (
            "Memory",
            "memory.including_gaps",
            "Memory used (including gaps)",
            m["including_gaps"],
            _bytes(m["including_gaps"]),
            True,
        ),
        (
            "Memory",
            "memory.excluding_gaps",
            "Memory used (excluding gaps)",
            m["excluding_gaps"],
            _bytes(m["excluding_gaps"]),
            True,
        ),
        (
            "Memory",
            "memory.max_tile",
            "Largest tile (including gaps)",
            largest["bytes"],
            _bytes(largest["bytes"])
            + (f" <small>on tile {largest['tile']}</small>" if largest["tile"] is not None else ""),
            True,
        ),
        (
            "Memory",
            "memory.tiles_out_of_memory",
            "Tiles out of memory",
            m["tiles_out_of_memory"],
            _int(m["tiles_out_of_memory"]),
            True,
        ),
        (
            "Liveness",
            "liveness.always_live_bytes",
            "Always live",
            lv["always_live_bytes"],
            _bytes(lv["always_live_bytes"]),
            True,
        ),
        (
            "Liveness",
            "liveness.peak_not_always_live_bytes",
            "Peak not always live",
            lv["peak_not_always_live_bytes"],
            _bytes(lv["peak_not_always_live_bytes"]),
            True,
        ),
        (
            "Liveness",
            "liveness.max_live_bytes",
            "Peak live (including always live)",
            lv["max_live_bytes"],
            _bytes(lv["max_live_bytes"]),
            True,
        ),
    ]
    return entries


def _summary_card(s: dict, other: dict | None = None, *, is_b: bool = False) -> str:
    other_values = {e[1]: e[3] for e in _summary_entries(other)} if other is not None else {}
    parts = ['<div class="card summary"><dl>']
    parts.append(
        f'<div class="group">Report</div>'
        f'<div class="kv" data-key="source" data-value="{_e(s["source"])}"><dt>File</dt>'
        f"<dd>{_e(s['source'])}</dd></div>"
    )
    if s["producer"] or s["poplar_version"]:
        parts.append(
            f'<div class="kv" data-key="producer" data-value="{_e(s["producer"])}"><dt>Producer</dt>'
            f"<dd>{_e(s['producer']) or '&ndash;'}"
            + (f" <small>Poplar {_e(s['poplar_version'])}</small>" if s["poplar_version"] else "")
            + "</dd></div>"
        )
    group = None
    for entry_group, key, label, value, shown, cost in _summary_entries(s):
        if entry_group != group:
            group = entry_group
            parts.append(f'<div class="group">{_e(group)}</div>')
        classes = ["kv"]
        extra = ""
        if key in other_values and other_values[key] != value:
            classes.append("changed")
            old = other_values[key]
            if is_b and isinstance(value, (int, float)) and isinstance(old, (int, float)):
                change = value - old
                rel = f" ({100 * change / abs(old):+.1f}%)" if old else ""
                direction = "worse" if (cost and change > 0) else "better" if (cost and change < 0) else ""
                text = (
                    f"{change:+,.1f}"
                    if isinstance(change, float) and not float(change).is_integer()
                    else f"{int(change):+,}"
                )
                extra = f' <small class="delta {direction}">{text}{rel}</small>'
        if key == "memory.tiles_out_of_memory" and value:
            classes.append("bad")
        parts.append(
            f'<div class="{" ".join(classes)}" data-key="{key}" data-value="{_e("" if value is None else value)}"><dt>{_e(label)}</dt>'
            f"<dd>{shown}{extra}</dd></div>"
        )
    parts.append("</dl></div>")
    return "".join(parts)


# -- sections ---------------------------------------------------------------------------------


def _legend(items: list[tuple[str, str]], extra: str = "") -> str:
    spans = "".join(f'<span><i style="background:{_e(colour)}"></i>{_e(name)}</span>' for name, colour in items)
    return f'<div class="legend">{spans}{extra}</div>'


def _empty(text: str) -> str:
    return f'<p class="empty">{_e(text)}</p>'


def _memory_block(r: int, data: dict) -> str:
    mem = data["memory"]
    if mem is None:
        return _empty("No memory data: the report has no rows in memory_by_tile.")
    names = [(n, c) for i, (n, c) in enumerate(zip(mem["names"], mem["colours"])) if i != mem["gaps"]]
    gaps_entry = (
        ""
        if mem["gaps"] is None
        else f'<span class="legend-gaps" hidden><i style="background:{_e(mem["colours"][mem["gaps"]])}"></i>gaps</span>'
    )
    parts = [
        _legend(
            names,
            gaps_entry
            + '<span><i class="line" style="border-color:#d62728"></i>tile limit</span>'
            + (
                '<span><i class="line" style="border-color:#24292f;border-top-style:solid"></i>'
                "largest tile of each bar</span>"
                if mem["downsampled"]
                else ""
            )
            + '<span><i style="background:#d62728;width:8px"></i>out of memory</span>',
        )
    ]
    parts.append(
        '<div class="toolbar memory-scale">Scale: <button data-scale="limit">to the tile limit</button>'
        '<button data-scale="data">to the data</button></div>'
    )
    if mem["gaps"] is not None:
        parts.append(
            '<div class="toolbar memory-gaps">Gaps: <button data-gaps="excluding">excluding gaps</button>'
            '<button data-gaps="including">including gaps</button></div>'
        )
    per_ipu = mem["tiles_per_ipu"]
    for ipu in mem["ipus"]:
        lo = ipu["first_tile"]
        # the largest tile as the gaps toggle counts it: excluding gaps (the default) or including them
        caption = (
            f"IPU {ipu['ipu']}: tiles {_int(lo)}&ndash;{_int(lo + per_ipu - 1)}; "
            f'<span class="caption-gaps" data-gaps="excluding">largest tile {ipu["peak_tile_excluding"]} with '
            f"{_int(ipu['peak_bytes_excluding'])} B excluding gaps</span>"
            f'<span class="caption-gaps" data-gaps="including" hidden>largest tile {ipu["peak_tile"]} with '
            f"{_int(ipu['peak_bytes'])} B including gaps</span>; "
        )
        if ipu["oom_count"]:
            listed = ", ".join(str(int(t)) for t in ipu["oom_tiles"])
            more = "" if ipu["oom_count"] <= len(ipu["oom_tiles"]) else f", &hellip; ({_int(ipu['oom_count'])} in all)"
            caption += f'<span class="worse">{_int(ipu["oom_count"])} tile(s) out of memory: {listed}{more}</span>'
        else:
            caption += "no tile out of memory"
        parts.append(
            f'<figure><figcaption>{caption}</figcaption><canvas data-chart="memory" data-report="{r}" '
            f'data-ipu="{ipu["ipu"]}" data-height="230" role="img" '
            f'aria-label="memory per tile of IPU {ipu["ipu"]} by category"></canvas></figure>'
        )
    if not mem["by_category"]:
        parts.append('<p class="note">The report records no memory by category: bars show tile totals.</p>')
    if mem["downsampled"]:
        bars = -(-per_ipu // mem["bucket"])
        parts.append(
            f'<p class="note" data-downsampled="memory">Downsampled for display: the {_int(per_ipu)} tiles '
            f"of each IPU are shown as {_int(bars)} bars of {mem['bucket']} tiles. Each bar is the mean per "
            f"tile of its tiles; the black line is the largest tile of each bar; a red mark means at least one "
            f"of its tiles is out of memory.</p>"
        )
    return "".join(parts)


def _liveness_block(r: int, data: dict) -> str:
    live = data["liveness"]
    if live is None:
        return _empty("No liveness data: the report has no liveness steps.")
    peak = live["peak"]
    where = " ".join(x for x in (peak["program_type"], peak["program"]) if x)
    parts = [
        _legend(
            [("always live", live["colours"]["always_live"]), ("not always live", live["colours"]["not_always_live"])],
            '<span><i style="background:#d62728;width:4px"></i>peak</span>',
        ),
        '<div class="toolbar liveness-mode">Show: <button data-mode="total">always live + not always live'
        '</button><button data-mode="not-always-live">not always live only</button></div>',
        f'<figure><canvas data-chart="liveness" data-report="{r}" data-height="260" role="img" '
        f'aria-label="live memory over the program steps"></canvas></figure>',
        f'<p class="peak" data-peak-step="{peak["step"]}" data-peak-bytes="{peak["total"]}">Peak at liveness step '
        f"<b>{_int(peak['step'])}</b>{' (' + _e(where) + ')' if where else ''}: <b>{_int(peak['total'])} B</b> live "
        f"= {_int(live['always_live'])} B always live + {_int(peak['not_always_live'])} B not always live.</p>",
    ]
    if peak["variables"]:
        rows = "".join(
            f'<tr><td class="name">{_e(name)}</td><td class="num" data-value="{size}">{_int(size)}</td>'
            f'<td class="num" data-value="{100 * size / max(1, peak["not_always_live"]):.3f}">'
            f"{100 * size / max(1, peak['not_always_live']):.1f}%</td></tr>"
            for name, size in peak["variables"]
        )
        parts.append(
            f'<h3>Largest variables live at the peak</h3><div class="scroll"><table class="sortable peak-vars">'
            f'<thead><tr><th>Variable</th><th class="num">Bytes (all tiles)</th>'
            f'<th class="num">Share of not always live</th></tr></thead><tbody>{rows}</tbody></table></div>'
        )
    if live["downsampled"]:
        parts.append(
            f'<p class="note" data-downsampled="liveness">Downsampled for display: {_int(live["steps"])} '
            f"liveness steps are shown as {_int(len(live['not_always_live']))} bars of {live['bucket']} steps; "
            f"each bar is the largest value of its steps, so the peak is kept.</p>"
        )
    return "".join(parts)


def _timeline_block(r: int, data: dict) -> str:
    tl = data["timeline"]
    if tl is None:
        return _empty("No execution profile: the report holds compilation information only.")
    shares = dict(timeline_shares(tl))
    present = [(f"{name} ({shares.get(name, 0.0):.1f}%)", tl["colours"][i]) for i, name in enumerate(tl["types"])]
    if "idle" in shares:  # cycles of an IPU's run with no step
        present.append((f"idle ({shares['idle']:.1f}%)", "#ffffff"))
    parts = [
        f'<figure><div class="toolbar"><button data-action="zoom-in" title="zoom in">+</button>'
        f'<button data-action="zoom-out" title="zoom out">&minus;</button><button data-action="reset">Reset</button>'
        f'<span class="zoom-readout"></span><span>&middot; wheel to zoom, drag to pan, double-click to reset; '
        f"cycles from the first step</span></div>"
        f'<canvas class="timeline" data-chart="timeline" data-report="{r}" role="img" '
        f'aria-label="execution timeline per IPU"></canvas></figure>',
        _legend(present),
    ]
    steps = sum(ipu["steps"] for ipu in tl["ipus"])
    segments = sum(len(ipu["start"]) for ipu in tl["ipus"])
    if tl["downsampled"]:
        parts.append(
            f'<p class="note" data-downsampled="timeline">Downsampled for display: {_int(steps)} step '
            f"executions on {len(tl['ipus'])} IPU(s) are drawn as {_int(segments)} segments. Runs of steps "
            f"shorter than 1/{_int(tl['resolution'])} of the timeline are merged into one segment coloured by "
            f"its longest step (its tooltip says how many); longer steps are drawn one by one. Use "
            f"--timeline-resolution 0 to keep every step.</p>"
        )
    return "".join(parts)


def _vertex_block(r: int, data: dict) -> str:
    vt = data["vertex_types"]
    if vt is None:
        return _empty("No cycles by vertex type: the report has no execution profile with vertex cycles.")
    shown = min(VERTEX_BARS, len(vt["rows"]))
    rows = "".join(
        f'<tr><td class="name">{_e(row["name"])}</td><td class="num" data-value="{row["instances"]}">'
        f'{_int(row["instances"])}</td><td class="num" data-value="{row["cycles"]}">{_int(row["cycles"])}</td>'
        f'<td class="num" data-value="{row["percent"]:.4f}">{row["percent"]:.1f}%</td></tr>'
        for row in vt["rows"]
    )
    note = (
        " <small>(estimated from the compiler's cycle estimates: the report has no measured vertex cycles)</small>"
        if vt["estimated"]
        else ""
    )
    return (
        f"<figure><figcaption>Largest {shown} of {len(vt['rows'])} vertex types{note}</figcaption>"
        f'<canvas data-chart="vertex-types" data-report="{r}" data-height="{12 + 22 * shown}" role="img" '
        f'aria-label="cycles by vertex type"></canvas></figure>'
        f'<div class="scroll"><table class="sortable vertex-types"><thead><tr><th>Vertex type</th>'
        f'<th class="num">Instances</th><th class="num" aria-sort="descending">Cycles</th><th class="num">Share</th>'
        f"</tr></thead><tbody>{rows}</tbody></table></div>"
    )


def _compute_set_block(r: int, data: dict) -> str:
    cs = data["compute_sets"]
    if cs is None:
        return _empty("No compute sets recorded.")

    def num(value) -> str:
        if value is None:
            return '<td class="num" data-value="">&ndash;</td>'
        return f'<td class="num" data-value="{value}">{_int(value)}</td>'

    rows = "".join(
        f'<tr><td class="name">{_e(row["name"])}</td>{num(row["executions"])}{num(row["cycles"])}'
        f'<td class="num" data-value="{row["percent"]:.4f}">{row["percent"]:.1f}%</td>'
        f"{num(row['estimated_max'])}{num(row['estimated_total'])}{num(row['vertices'])}</tr>"
        for row in cs["rows"]
    )
    note = ""
    if cs["total_rows"] > len(cs["rows"]):
        note = (
            f'<p class="note" data-downsampled="compute-sets">Showing the {_int(len(cs["rows"]))} compute sets with '
            f"the most cycles of {_int(cs['total_rows'])}; use --max-rows to list more.</p>"
        )
    if not cs["measured"]:
        note += '<p class="note">No execution profile: only the compiler\'s estimates are shown.</p>'
    elif cs["source"] == "last execution":
        note += (
            '<p class="note">Cycles are those of each compute set\'s last execution, as the legacy profile '
            "recorded them; the number of executions is not known.</p>"
        )
    return (
        f'<div class="scroll"><table class="sortable compute-sets"><thead><tr><th>Compute set</th>'
        f'<th class="num">Executions</th><th class="num" aria-sort="descending" title="longest IPU of each step, '
        f'summed over its executions">Cycles</th><th class="num">Share</th>'
        f'<th class="num" title="largest estimate over tiles">Estimated (max tile)</th>'
        f'<th class="num" title="estimates summed over tiles">Estimated (all tiles)</th><th class="num">Vertices</th>'
        f"</tr></thead><tbody>{rows}</tbody></table></div>{note}"
    )


def _tree_block(r: int, data: dict) -> str:
    prog = data["programs"]
    if prog is None:
        return _empty("No programs recorded.")
    return (
        f'<div class="toolbar"><button data-action="expand">Expand top level</button>'
        f'<button data-action="collapse">Collapse all</button><span>{_int(prog["count"])} programs; click to '
        f"unfold (children appear as you open them)</span></div>"
        f'<div class="tree" data-report="{r}"></div>'
    )


def _differences_block(differences: list[Difference], threshold: float) -> str:
    shown = [d for d in differences if d.change is None or d.change != 0]
    if not shown:
        return _empty("The reports do not differ in any compared figure.")
    rows: list[str] = []
    counts: dict[str, int] = {}
    regressions = 0
    for d in shown:
        counts[d.section] = counts.get(d.section, 0) + 1
        if counts[d.section] > DIFF_ROWS:
            continue
        regression = d.is_regression(threshold)
        regressions += regression
        kind = (
            "regression"
            if regression
            else "changed"
            if d.change is None or d.section == "target"
            else "improvement"
            if d.change < 0
            else ""
        )
        rel = "" if d.relative is None else f"{100 * d.relative:+.1f}%"
        change = "" if d.change is None else f"{d.change:+,.0f}"

        def cell(v) -> str:
            if isinstance(v, (int, float)):
                return (
                    f'<td class="num" data-value="{v}">{v:,.0f}</td>'
                    if float(v).is_integer() or abs(v) > 100
                    else f'<td class="num" data-value="{v}">{v:,.3g}</td>'
                )
            return f'<td class="name">{_e(cut(str(v)))}</td>'

        rows.append(
            f'<tr class="{kind}"><td>{_e(d.section)}</td><td class="name">{_e(cut(d.item))}</td>{cell(d.a)}'
            f'{cell(d.b)}<td class="num" data-value="{d.change or 0}">{change}</td>'
            f'<td class="num" data-value="{0 if d.relative is None else d.relative}">{rel}</td>'
            f"<td>{'REGRESSION' if regression else ''}</td></tr>"
        )
    hidden = sum(max(0, n - DIFF_ROWS) for n in counts.values())
    note = (
        f'<p class="note">{_int(hidden)} more changed figures are not listed (at most {DIFF_ROWS} per section); '
        f"<code>pva diff A B --top 0</code> lists them all.</p>"
        if hidden
        else ""
    )
    return (
        f'<p data-regressions="{regressions}">{_int(len(shown))} figures differ; <b class="worse">{regressions} '
        f"regression(s)</b> grew by more than {100 * threshold:g}% (red); green rows shrank.</p>"
        f'<div class="scroll"><table class="sortable differences"><thead><tr><th>Section</th><th>Figure</th>'
        f'<th class="num">A</th><th class="num">B</th><th class="num">Change</th><th class="num">%</th><th></th>'
        f"</tr></thead><tbody>{''.join(rows)}</tbody></table></div>{note}"
    )


# -- page -------------------------------------------------------------------------------------

_SECTIONS = (
    (
        "memory",
        "Memory per tile",
        _memory_block,
        "Memory of each tile of one replica by storage category, stacked largest category first, against the tile's "
        "memory limit.",
    ),
    (
        "liveness",
        "Liveness",
        _liveness_block,
        "Live memory over all tiles of one replica at each program step: always-live memory plus the not-always-live "
        "variables live at that step.",
    ),
    (
        "timeline",
        "Execution timeline",
        _timeline_block,
        "Execution steps on each IPU, coloured by program type. The upper lane gives each cycle to one step (compute "
        "before exchange, stream copies and sync), so each type's share of it, in the legend, is its share of the run; the thin lane below "
        "shows the steps running beside it, such as the Sync of idle tiles.",
    ),
    ("vertex-types", "Cycles by vertex type", _vertex_block, "Cycles spent in each vertex type, summed over steps."),
    (
        "compute-sets",
        "Cycles by compute set",
        _compute_set_block,
        "Measured cycles per compute set (the longest IPU of each execution, summed) and the compiler's estimates. "
        "Click a column to sort.",
    ),
    ("programs", "Program tree", _tree_block, "The control programs and functions of the graph, as a tree."),
)


def render_page(
    datasets: list[dict],
    *,
    title: str | None = None,
    differences: list[Difference] | None = None,
    threshold: float = 0.05,
    compress: bool | None = None,
) -> str:
    """The HTML page of one report, or of two side by side (with `differences` from pva.analysis.compare.compare)."""
    if not 1 <= len(datasets) <= 2:
        raise ValueError(f"an HTML report shows one or two reports, not {len(datasets)}")
    compare = len(datasets) == 2
    sources = [d["summary"].get("name") or d["summary"]["source"] for d in datasets]
    if title is None:
        title = f"pva comparison: {sources[0]} vs {sources[1]}" if compare else f"pva report: {sources[0]}"
    title = cut(title)
    labels = [f"A: {sources[0]}", f"B: {sources[1]}"] if compare else [""]

    def columns(make) -> str:
        cells = []
        for r, data in enumerate(datasets):
            head = f'<div class="col-title">{_e(labels[r])}</div>' if compare else ""
            cells.append(f'<div class="col" data-report="{r}">{head}{make(r, data)}</div>')
        return f'<div class="cols">{"".join(cells)}</div>'

    toc = ['<a href="#summary">Summary</a>'] + (['<a href="#differences">Differences</a>'] if compare else [])
    toc += [f'<a href="#{key}">{_e(name)}</a>' for key, name, _make, _intro in _SECTIONS]
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="subtitle">Self-contained report written by pva {_e(__version__)}: every script, style and '
        f"figure is in this file, so it opens without a network or a server.</p>",
        f'<nav class="toc">{"".join(toc)}</nav>',
        '<h2 id="summary">Summary</h2>',
    ]
    if compare:
        body.append(columns(lambda r, d: _summary_card(d["summary"], datasets[1 - r]["summary"], is_b=r == 1)))
        body.append('<h2 id="differences">Differences</h2>')
        body.append(_differences_block(differences or [], threshold))
    else:
        body.append(columns(lambda r, d: _summary_card(d["summary"])))
    for key, name, make, intro in _SECTIONS:
        body.append(f'<h2 id="{key}">{_e(name)}</h2><p class="subtitle">{_e(intro)}</p>')
        body.append(columns(make))
    body.append(
        f"<footer>Generated by pva {_e(__version__)} from {', '.join(_e(s) for s in sources)}. Charts: hover "
        f"for values; the timeline zooms with the mouse wheel.</footer>"
    )
    page = {"reports": [_payload(d) for d in datasets], "shared": _shared(datasets)}
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="generator" content="pva">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'unsafe-inline'; "
            "style-src 'unsafe-inline'; img-src data:\">",
            f"<title>{_e(title)}</title>",
            f"<style>{_asset('report.css')}</style>",
            "</head>",
            f'<body class="{"compare" if compare else "single"}">',
            *body,
            _data_script(page, compress),
            f"<script>{_asset('report.js')}</script>",
            "</body>",
            "</html>",
            "",
        ]
    )
