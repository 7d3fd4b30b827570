"""`pva plot`: the HTML report's charts as images (PNG, SVG or PDF), drawn with matplotlib's Agg backend.

>>> pva.write_plot("profile.pop", "memory", "memory.png")                   # doctest: +SKIP
"""

from __future__ import annotations

import os

import numpy as np

from formats.errors import InvalidInputError, PvaError
from formats.profile_reader import ProfileReader

from .chart_options import PLOT_FORMATS, PLOT_KINDS
from .html.chart_data import (
    LIMIT_COLOUR,
    Limits,
    liveness,
    memory,
    timeline,
    vertex_types,
)
from .html.output import atomic_file, check_output
from .sources import opened
from .summary import summary_data

#: What `pva plot --kind` draws.
KINDS = PLOT_KINDS
#: Image formats, by file extension.
FORMATS = PLOT_FORMATS
#: Bars of the vertex type chart.
VERTEX_BARS = 20


class MissingDependencyError(PvaError, ImportError):
    """An optional library that a command needs is not installed."""


def _figure(width: float, height: float, dpi: float):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - exercised only without matplotlib
        raise MissingDependencyError(
            "pva plot needs matplotlib, which is not installed: pip install 'pva[plot]'") from exc
    figure = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _bytes_formatter():
    from matplotlib.ticker import FuncFormatter

    def label(value, _position):
        units = ("B", "KiB", "MiB", "GiB", "TiB")
        x, i = float(value), 0
        while abs(x) >= 1024 and i < len(units) - 1:
            x /= 1024
            i += 1
        return f"{x:,.0f} {units[i]}" if i == 0 or abs(x) >= 100 else f"{x:,.3g} {units[i]}"

    return FuncFormatter(label)


def _byte_axis(ax, top: float, count: int = 5) -> None:
    """Ticks at 1, 2 or 5 times a power of ten of a binary unit (KiB, MiB, ...), labelled in that unit."""
    unit = 1.0
    while top / unit >= 4096 and unit < 1024.0 ** 4:
        unit *= 1024
    raw = top / unit / count
    magnitude = 10 ** np.floor(np.log10(raw)) if raw > 0 else 1.0
    step = next(m for m in (1, 2, 5, 10) if raw / magnitude <= m) * magnitude * unit
    ax.set_yticks(np.arange(0, top + step * 1e-6, step))
    ax.yaxis.set_major_formatter(_bytes_formatter())
    ax.set_ylim(0, top)


def _edges(first: int, count: int, bucket: int, total: int) -> np.ndarray:
    return np.minimum(first + np.arange(count + 1) * bucket, first + total).astype(np.float64)


def _no_data(path: str, kind: str, what: str) -> InvalidInputError:
    return InvalidInputError(f"{path!r}: cannot draw --kind {kind}: the report has {what}", path)


def plot_memory(reader: ProfileReader, *, width: float = 12.0, height: float | None = None, dpi: float = 100,
                limits: Limits = Limits(max_tiles=736)):
    """Memory per tile, stacked by category, one panel per IPU, with the tile limit and out-of-memory tiles."""
    mem = memory(reader, limits)
    if mem is None:
        raise _no_data(reader.path, "memory", "no rows in memory_by_tile")
    ipus = mem["ipus"]
    figure = _figure(width, height or 1.0 + 2.3 * len(ipus), dpi)
    axes = figure.subplots(len(ipus), 1, squeeze=False)[:, 0]
    top = max(mem["limit"], mem["largest"]) * 1.06
    for ax, ipu in zip(axes, ipus):
        count = len(ipu["max"])
        x = _edges(ipu["first_tile"], count, mem["bucket"], mem["tiles_per_ipu"])
        bottom = np.zeros(count)
        for name, colour, values in zip(mem["names"], mem["colours"], ipu["series"]):
            upper = bottom + values
            ax.stairs(upper, x, baseline=bottom, fill=True, color=colour, label=name, linewidth=0)
            bottom = upper
        if mem["bucket"] > 1:
            ax.stairs(ipu["max"], x, color="#24292f", linewidth=0.6, label="largest tile of each bar")
        ax.axhline(mem["limit"], color=LIMIT_COLOUR, linestyle="--", linewidth=1.2, label="tile limit")
        oom = np.flatnonzero(np.asarray(ipu["oom"]) > 0)
        if oom.size:
            centres = (x[oom] + x[oom + 1]) / 2
            ax.plot(centres, np.asarray(ipu["max"])[oom], "v", color=LIMIT_COLOUR, markersize=6,
                    label="out of memory")
        ax.set_xlim(x[0], x[-1])
        _byte_axis(ax, top)
        oom_text = f", {ipu['oom_count']} tile(s) out of memory" if ipu["oom_count"] else ""
        ax.set_title(f"IPU {ipu['ipu']}{oom_text}", fontsize=10, loc="left")
        ax.margins(x=0)
    axes[-1].set_xlabel("tile")
    handles, labels = axes[0].get_legend_handles_labels()
    seen = dict(zip(labels, handles))
    for ax in axes[1:]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    figure.legend(seen.values(), seen.keys(), loc="outside lower center", ncols=min(6, len(seen)), fontsize=8,
                  frameon=False)
    note = f" (bars of {mem['bucket']} tiles: mean per tile)" if mem["bucket"] > 1 else ""
    figure.suptitle(f"Memory per tile: {os.path.basename(reader.path)}{note}", fontsize=11)
    return figure


def plot_liveness(reader: ProfileReader, *, width: float = 12.0, height: float | None = None, dpi: float = 100,
                  limits: Limits = Limits()):
    """Always-live plus not-always-live memory over the liveness steps, with the peak marked."""
    live = liveness(reader, limits)
    if live is None:
        raise _no_data(reader.path, "liveness", "no liveness steps")
    figure = _figure(width, height or 4.5, dpi)
    ax = figure.subplots()
    values = np.asarray(live["not_always_live"], dtype=np.float64)
    x = _edges(live["first_step"], values.size, live["bucket"], live["steps"])
    always = np.full(values.size, float(live["always_live"]))
    ax.stairs(always, x, baseline=0, fill=True, color=live["colours"]["always_live"], alpha=0.8, label="always live",
              linewidth=0)
    ax.stairs(always + values, x, baseline=always, fill=True, color=live["colours"]["not_always_live"],
              label="not always live", linewidth=0)
    peak = live["peak"]
    ax.axvline(peak["step"] + 0.5, color=LIMIT_COLOUR, linewidth=1)
    ax.plot([peak["step"] + 0.5], [peak["total"]], "o", color=LIMIT_COLOUR, label="peak")
    where = " ".join(v for v in (peak["program_type"], peak["program"]) if v)
    ax.annotate(f"peak: step {peak['step']:,}{' (' + where + ')' if where else ''}\n{peak['total']:,} B",
                (peak["step"] + 0.5, peak["total"]), xytext=(8, -4), textcoords="offset points", fontsize=8,
                color=LIMIT_COLOUR, va="top")
    ax.set_xlim(x[0], x[-1])
    _byte_axis(ax, peak["total"] * 1.12 or 1)
    ax.set_xlabel("liveness step")
    ax.set_ylabel("live memory (all tiles)")
    ax.legend(loc="lower right", fontsize=8)
    note = f" ({live['bucket']} steps per bar, largest shown)" if live["bucket"] > 1 else ""
    ax.set_title(f"Liveness: {os.path.basename(reader.path)}{note}", fontsize=11)
    return figure


def plot_timeline(reader: ProfileReader, *, width: float = 12.0, height: float | None = None, dpi: float = 100,
                  limits: Limits = Limits(timeline_resolution=4096)):
    """Execution steps per IPU on a cycle axis, coloured by program type."""
    from matplotlib.patches import Patch

    tl = timeline(reader, limits)
    if tl is None:
        raise _no_data(reader.path, "timeline", "no execution profile")
    rows = tl["ipus"]
    figure = _figure(width, height or 1.6 + 0.55 * len(rows), dpi)
    ax = figure.subplots()
    used = set()
    for r, row in enumerate(rows):
        start = np.asarray(row["start"], dtype=np.float64)
        duration = np.asarray(row["end"], dtype=np.float64) - start
        kinds = np.asarray(row["kind"])
        for k in np.unique(kinds):
            mask = kinds == k
            ax.broken_barh(np.column_stack([start[mask], np.maximum(duration[mask], tl["span"] / 4000)]),
                           (r - 0.4, 0.8), facecolors=tl["colours"][int(k)], linewidth=0)
            used.add(int(k))
    ax.set_yticks(range(len(rows)), [f"IPU {row['ipu']}" for row in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, tl["span"])
    ax.set_xlabel(f"cycles from the first step (clock {tl['clock_frequency'] / 1e6:,.0f} MHz)")
    figure.legend([Patch(color=tl["colours"][k]) for k in sorted(used)], [tl["types"][k] for k in sorted(used)],
                  loc="outside lower center", ncols=min(7, len(used)), fontsize=8, frameon=False)
    merged = " (short steps merged)" if tl["downsampled"] else ""
    ax.set_title(f"Execution timeline: {os.path.basename(reader.path)}{merged}", fontsize=11)
    return figure


def plot_vertex_types(reader: ProfileReader, *, width: float = 12.0, height: float | None = None, dpi: float = 100):
    """Cycles of the vertex types with the most cycles, as horizontal bars."""
    vt = vertex_types(summary_data(reader))
    if vt is None:
        raise _no_data(reader.path, "vertex-types", "no cycles by vertex type (no execution profile)")
    rows = vt["rows"][:VERTEX_BARS]
    figure = _figure(width, height or 1.2 + 0.32 * len(rows), dpi)
    ax = figure.subplots()
    names = [r["name"] if len(r["name"]) <= 70 else "\u2026" + r["name"][-69:] for r in rows]
    cycles = [r["cycles"] for r in rows]
    bars = ax.barh(range(len(rows)), cycles, color="#4e79a7")
    ax.bar_label(bars, [f"{c:,} ({r['percent']:.1f}%)" for c, r in zip(cycles, rows)], padding=3, fontsize=8)
    ax.set_yticks(range(len(rows)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(cycles) * 1.25 or 1)
    ax.set_xlabel("cycles" + (" (estimated)" if vt["estimated"] else ""))
    shown = f"largest {len(rows)} of {len(vt['rows'])}" if len(vt["rows"]) > len(rows) else f"{len(rows)}"
    ax.set_title(f"Cycles by vertex type ({shown}): {os.path.basename(reader.path)}", fontsize=11)
    return figure


_PLOTTERS = {"memory": plot_memory, "liveness": plot_liveness, "timeline": plot_timeline,
             "vertex-types": plot_vertex_types}


def write_plot(report, kind: str, output: str | os.PathLike[str], *, width: float = 12.0,
               height: float | None = None, dpi: float = 100) -> int:
    """Draw one chart of a report (a Report or a path) into `output`, in the format its extension names.

    `kind` is one of PLOT_KINDS; returns the size of the file written, in bytes.
    """
    if kind not in _PLOTTERS:
        raise InvalidInputError(f"unknown plot kind {kind!r}; expected one of {', '.join(KINDS)}")
    target = check_output(output)
    extension = os.path.splitext(target)[1].lower()
    if extension not in FORMATS:
        raise InvalidInputError(
            f"cannot write {target!r}: expected a file name ending in {', '.join(FORMATS)}, found {extension or 'none'!r}",
            target)
    if not (0 < width <= 100 and (height is None or 0 < height <= 100) and 10 <= dpi <= 1200):
        raise InvalidInputError(f"figure size must be 0-100 inches and dpi 10-1200; got {width} x {height} at {dpi}")
    with opened(report) as reader:
        figure = _PLOTTERS[kind](reader, width=width, height=height, dpi=dpi)
    with atomic_file(target) as temporary:
        figure.savefig(temporary, format=FORMATS[extension], dpi=dpi, facecolor="white")
    return os.path.getsize(target)
