"""`pva html` of a trace: one self-contained HTML page (no network) with a zoomable timeline of every
thread, its events drawn by depth and coloured by category, the flows between events as arrows, and
the tables of the trace summary (busy time per thread, events with the most total and self time,
shares by category)."""

from __future__ import annotations

import html
import json
import os

import numpy as np

from ..trace import TraceReport
from . import trace_stats
from .html.output import atomic_file

#: Events drawn at most; beyond it the shortest are left out and the page says how many.
MAX_EVENTS = 200_000
#: Flows drawn at most.
MAX_FLOWS = 50_000

_PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"]

_SCRIPT = r"""
const data = JSON.parse(document.getElementById('trace-data').textContent);
const canvas = document.getElementById('timeline');
const tip = document.getElementById('tip');
const ctx = canvas.getContext('2d');
const ROW = 14, LABEL = 220;
let rows = [], y = 0;
data.threads.forEach((t, i) => { rows.push({top: y, t}); y += (t.depth + 1) * ROW + 6; });
canvas.height = Math.max(y, 40);
let t0 = data.start, t1 = data.end;
function x(t) { return LABEL + (t - t0) / Math.max(t1 - t0, 1e-9) * (canvas.width - LABEL); }
function draw() {
  canvas.width = canvas.clientWidth;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  ctx.font = '11px sans-serif';
  rows.forEach(({top, t}) => {
    ctx.fillStyle = '#333'; ctx.fillText(t.name.slice(0, 34), 2, top + 11);
    ctx.strokeStyle = '#ddd'; ctx.beginPath(); ctx.moveTo(0, top - 3); ctx.lineTo(canvas.width, top - 3); ctx.stroke();
    const e = t.events;
    for (let k = 0; k < e.length; k += 5) {
      const a = x(e[k]), b = x(e[k] + e[k + 1]);
      if (b < LABEL || a > canvas.width) continue;
      ctx.fillStyle = data.colours[e[k + 4]];
      ctx.fillRect(Math.max(a, LABEL), top + e[k + 2] * ROW, Math.max(b - Math.max(a, LABEL), 1), ROW - 2);
      if (b - a > 40) { ctx.fillStyle = '#fff'; ctx.fillText(data.names[e[k + 3]].slice(0, (b - a) / 6), Math.max(a, LABEL) + 2, top + e[k + 2] * ROW + 10); }
    }
  });
  ctx.strokeStyle = 'rgba(0,0,0,0.55)';
  data.flows.forEach(f => {
    const ra = rows[f[0]], rb = rows[f[2]];
    if (!ra || !rb) return;
    const ax = x(f[1]), bx = x(f[3]), ay = ra.top + 6, by = rb.top + 6;
    if (Math.max(ax, bx) < LABEL || Math.min(ax, bx) > canvas.width) return;
    ctx.beginPath(); ctx.moveTo(ax, ay); ctx.lineTo(bx, by); ctx.stroke();
    ctx.beginPath(); ctx.arc(bx, by, 2, 0, 6.3); ctx.fill();
  });
  document.getElementById('readout').textContent = ((t1 - t0) / 1000).toFixed(3) + ' ms shown';
}
canvas.addEventListener('wheel', ev => {
  ev.preventDefault();
  const at = t0 + (ev.offsetX - LABEL) / (canvas.width - LABEL) * (t1 - t0);
  const k = ev.deltaY > 0 ? 1.25 : 0.8;
  t0 = at - (at - t0) * k; t1 = at + (t1 - at) * k; draw();
});
let dragging = null;
canvas.addEventListener('mousedown', ev => { dragging = ev.offsetX; });
window.addEventListener('mouseup', () => { dragging = null; });
canvas.addEventListener('mousemove', ev => {
  if (dragging !== null) {
    const dt = (ev.offsetX - dragging) / (canvas.width - LABEL) * (t1 - t0);
    t0 -= dt; t1 -= dt; dragging = ev.offsetX; draw(); return;
  }
  const row = rows.find(r => ev.offsetY >= r.top && ev.offsetY < r.top + (r.t.depth + 1) * ROW);
  tip.textContent = '';
  if (!row) return;
  const at = t0 + (ev.offsetX - LABEL) / (canvas.width - LABEL) * (t1 - t0), depth = Math.floor((ev.offsetY - row.top) / ROW);
  const e = row.t.events;
  for (let k = 0; k < e.length; k += 5) {
    if (e[k + 2] === depth && e[k] <= at && at <= e[k] + e[k + 1]) {
      tip.textContent = data.names[e[k + 3]] + ' | ' + data.categories[e[k + 4]] + ' | ' + e[k + 1].toLocaleString() + ' us at ' + e[k].toLocaleString() + ' us';
      break;
    }
  }
});
canvas.addEventListener('dblclick', () => { t0 = data.start; t1 = data.end; draw(); });
document.getElementById('reset').addEventListener('click', () => { t0 = data.start; t1 = data.end; draw(); });
window.addEventListener('resize', draw);
draw();
"""

_STYLE = """
body { font-family: sans-serif; margin: 1em; color: #222; }
canvas { width: 100%; border: 1px solid #ccc; cursor: grab; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
td, th { padding: 2px 8px; border-bottom: 1px solid #eee; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.legend span { margin-right: 1em; } .legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
#tip { min-height: 1.2em; font-size: 90%; color: #555; }
"""


def trace_page_data(trace: TraceReport) -> dict:
    """What the page draws: per thread its events (start, duration, depth, name, category), the flows.
    Of a trace of more than MAX_EVENTS events, the MAX_EVENTS longest (a thread at a time, in two
    passes, so memory holds one thread's columns and the events drawn)."""
    threads = [(process, thread) for process in trace.processes for thread in process.threads]
    lengths = [thread.eventColumns().durations for _, thread in threads]
    total = sum(len(d) for d in lengths)
    floor = None
    if total > MAX_EVENTS:
        floor = np.partition(np.concatenate(lengths), total - MAX_EVENTS)[total - MAX_EVENTS]
    del lengths
    names: dict[str, int] = {}
    categories: dict[str, int] = {}
    drawn: list[dict] = []
    where: dict[tuple[int, int], int] = {}
    start, end, shown = None, None, 0
    for process, thread in threads:
        columns = thread.eventColumns()
        depth = _depths(columns.parents)
        kept = np.arange(len(columns)) if floor is None else np.flatnonzero(columns.durations >= floor)
        kept = kept[: max(0, MAX_EVENTS - shown)]
        shown += len(kept)
        events: list[int] = []
        stamps, durations = columns.timestamps[kept].tolist(), columns.durations[kept].tolist()
        for k, stamp, length, level in zip(kept.tolist(), stamps, durations, depth[kept].tolist()):
            name = names.setdefault(columns.labels[k], len(names))
            category = categories.setdefault(columns.channels[k], len(categories))
            events += [stamp, length, level, name, category]
        if len(columns):
            first, last = int(columns.timestamps.min()), int((columns.timestamps + columns.durations).max())
            start = first if start is None else min(start, first)
            end = last if end is None else max(end, last)
        where[(process.pid, thread.tid)] = len(drawn)
        label = f"{process.name or process.pid} / {thread.name or thread.tid}"
        drawn.append({"name": label, "depth": int(depth.max()) if len(depth) else 0, "events": events})
    flows = [
        [where[(f.sourcePid, f.sourceTid)], f.sourceTimestamp, where[(f.targetPid, f.targetTid)], f.targetTimestamp]
        for f in trace.flows[:MAX_FLOWS]
        if (f.sourcePid, f.sourceTid) in where and (f.targetPid, f.targetTid) in where
    ]
    return {
        "start": start or 0,
        "end": end or 1,
        "threads": drawn,
        "flows": flows,
        "names": list(names),
        "categories": list(categories),
        "colours": [_PALETTE[k % len(_PALETTE)] for k in range(len(categories))],
        "events": total,
        "events_shown": shown,
    }


def _depths(parents: np.ndarray) -> np.ndarray:
    """Each event's depth (0 for a root) from its parent's position."""
    depth = np.zeros(len(parents), dtype=np.int64)
    inner = np.flatnonzero(parents >= 0)
    ancestor = parents[inner]
    while inner.size:  # one level further up at a time
        depth[inner] += 1
        up = parents[ancestor]
        keep = up >= 0
        inner, ancestor = inner[keep], up[keep]
    return depth


def _table(headers: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{value:,}</td>' if isinstance(value, int) else f"<td>{html.escape(str(value))}</td>"
            for value in row
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def trace_html(trace: TraceReport) -> str:
    """The page, as text."""
    data = trace_page_data(trace)
    summary = trace_stats.trace_summary(trace, top=20)
    title = os.path.basename(trace.path)
    legend = "".join(
        f'<span><i style="background:{colour}"></i>{html.escape(name or "(none)")}</span>'
        for name, colour in zip(data["categories"], data["colours"])
    )
    left_out = data["events"] - data["events_shown"]
    note = f"<p>{left_out:,} of the shortest events are left out of the timeline.</p>" if left_out else ""
    threads = [
        [f"{p['name']} ({p['pid']})", f"{t['name']} ({t['tid']})", t["events"], t["busy"]]
        for p in summary["processes"]
        for t in p["threads"]
    ]

    def pct(value: float) -> str:
        return f"{100 * value:.2f}%"

    top_total = [[r["name"], r["events"], r["time"], pct(r["share"])] for r in summary["top_by_total"]]
    top_self = [[r["name"], r["events"], r["time"], pct(r["share"])] for r in summary["top_by_self"]]
    categories = [[r["category"] or "(none)", r["self_time"], pct(r["share"])] for r in summary["categories"]]
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
        f"<p>{data['events']:,} events on {len(data['threads']):,} threads, {len(trace.flows):,} flows; "
        f"traced time {summary['traced_time']:,} us.</p>"
        f"<h2>Timeline</h2><p><button id='reset'>Reset</button> <span id='readout'></span> "
        f"&middot; wheel to zoom, drag to pan, double-click to reset; lines are flows</p>"
        f"<div class='legend'>{legend}</div>{note}<canvas id='timeline'></canvas><div id='tip'></div>"
        f"<h2>Busy time by thread</h2>{_table(['Process', 'Thread', 'Events', 'Busy [us]'], threads)}"
        f"<h2>Events with the most total time</h2>{_table(['Event', 'Count', 'Total [us]', 'Self share'], top_total)}"
        f"<h2>Events with the most self time</h2>{_table(['Event', 'Count', 'Self [us]', 'Self share'], top_self)}"
        f"<h2>Share by category</h2>{_table(['Category', 'Self [us]', 'Share'], categories)}"
        f"<script type='application/json' id='trace-data'>{payload}</script><script>{_SCRIPT}</script>"
        f"</body></html>"
    )


def write_trace_html(trace: TraceReport, output: str) -> str:
    """Write the page to `output` atomically; returns the path written."""
    text = trace_html(trace)
    with atomic_file(output) as path, open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return output
