"""HTML report benchmark: building the page of a large report, its size, and how fast a browser draws it.

Run ``python -m benchmarks.bench_html`` (``--size tiny`` for a smoke run in seconds). The report
is generated once through formats.pop.writer and cached under ``.bench-cache/``: a 4-IPU Mk2
target (5,888 tiles) with 50,000 execution steps, 100,000 programs, 20,000 compute sets, 50,000
liveness steps and memory by tile and by category (the per-tile step cycle matrix is left out:
the page does not read it). Figures are printed beside baselines measured in the same run:
building the page against ``pva summary --json``'s figures (summary_data), and the browser's
time to draw every chart against the time it takes to open a blank page. The browser part runs
only when Chromium is installed (``/usr/bin/chromium`` or $CHROMIUM).

Targets: the page of the full report under 12 MB, built in under 15 s, drawn in under 5 s.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import time

import numpy as np

from formats.pop.reader import ProfileReader
from formats.pop.writer import ProfileWriter
from pva.analysis.html import Limits, html_report
from pva.analysis.html.chart_data import report_data
from pva.analysis.summary import summary_data
from pva.compilation import CATEGORIES

from .timing import best_of

SIZES = {
    "full": {
        "steps": 50_000,
        "programs": 100_000,
        "compute_sets": 20_000,
        "liveness_steps": 50_000,
        "num_ipus": 4,
        "tiles_per_ipu": 1472,
    },
    "tiny": {
        "steps": 2_000,
        "programs": 4_000,
        "compute_sets": 800,
        "liveness_steps": 2_000,
        "num_ipus": 4,
        "tiles_per_ipu": 1472,
    },
}
CACHE = pathlib.Path(__file__).resolve().parent.parent / ".bench-cache"
_GENERATOR_VERSION = 1
_STEP_KINDS = (
    "StreamCopyBegin",
    "StreamCopyMid",
    "StreamCopyEnd",
    "DoExchange",
    "OnTileExecute",
    "Sync",
    "OnTileExecute",
    "OnTileExecute",
    "DoExchange",
    "OnTileExecute",
    "GlobalExchange",
)
_GROUP = 100  # children per Sequence


def report_path(size: str) -> pathlib.Path:
    """The cached report of a size, generated if missing."""
    path = CACHE / f"html-{size}-v{_GENERATOR_VERSION}.pop"
    if not path.exists():
        CACHE.mkdir(exist_ok=True)
        started = time.perf_counter()
        generate(path, **SIZES[size])
        print(f"generated {path.name} in {time.perf_counter() - started:.1f} s ({path.stat().st_size / 1e6:,.1f} MB)")
    return path


def generate(
    path: os.PathLike[str],
    *,
    steps: int,
    programs: int,
    compute_sets: int,
    liveness_steps: int,
    num_ipus: int,
    tiles_per_ipu: int,
    seed: int = 5,
) -> None:
    """Write a report with every table the HTML page reads, vectorised with numpy."""
    rng = np.random.default_rng(seed)
    tiles = num_ipus * tiles_per_ipu
    limit = 638976
    with ProfileWriter(path, producer="pva-benchmarks", poplar_version="3.1.0 (bench)") as w:
        w.set_target(
            num_ipus=num_ipus, tiles_per_ipu=tiles_per_ipu, bytes_per_tile=limit, architecture="Ipu2", type="Ipu"
        )
        w.set_graph(
            num_compute_sets=compute_sets, num_edges=compute_sets * 40, num_vars=5000, num_vertices=compute_sets * 8
        )
        w.insert("vertex_types", ("id", "name"), [(v, f"poplin::ConvPartial{v}<half,float,true>") for v in range(60)])
        est_max = rng.integers(50, 5000, size=compute_sets)
        w.insert(
            "compute_sets",
            ("compute_set", "name", "num_vertices", "estimated_cycles_max", "estimated_cycles_total"),
            (
                (cs, f"layer{cs // 100}/block{cs % 100}/conv{cs}", 8, int(est_max[cs]), int(est_max[cs]) * 900)
                for cs in range(compute_sets)
            ),
        )
        w.insert(
            "compute_set_vertices",
            ("id", "compute_set", "vertex_type", "count", "estimated_cycles"),
            ((i, i // 2, (i * 7) % 60, 4, 100) for i in range(compute_sets * 2)),
        )

        # programs: a root Sequence, Sequences of _GROUP leaves each
        num_sequences = max(1, (programs - 1) // (_GROUP + 1))
        first_leaf = 1 + num_sequences
        kinds = (
            "OnTileExecute",
            "DoExchange",
            "OnTileExecute",
            "Sync",
            "StreamCopyBegin",
            "StreamCopyMid",
            "StreamCopyEnd",
            "OnTileExecute",
            "GlobalExchange",
            "Repeat",
            "Call",
            "WriteUndef",
        )

        def row(pid: int) -> tuple:
            if pid < first_leaf:
                return (pid, "Sequence", f"seq{pid}" if pid else "", None, None, None)
            kind = kinds[pid % len(kinds)]
            return (
                pid,
                kind,
                f"{kind.lower()}{pid}",
                pid % compute_sets if kind == "OnTileExecute" else None,
                3 if kind == "Repeat" else None,
                first_leaf if kind == "Call" else None,
            )

        w.insert(
            "programs",
            ("id", "type", "name", "compute_set", "repeat_count", "call_target"),
            (row(p) for p in range(programs)),
        )
        children = [(0, i, 1 + i) for i in range(num_sequences)]
        children += [
            (1 + (i // _GROUP) % num_sequences, i // (_GROUP * num_sequences) * _GROUP + i % _GROUP, leaf)
            for i, leaf in enumerate(range(first_leaf, programs))
        ]
        w.insert("program_children", ("parent", "position", "child"), children)
        w.insert("control_programs", ("position", "program"), [(0, 0)])
        w.insert("function_programs", ("position", "program"), [(0, first_leaf)])

        # memory by category and by tile; a few tiles out of memory
        names = list(CATEGORIES)
        w.insert("var_categories", ("id", "name", "description"), [(i, n, CATEGORIES[n]) for i, n in enumerate(names)])
        per_tile = np.zeros((tiles, 6 * len(names)), dtype=np.uint64)
        for k, name in enumerate(
            (
                "variable",
                "controlCode",
                "vertexCode",
                "internalExchangeCode",
                "stack",
                "message",
                "constant",
                "vertexInstanceState",
                "copyDescriptor",
                "outputEdge",
                "rearrangement",
            )
        ):
            per_tile[:, 6 * names.index(name) + 2] = rng.integers(1000, 110000 // (k + 1), size=tiles)
        hot = rng.choice(tiles, size=7, replace=False)
        per_tile[hot, 6 * names.index("variable") + 2] += limit
        total = per_tile.sum(axis=1).astype(np.int64)
        gaps = rng.integers(0, 4000, size=tiles)
        w.insert(
            "memory_by_tile",
            (
                "tile",
                "total",
                "total_including_gaps",
                "interleaved",
                "interleaved_including_gaps",
                "non_interleaved",
                "non_interleaved_including_gaps",
                "overflowed",
                "overflowed_including_gaps",
                "always_live_bytes",
                "not_always_live_bytes",
            ),
            (
                (
                    t,
                    int(total[t]),
                    int(total[t] + gaps[t]),
                    0,
                    0,
                    int(total[t]),
                    int(total[t] + gaps[t]),
                    0,
                    0,
                    int(total[t]) // 2,
                    int(total[t]) - int(total[t]) // 2,
                )
                for t in range(tiles)
            ),
        )
        w.matrix("memory_category_by_tile").append(per_tile)

        # liveness: a random walk with one clear peak, classes live over intervals
        walk = np.abs(np.cumsum(rng.integers(-40_000, 40_000, size=liveness_steps))) + 1_000_000
        walk[liveness_steps // 3] = int(walk.max()) * 2
        w.insert(
            "liveness_steps",
            ("id", "program", "parent", "depth", "not_always_live_bytes"),
            (
                (s, first_leaf + s % (programs - first_leaf), None if s == 0 else 0, 0 if s == 0 else 1, int(walk[s]))
                for s in range(liveness_steps)
            ),
        )
        classes = 4000
        starts = rng.integers(0, liveness_steps, size=classes)
        w.insert(
            "equivalence_class_steps",
            ("class", "start", "end"),
            ((c, int(starts[c]), int(min(liveness_steps, starts[c] + rng.integers(1, 2000)))) for c in range(classes)),
        )
        w.insert("variables", ("id", "name"), ((v, f"model/layer{v // 10}/weights{v}") for v in range(5000)))
        lowered = 60_000
        w.insert(
            "vars_info",
            ("id", "tile", "name", "size_bytes", "category", "equivalence_class", "unlowered_var"),
            (
                (i, i % tiles, f"v{i}", 256 + (i % 97) * 64, names.index("variable"), i % classes, i % 5000)
                for i in range(lowered)
            ),
        )

        # execution: two runs of steps; per-IPU windows advance a clock per IPU
        half = steps // 2
        w.insert(
            "runs",
            ("id", "name", "first_step", "num_steps"),
            [(0, "first", 0, half), (1, "second", half, steps - half)],
        )
        kind_of = np.arange(steps) % len(_STEP_KINDS)
        cs_of = rng.integers(0, compute_sets, size=steps)
        w.insert(
            "steps",
            ("id", "run", "type", "program", "compute_set"),
            (
                (
                    s,
                    int(s >= half),
                    _STEP_KINDS[k],
                    first_leaf + s % (programs - first_leaf),
                    int(cs_of[s]) if _STEP_KINDS[k] == "OnTileExecute" else None,
                )
                for s, k in enumerate(kind_of.tolist())
            ),
        )
        lengths = rng.integers(20, 6000, size=(steps, num_ipus))
        clock = np.zeros(num_ipus, dtype=np.int64)
        base = np.zeros(num_ipus, dtype=np.int64)
        by_ipu = []
        for s in range(steps):
            if s == half:
                base = clock.copy()
            for ipu in range(num_ipus):
                frm = int(clock[ipu] - base[ipu])
                length = int(lengths[s, ipu])
                by_ipu.append(
                    (
                        s,
                        ipu,
                        length * tiles_per_ipu,
                        tiles_per_ipu,
                        int(base[ipu]),
                        frm,
                        frm,
                        frm,
                        frm + length // 2,
                        frm + length,
                        frm + 3 * length // 4,
                        frm,
                        frm,
                        frm,
                        frm + length // 2,
                        frm + length,
                        frm + 3 * length // 4,
                        length,
                    )
                )
                clock[ipu] += length
        w.insert(
            "steps_by_ipu",
            (
                "step_id",
                "ipu",
                "cycles",
                "active_tiles",
                "cycles_base",
                "all_cycles_from_min",
                "all_cycles_from_max",
                "all_cycles_from_avg",
                "all_cycles_to_min",
                "all_cycles_to_max",
                "all_cycles_to_avg",
                "active_cycles_from_min",
                "active_cycles_from_max",
                "active_cycles_from_avg",
                "active_cycles_to_min",
                "active_cycles_to_max",
                "active_cycles_to_avg",
                "tile_cycles_max",
            ),
            by_ipu,
        )
        w.insert(
            "run_cycles_by_ipu",
            ("run", "ipu", "start", "end"),
            [(0, i, 0, int(base[i])) for i in range(num_ipus)]
            + [(1, i, int(base[i]), int(clock[i])) for i in range(num_ipus)],
        )
        ote = np.flatnonzero(np.array([_STEP_KINDS[k] == "OnTileExecute" for k in kind_of]))
        w.insert(
            "step_vertex_cycles",
            ("step_id", "compute_set", "vertex_type", "count", "cycles"),
            (
                (int(s), int(cs_of[s]), int(v), 4, int(lengths[s, 0]) * 3)
                for s in ote
                for v in ((s * 7) % 60, (s * 7 + 1) % 60)
            ),
        )


def _chromium() -> str | None:
    for candidate in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and os.path.exists(candidate):
            return candidate
    return None


def browser_seconds(chromium: str, page: pathlib.Path, *flags: str) -> tuple[float, str]:
    """Seconds from launching headless Chromium to the dumped DOM of `page`, and that DOM."""
    profile = tempfile.mkdtemp(prefix="pva-bench-chromium-")
    try:
        started = time.perf_counter()
        result = subprocess.run(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--window-size=1400,1000",
                *flags,
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        return time.perf_counter() - started, result.stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    path = report_path(args.size)
    print(f"report: {path} ({path.stat().st_size / 1e6:,.0f} MB)")

    def figures():
        reader = ProfileReader(path)
        try:
            return summary_data(reader)
        finally:
            reader.close()

    def data():
        reader = ProfileReader(path)
        try:
            return report_data(reader, Limits())
        finally:
            reader.close()

    t_summary, _ = best_of(figures, args.repeat)
    t_data, _ = best_of(data, args.repeat)
    t_page, page = best_of(lambda: html_report([path]), args.repeat)
    print(
        f"  chart data (report_data)            {t_data:8.2f} s | baseline summary_data {t_summary:8.2f} s | "
        f"ratio {t_data / t_summary:6.2f}"
    )
    print(
        f"  whole page (html_report)            {t_page:8.2f} s | baseline summary_data {t_summary:8.2f} s | "
        f"ratio {t_page / t_summary:6.2f}  target < 15 s"
    )
    size = len(page.encode("utf-8"))
    data_size = len(re.search(r'id="pva-data"[^>]*>([^<]*)<', page).group(1))
    print(
        f"  page size                           {size / 1e6:8.2f} MB (inline data {data_size / 1e6:.2f} MB)"
        f"  target < 12 MB"
    )
    chromium = _chromium()
    if chromium is None:
        print("  browser: Chromium not found; set $CHROMIUM to measure drawing")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        blank = pathlib.Path(tmp) / "blank.html"
        blank.write_text("<!DOCTYPE html><title>blank</title><p>blank</p>", encoding="utf-8")
        # Uncompressed data draws synchronously while the page loads, so the dump (in real time)
        # follows the drawing; the deflated page decodes asynchronously and needs virtual time.
        plain = pathlib.Path(tmp) / "plain.html"
        plain.write_text(html_report([path], compress=False), encoding="utf-8")
        packed = pathlib.Path(tmp) / "packed.html"
        packed.write_text(page, encoding="utf-8")
        t_blank, _ = best_of(lambda: browser_seconds(chromium, blank), args.repeat)
        t_open, (_seconds, dom) = best_of(lambda: browser_seconds(chromium, plain), args.repeat)
        ready = 'data-pva-ready="1"' in dom and 'data-pva-failures="0"' in dom
        drawn = dom.count('data-drawn="1"')
        draw_ms: dict[str, float] = {}
        for tag in re.findall(r"<canvas[^>]*>", dom):
            chart = re.search(r'data-chart="([^"]+)"', tag)
            ms = re.search(r'data-draw-ms="([0-9.]+)"', tag)
            if chart and ms:
                draw_ms[chart.group(1)] = max(draw_ms.get(chart.group(1), 0.0), float(ms.group(1)))
        print(
            f"  browser: open and draw, plain JSON ({plain.stat().st_size / 1e6:.1f} MB, {drawn} charts, "
            f"ready={ready}) {t_open:6.2f} s | baseline blank page {t_blank:6.2f} s | ratio {t_open / t_blank:6.2f}; "
            f"page alone {t_open - t_blank:.2f} s  target < 5 s"
        )
        print(
            "  slowest drawing of one chart, ms: "
            + ", ".join(f"{k} {v:.0f}" for k, v in sorted(draw_ms.items()))
            + "  (a timeline redraw is the cost of each zoom or pan step)"
        )
        _t, (_s, packed_dom) = best_of(lambda: browser_seconds(chromium, packed, "--virtual-time-budget=30000"), 1)
        ok = 'data-pva-ready="1"' in packed_dom and 'data-pva-failures="0"' in packed_dom
        print(f"  browser: deflated page ({size / 1e6:.1f} MB) decoded and drawn: {ok}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
