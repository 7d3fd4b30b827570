"""`pva plot`: the HTML report's charts as images (PNG, SVG or PDF), drawn with matplotlib's Agg backend.

>>> pva.write_plot("profile.pop", "memory", "memory.png")                   # doctest: +SKIP
"""

from __future__ import annotations

import os

import numpy as np

from formats.atomic import IMAGE_MARK
from formats.errors import InvalidInputError, PvaError
from formats.pop.reader import ProfileReader

from .chart_options import PLOT_FORMATS, PLOT_KINDS, format_size
from .html.chart_data import (
    LIMIT_COLOUR,
    MAX_TITLE_NAME,
    Limits,
    cut,
    liveness,
    memory,
    report_title,
    timeline,
    timeline_shares,
    vertex_types,
)
from .html.output import atomic_file, check_output
from .report_source import opened
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
            "pva plot needs matplotlib, which is not installed: pip install 'pva[plot]'"
        ) from exc
    figure = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _byte_axis(ax, top: float, count: int = 5) -> None:
    """Ticks at 1, 2 or 5 times a power of ten of one unit (B, kB, MB, ... of 1024), all labelled in that unit."""
    unit, name = 1.0, 0
    while top / unit >= 4096 and unit < 1024.0**4:
        unit *= 1024
        name += 1
    raw = top / unit / count
    magnitude = 10 ** np.floor(np.log10(raw)) if raw > 0 else 1.0
    step = next(m for m in (1, 2, 5, 10) if raw / magnitude <= m) * magnitude * unit
    ax.set_yticks(np.arange(0, top + step * 1e-6, step))
    digits = 0 if name == 0 or float(step / unit).is_integer() else 1
    units = ("B", "kB", "MB", "GB", "TB")

    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value / unit:,.{digits}f} {units[name]}"))
    ax.set_ylim(0, top)


def _plain(text: str) -> str:
    """Text that matplotlib draws as it is: its math markup ($...$) turned off."""
    return text.replace("$", r"\$")


def _named(reader: ProfileReader, title: str | None) -> str:
    """How a chart's title names its report: `title`, or the report's directory and program name; cut for display."""
    return _plain(cut(title, MAX_TITLE_NAME) if title else report_title(reader))


def _edges(first: int, count: int, bucket: int, total: int) -> np.ndarray:
    return np.minimum(first + np.arange(count + 1) * bucket, first + total).astype(np.float64)


def _no_data(path: str, kind: str, what: str) -> InvalidInputError:
    return InvalidInputError(f"{path!r}: cannot draw --kind {kind}: the report has {what}", path)


def plot_memory(
    reader: ProfileReader,
    *,
    width: float = 12.0,
    height: float | None = None,
    dpi: float = 100,
    limits: Limits = Limits(max_tiles=736),
    including_gaps: bool = False,
    title: str | None = None,
):
    """Memory per tile, stacked by category, one panel per IPU, with the tile limit and out-of-memory tiles.

    Gaps are left out unless `including_gaps`; the scale fits the bars drawn (and the tile limit
    when it is near them).
    """
    mem = memory(reader, limits)
    if mem is None:
        raise _no_data(reader.path, "memory", "no rows in memory_by_tile")
    ipus = mem["ipus"]
    figure = _figure(width, height or 1.0 + 2.3 * len(ipus), dpi)
    axes = figure.subplots(len(ipus), 1, squeeze=False)[:, 0]
    maxima_key = "max" if including_gaps else "max_excluding"
    largest = max(
        [mem["largest"] if including_gaps else mem["largest_excluding"]]
        + [int(np.max(ipu[maxima_key])) for ipu in ipus if len(ipu[maxima_key])]
    )
    show_limit = including_gaps or largest >= 0.25 * mem["limit"]
    top = (max(mem["limit"], largest) if show_limit else largest) * 1.06 or 1
    for ax, ipu in zip(axes, ipus):
        count = len(ipu["max"])
        x = _edges(ipu["first_tile"], count, mem["bucket"], mem["tiles_per_ipu"])
        bottom = np.zeros(count)
        for index, (name, colour, values) in enumerate(zip(mem["names"], mem["colours"], ipu["series"])):
            if index == mem["gaps"] and not including_gaps:
                continue
            upper = bottom + values
            ax.stairs(upper, x, baseline=bottom, fill=True, color=colour, label=_plain(cut(name, 60)), linewidth=0)
            bottom = upper
        maxima = np.asarray(ipu[maxima_key])
        if mem["bucket"] > 1:
            ax.stairs(maxima, x, color="#24292f", linewidth=0.6, label="largest tile of each bar")
        if show_limit:
            ax.axhline(mem["limit"], color=LIMIT_COLOUR, linestyle="--", linewidth=1.2, label="tile limit")
        oom = np.flatnonzero(np.asarray(ipu["oom"]) > 0)
        if oom.size:
            centres = (x[oom] + x[oom + 1]) / 2
            ax.plot(centres, np.minimum(maxima[oom], top), "v", color=LIMIT_COLOUR, markersize=6, label="out of memory")
        ax.set_xlim(x[0], x[-1])
        _byte_axis(ax, top)
        ax.set_ylabel("memory per tile")
        oom_text = f", {ipu['oom_count']} tile(s) out of memory" if ipu["oom_count"] else ""
        ax.set_title(f"IPU {ipu['ipu']}{oom_text}", fontsize=10, loc="left")
        if not show_limit:
            ax.set_title(
                f"tile limit {format_size(mem['limit'])} is above this scale",
                fontsize=8,
                loc="right",
                color=LIMIT_COLOUR,
            )
        ax.margins(x=0)
    axes[-1].set_xlabel("tile")
    handles, labels = axes[0].get_legend_handles_labels()
    seen = dict(zip(labels, handles))
    for ax in axes[1:]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    figure.legend(
        seen.values(), seen.keys(), loc="outside lower center", ncols=min(6, len(seen)), fontsize=8, frameon=False
    )
    note = f" (bars of {mem['bucket']} tiles: mean per tile)" if mem["bucket"] > 1 else ""
    gaps = "including gaps" if including_gaps else "excluding gaps"
    figure.suptitle(f"Memory per tile, {gaps}: {_named(reader, title)}{note}", fontsize=11)
    return figure


def plot_liveness(
    reader: ProfileReader,
    *,
    width: float = 12.0,
    height: float | None = None,
    dpi: float = 100,
    limits: Limits = Limits(),
    not_always_live_only: bool = False,
    title: str | None = None,
):
    """Always-live plus not-always-live memory over the liveness steps (or the not-always-live part alone),
    with the peak marked."""
    live = liveness(reader, limits)
    if live is None:
        raise _no_data(reader.path, "liveness", "no liveness steps")
    figure = _figure(width, height or 4.5, dpi)
    ax = figure.subplots()
    values = np.asarray(live["not_always_live"], dtype=np.float64)
    x = _edges(live["first_step"], values.size, live["bucket"], live["steps"])
    base = 0.0 if not_always_live_only else float(live["always_live"])
    always = np.full(values.size, base)
    if not not_always_live_only:
        ax.stairs(
            always,
            x,
            baseline=0,
            fill=True,
            color=live["colours"]["always_live"],
            alpha=0.8,
            label="always live",
            linewidth=0,
        )
    ax.stairs(
        always + values,
        x,
        baseline=always,
        fill=True,
        color=live["colours"]["not_always_live"],
        label="not always live",
        linewidth=0,
    )
    peak = live["peak"]
    peak_value = peak["not_always_live"] if not_always_live_only else peak["total"]
    px = peak["step"] + 0.5
    ax.axvline(px, color=LIMIT_COLOUR, linewidth=1)
    ax.plot([px], [peak_value], "o", color=LIMIT_COLOUR, label="peak")
    where = " ".join(v for v in (peak["program_type"], peak["program"]) if v)
    if len(where) > 60:
        where = "\u2026" + where[-59:]
    # The label sits above the plot area, on the side of the peak with more room, so it neither
    # covers the bars nor runs off the figure.
    right_half = px > (x[0] + x[-1]) / 2
    ax.annotate(
        _plain(f"peak: step {peak['step']:,}{' (' + where + ')' if where else ''}: {int(peak_value):,} B"),
        (px, 1.0),
        xycoords=("data", "axes fraction"),
        xytext=(-6 if right_half else 6, 4),
        textcoords="offset points",
        fontsize=8,
        color=LIMIT_COLOUR,
        va="bottom",
        ha="right" if right_half else "left",
        annotation_clip=False,
    )
    ax.set_xlim(x[0], x[-1])
    _byte_axis(ax, peak_value * 1.08 or 1)
    ax.set_xlabel("liveness step")
    ax.set_ylabel("not-always-live memory (all tiles)" if not_always_live_only else "live memory (all tiles)")
    ax.legend(loc="lower right", fontsize=8)
    note = f" ({live['bucket']} steps per bar, largest shown)" if live["bucket"] > 1 else ""
    what = "Not-always-live memory" if not_always_live_only else "Liveness"
    ax.set_title(f"{what}: {_named(reader, title)}{note}", fontsize=11, pad=18)
    return figure


#: Where a timeline row's lanes sit, as (offset from the row's centre, height) in rows.
PATH_LANE = (-0.42, 0.56)
OVERLAPPED_LANE = (0.18, 0.22)


def _draw_lane(ax, lane: dict, row: int, where: tuple[float, float], colours: list[str], alpha: float) -> set[int]:
    """One lane's segments as bars, one collection per program type; returns the types drawn."""
    start = np.asarray(lane["start"], dtype=np.float64)
    duration = np.asarray(lane["end"], dtype=np.float64) - start
    kinds = np.asarray(lane["kind"])
    for k in np.unique(kinds).tolist():
        mask = kinds == k
        ax.broken_barh(
            np.column_stack([start[mask], duration[mask]]),
            (row + where[0], where[1]),
            facecolors=colours[int(k)],
            alpha=alpha,
            linewidth=0,
            gid=f"timeline-{'path' if where == PATH_LANE else 'overlapped'}-{row}-{int(k)}",
        )
    return {int(k) for k in kinds.tolist()}


def plot_timeline(
    reader: ProfileReader,
    *,
    width: float = 12.0,
    height: float | None = None,
    dpi: float = 100,
    limits: Limits = Limits(timeline_resolution=4096),
    title: str | None = None,
):
    """Execution steps per IPU on a cycle axis, coloured by program type, in two lanes per IPU.

    The upper lane is the IPU's path (each cycle to one step, compute before exchange, stream copies and sync: see
    pva.analysis.timeline), so each type's share of it is its share of the run; the thin lower lane
    shows, lighter, the steps overlapped by the path's (a Sync of idle tiles under a compute set).
    """
    from matplotlib.patches import Patch

    tl = timeline(reader, limits)
    if tl is None:
        raise _no_data(reader.path, "timeline", "no execution profile")
    rows = tl["ipus"]
    figure = _figure(width, height or 1.8 + 0.7 * len(rows), dpi)
    ax = figure.subplots()
    used: set[int] = set()
    for r, row in enumerate(rows):
        used |= _draw_lane(ax, row, r, PATH_LANE, tl["colours"], 1.0)
        used |= _draw_lane(ax, row["overlapped"], r, OVERLAPPED_LANE, tl["colours"], 0.55)
    ticks = [r + PATH_LANE[0] + PATH_LANE[1] / 2 for r in range(len(rows))]
    ax.set_yticks(ticks, [f"IPU {row['ipu']}" for row in rows])
    ax.set_yticks(
        [r + OVERLAPPED_LANE[0] + OVERLAPPED_LANE[1] / 2 for r in range(len(rows))],
        ["overlapped"] * len(rows),
        minor=True,
        fontsize=7,
    )
    ax.tick_params(axis="y", which="minor", length=0)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, tl["span"])
    clock = f" (clock {tl['clock_frequency'] / 1e6:,.0f} MHz)" if tl["clock_frequency"] else ""
    ax.set_xlabel(f"cycles from the first step{clock}")
    shares = dict(timeline_shares(tl))
    handles = [Patch(color=tl["colours"][k]) for k in sorted(used)]
    labels = [_plain(f"{cut(tl['types'][k], 60)} ({shares.get(tl['types'][k], 0.0):.1f}%)") for k in sorted(used)]
    if "idle" in shares:  # cycles of an IPU's run with no step
        handles.append(Patch(facecolor="white", edgecolor="#8c959f"))
        labels.append(f"idle ({shares['idle']:.1f}%)")
    figure.legend(
        handles,
        labels,
        loc="outside lower center",
        ncols=min(7, len(handles)),
        fontsize=8,
        frameon=False,
    )
    merged = " (short steps merged)" if tl["downsampled"] else ""
    ax.set_title(f"Execution timeline: {_named(reader, title)}{merged}", fontsize=11)
    return figure


def plot_vertex_types(
    reader: ProfileReader,
    *,
    width: float = 12.0,
    height: float | None = None,
    dpi: float = 100,
    title: str | None = None,
):
    """Cycles of the vertex types with the most cycles, as horizontal bars."""
    from matplotlib.ticker import FuncFormatter

    vt = vertex_types(summary_data(reader))
    if vt is None:
        raise _no_data(reader.path, "vertex-types", "no cycles by vertex type (no execution profile)")
    rows = vt["rows"][:VERTEX_BARS]
    figure = _figure(width, height or 1.2 + 0.32 * len(rows), dpi)
    ax = figure.subplots()
    # Whole names up to 100 characters; longer ones keep their start and end around an ellipsis.
    names = [_plain(cut(r["name"], 100)) for r in rows]
    cycles = [r["cycles"] for r in rows]
    bars = ax.barh(range(len(rows)), cycles, color="#4e79a7")
    ax.bar_label(bars, [f"{c:,} ({r['percent']:.1f}%)" for c, r in zip(cycles, rows)], padding=3, fontsize=8)
    ax.set_yticks(range(len(rows)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(cycles) * 1.25 or 1)
    # Plain figures with thousands separators, no "1e6" offset above the axis.
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:,.0f}"))
    ax.set_xlabel("cycles" + (" (estimated)" if vt["estimated"] else ""))
    shown = f"largest {len(rows)} of {len(vt['rows'])}" if len(vt["rows"]) > len(rows) else f"{len(rows)}"
    ax.set_title(f"Cycles by vertex type ({shown}): {_named(reader, title)}", fontsize=11)
    return figure


_PLOTTERS = {
    "memory": plot_memory,
    "liveness": plot_liveness,
    "timeline": plot_timeline,
    "vertex-types": plot_vertex_types,
}


def write_plot(
    report,
    kind: str,
    output: str | os.PathLike[str],
    *,
    width: float = 12.0,
    height: float | None = None,
    dpi: float = 100,
    title: str | None = None,
    including_gaps: bool = False,
    not_always_live_only: bool = False,
) -> int:
    """Draw one chart of a report (a Report or a path) into `output`, in the format its extension names.

    `kind` is one of PLOT_KINDS; `title` names the report in the chart's title (default: its directory
    and program name); `including_gaps` (memory) stacks the gaps too; `not_always_live_only`
    (liveness) draws the not-always-live memory alone. Returns the size of the file written, in bytes.
    """
    if kind not in _PLOTTERS:
        raise InvalidInputError(f"unknown plot kind {kind!r}; expected one of {', '.join(KINDS)}")
    target = check_output(output)
    extension = os.path.splitext(target)[1].lower()
    if extension not in FORMATS:
        raise InvalidInputError(
            f"cannot write {target!r}: expected a file name ending in {', '.join(FORMATS)}, found {extension or 'none'!r}",
            target,
        )
    if not (0 < width <= 100 and (height is None or 0 < height <= 100) and 10 <= dpi <= 1200):
        raise InvalidInputError(f"figure size must be 0-100 inches and dpi 10-1200; got {width} x {height} at {dpi}")
    with opened(report) as reader:
        extra: dict = {"title": title}
        if kind == "memory":
            extra["including_gaps"] = including_gaps
        if kind == "liveness":
            extra["not_always_live_only"] = not_always_live_only
        figure = _PLOTTERS[kind](reader, width=width, height=height, dpi=dpi, **extra)
    with atomic_file(target) as temporary:
        figure.savefig(
            temporary, format=FORMATS[extension], dpi=dpi, facecolor="white", metadata=IMAGE_MARK[FORMATS[extension]]
        )
    return os.path.getsize(target)
