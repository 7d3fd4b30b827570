"""The measurements of issue 8: each one ours beside a baseline, measured in the same run.

Every measurement returns `Row`s: our figure, the baseline's, their ratio (ours / baseline, in
the row's unit) and the target. Times are medians of alternating repetitions; memory is the
peak resident memory of a child process doing only that.
"""

from __future__ import annotations

import os
import pathlib
import sqlite3

import numpy as np

import pva
from formats.pop.reader import ProfileReader
from formats.pop.readonly_sql import run_readonly

from . import startup
from .rows import Context, Row, growth_exponent
from .rows import ms as _ms
from .rows import runs as _runs
from .timing import alternate, alternate_children, child, median_of

# -- 1. opening ------------------------------------------------------------------------------------

OPEN_LIMIT_MS = 50.0
OPEN_RATIO = 2.0


def _open_num_tiles(path: str) -> int:
    report = pva.openReport(path)
    try:
        return report.compilation.target.numTiles
    finally:
        report.close()


def measure_open(ctx: Context) -> list[Row]:
    big, ref = str(ctx.main.pop), str(ctx.reference.pop)
    sides = {"ours": lambda: _open_num_tiles(big), "reference": lambda: _open_num_tiles(ref)}
    medians, times, results = alternate(sides, max(ctx.repeat, 9))
    assert results["ours"] == ctx.main.info["tiles"], results
    ours_ms, ref_ms = medians["ours"] * 1e3, medians["reference"] * 1e3
    met = ours_ms < OPEN_LIMIT_MS and ours_ms <= OPEN_RATIO * ref_ms
    return [
        Row(
            "open",
            f"open {ctx.main.size}, read compilation.target.numTiles",
            ours_ms,
            ref_ms,
            "ms",
            f"the same on {ctx.reference.size}",
            f"< {OPEN_LIMIT_MS:.0f} ms and ratio <= {OPEN_RATIO:g}",
            met,
            details={"times_ms": _ms(times)},
        )
    ]


# -- 2. the first answer, and 8. legacy conversion (they share the json.load runs) -----------------

FIRST_ANSWER_TIME = 1 / 50
FIRST_ANSWER_MEMORY = 1 / 10
#: Against ijson, which stops reading once it has the per-tile totals: at least as fast.
FIRST_ANSWER_STREAMING = 1.0
CONVERT_THROUGHPUT = 0.5
CONVERT_MEMORY = 0.3


def _json_runs(ctx: Context, with_answer: bool, with_convert: bool) -> dict[str, list[dict]]:
    legacy = str(ctx.main.legacy_json(ctx.log))
    pop = str(ctx.main.pop)
    tasks: dict[str, tuple[str, ...]] = {"json": ("json-answer", legacy)}
    if with_answer:
        tasks["answer"] = ("pva-answer", pop)
        tasks["ijson"] = ("ijson-answer", legacy)
    scratch = ctx.scratch()
    try:
        if with_convert:
            tasks["convert"] = ("pva-convert", legacy, os.path.join(scratch, "converted.pop"))
        runs = alternate_children(tasks, ctx.child_repeat)
    finally:
        for name in os.listdir(scratch):
            os.unlink(os.path.join(scratch, name))
        os.rmdir(scratch)
    runs["legacy_bytes"] = [{"bytes": os.path.getsize(legacy)}]
    return runs


def first_answer_rows(ctx: Context, runs: dict[str, list[dict]]) -> list[Row]:
    totals = {run["total"] for run in runs["json"] + runs["answer"] + runs["ijson"]}
    assert len(totals) == 1, f"the two sides disagree on the total memory: {totals}"
    seconds, base_seconds = median_of(runs["answer"], "seconds"), median_of(runs["json"], "seconds")
    stream_seconds = median_of(runs["ijson"], "seconds")
    peak, base_peak = median_of(runs["answer"], "peak_mb"), median_of(runs["json"], "peak_mb")
    size = ctx.main.size
    return [
        Row(
            "first-answer-time",
            f"first answer (total memory of all tiles) from {size}: time",
            seconds,
            base_seconds,
            "s",
            "json.load of the legacy JSON + sum",
            f"ratio <= {FIRST_ANSWER_TIME:g} (50x faster)",
            seconds <= FIRST_ANSWER_TIME * base_seconds,
            details={
                "total_bytes": totals.pop(),
                "ours_runs": _runs(runs["answer"], "seconds", "peak_mb"),
                "baseline_runs": _runs(runs["json"], "seconds", "load_seconds", "peak_mb"),
            },
        ),
        Row(
            "first-answer-memory",
            f"first answer from {size}: peak memory (own process)",
            peak,
            base_peak,
            "MB",
            "json.load of the legacy JSON + sum",
            f"ratio <= {FIRST_ANSWER_MEMORY:g}",
            peak <= FIRST_ANSWER_MEMORY * base_peak,
        ),
        Row(
            "first-answer-streaming",
            f"first answer from {size}: time against a streaming reader",
            seconds,
            stream_seconds,
            "s",
            "ijson streaming the legacy JSON up to the per-tile totals",
            f"ratio <= {FIRST_ANSWER_STREAMING:g}",
            seconds <= FIRST_ANSWER_STREAMING * stream_seconds,
            details={"baseline_runs": _runs(runs["ijson"], "seconds", "peak_mb")},
        ),
    ]


def convert_rows(ctx: Context, runs: dict[str, list[dict]]) -> list[Row]:
    size_mb = runs["legacy_bytes"][0]["bytes"] / 1e6
    rate = size_mb / median_of(runs["convert"], "seconds")
    base_rate = size_mb / median_of(runs["json"], "load_seconds")
    peak, base_peak = median_of(runs["convert"], "peak_mb"), median_of(runs["json"], "peak_mb")
    return [
        Row(
            "convert-throughput",
            f"pva convert of the {ctx.main.size}'s legacy JSON ({size_mb:,.0f} MB): throughput",
            rate,
            base_rate,
            "MB/s",
            "json.load of the same file",
            f"ratio >= {CONVERT_THROUGHPUT:g}",
            rate >= CONVERT_THROUGHPUT * base_rate,
            details={
                "ours_runs": _runs(runs["convert"], "seconds", "peak_mb", "output_bytes"),
                "baseline_runs": _runs(runs["json"], "load_seconds", "peak_mb"),
            },
        ),
        Row(
            "convert-memory",
            "pva convert of the legacy JSON: peak memory (own process)",
            peak,
            base_peak,
            "MB",
            "json.load of the same file",
            f"ratio <= {CONVERT_MEMORY:g}",
            peak <= CONVERT_MEMORY * base_peak,
        ),
    ]


# -- 3. per-tile totals ----------------------------------------------------------------------------

TILE_TOTALS_RATIO = 5.0


def measure_tile_totals(ctx: Context) -> list[Row]:
    path = str(ctx.main.pop)
    with pva.openReport(path) as report:
        in_memory = report.execution.cyclesByTileArray()  # uint64 (steps, tiles), as the API returns it
    opened: list = []

    def ours() -> np.ndarray:
        report = opened.pop()
        try:
            return report.execution.cyclesByTileTotals()
        finally:
            report.close()

    def baseline() -> np.ndarray:
        return np.sum(in_memory, axis=0)

    # each call gets a freshly opened report (opened untimed): nothing is cached between calls
    medians, times, results = alternate(
        {"ours": ours, "baseline": baseline}, ctx.repeat, setup={"ours": lambda: opened.append(pva.openReport(path))}
    )
    assert np.array_equal(results["ours"], results["baseline"]), "per-tile totals disagree"
    gigabytes = in_memory.nbytes / 1e9
    ours_s, base_s = medians["ours"], medians["baseline"]
    return [
        Row(
            "tile-totals",
            f"per-tile cycle totals over all {ctx.main.info['steps']:,} steps: execution.cyclesByTileTotals()",
            ours_s * 1e3,
            base_s * 1e3,
            "ms",
            f"numpy.sum(axis=0) of the same uint64 matrix in memory ({gigabytes:.2f} GB)",
            f"ratio <= {TILE_TOTALS_RATIO:g}",
            ours_s <= TILE_TOTALS_RATIO * base_s,
            details={
                "ours_gb_per_s": gigabytes / ours_s,
                "baseline_gb_per_s": gigabytes / base_s,
                "times_ms": _ms(times),
            },
        )
    ]


# -- 4. walking the steps --------------------------------------------------------------------------

STEP_WALK_RATIO = 3.0
#: Per size where it differs, with the reason: opening a report checks its header, version and
#: tables (about 2 ms, the `open` row), which the baseline's bare sqlite3.connect skips; on small
#: that is a sixth of the walk.
STEP_WALK_RATIO_BY_SIZE = {
    "small": (3.5, "opening and checking the report, which the bare connect skips, is a sixth of it")
}


def _step_walk(path: str) -> int:
    with pva.openReport(path) as report:
        return sum(step.ipus[0].cycles for step in report.execution.steps)


def measure_step_walk(ctx: Context) -> list[Row]:
    path = str(ctx.main.pop)

    def ours() -> int:
        return _step_walk(path)

    def baseline() -> int:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return sum(c for (c,) in conn.execute("SELECT cycles FROM steps_by_ipu WHERE ipu = 0 ORDER BY step_id"))
        finally:
            conn.close()

    medians, times, results = alternate({"ours": ours, "baseline": baseline}, ctx.repeat)
    assert results["ours"] == results["baseline"], results
    steps = ctx.main.info["steps"]
    limit, reason = STEP_WALK_RATIO_BY_SIZE.get(ctx.main.size, (STEP_WALK_RATIO, ""))
    return [
        Row(
            "step-walk",
            f"sum(s.ipus[0].cycles for s in execution.steps), fresh openReport, {steps:,} steps",
            medians["ours"] * 1e3,
            medians["baseline"] * 1e3,
            "ms",
            "sqlite3: SELECT cycles FROM steps_by_ipu WHERE ipu = 0 ORDER BY step_id, summed",
            f"ratio <= {limit:g}" + (f" on {ctx.main.size} ({reason}; {STEP_WALK_RATIO:g} on large)" if reason else ""),
            medians["ours"] <= limit * medians["baseline"],
            details={
                "ours_steps_per_s": steps / medians["ours"],
                "baseline_rows_per_s": steps / medians["baseline"],
                "times_ms": _ms(times),
            },
        )
    ]


# -- 5. an SQL aggregate ---------------------------------------------------------------------------

_CYCLES_PER_CS = (
    "SELECT s.compute_set, sum(b.cycles) AS cycles FROM {steps} s JOIN {steps_by_ipu} b "
    "ON b.step_id = s.id WHERE s.compute_set IS NOT NULL GROUP BY s.compute_set ORDER BY s.compute_set"
)


def _sql_aggregate(path: str) -> list[tuple]:
    reader = ProfileReader(path)
    try:
        return list(run_readonly(reader.file, _CYCLES_PER_CS.format(steps="steps", steps_by_ipu="steps_by_ipu")).rows)
    finally:
        reader.close()


def measure_sql(ctx: Context) -> list[Row]:
    import duckdb

    path = str(ctx.main.pop)
    tables = pathlib.Path(ctx.main.parquet(ctx.log)) / "tables"

    def ours() -> list[tuple]:
        return _sql_aggregate(path)

    def baseline() -> list[tuple]:
        conn = duckdb.connect()
        try:
            sql = _CYCLES_PER_CS.format(
                steps=f"read_parquet('{tables / 'steps.parquet'}')",
                steps_by_ipu=f"read_parquet('{tables / 'steps_by_ipu.parquet'}')",
            )
            return conn.execute(sql).fetchall()
        finally:
            conn.close()

    medians, times, results = alternate({"ours": ours, "baseline": baseline}, ctx.repeat)
    assert [tuple(map(int, r)) for r in results["ours"]] == [tuple(map(int, r)) for r in results["baseline"]], (
        "the SQL results disagree"
    )
    return [
        Row(
            "sql-aggregate",
            f"SQL: total cycles per compute set ({len(results['ours']):,} groups), pva sql path on profile.pop",
            medians["ours"] * 1e3,
            medians["baseline"] * 1e3,
            "ms",
            "DuckDB, the same query over the Parquet export",
            "reported (no target)",
            None,
            details={"times_ms": _ms(times)},
        )
    ]


# -- 6. writing ------------------------------------------------------------------------------------

WRITE_RATIO = 1.5


def measure_write(ctx: Context) -> list[Row]:
    scratch = ctx.scratch()
    try:
        result = child("write", str(ctx.main.pop), scratch, str(ctx.child_repeat))
    finally:
        os.rmdir(scratch)
    return [
        Row(
            "write",
            f"write {ctx.main.size} through ProfileWriter ({result['rows']:,} rows, "
            f"{result['matrix_bytes'] / 1e9:.2f} GB of matrices)",
            result["seconds"],
            result["baseline_seconds"],
            "s",
            "sqlite3.executemany of the same rows + pyarrow IPC files of the same matrices",
            f"ratio <= {WRITE_RATIO:g}",
            result["seconds"] <= WRITE_RATIO * result["baseline_seconds"],
            details={"bytes": result["bytes"], "baseline_bytes": result["baseline_bytes"], "times": result["times"]},
        )
    ]


# -- 7. file size ----------------------------------------------------------------------------------

SIZE_RATIO = 0.25
#: Per size where it differs, with the reason: the per-step, per-tile cycles that dominate the legacy
#: JSON grow with the steps, while on small the variables' per-tile table and its three look-up
#: indexes (about 60% of profile.pop) dominate ours.
SIZE_RATIO_BY_SIZE = {"small": (0.5, "variables and their indexes dominate a report of few steps")}


def measure_file_size(ctx: Context) -> list[Row]:
    pop = ctx.main.pop.stat().st_size / 1e6
    legacy = ctx.main.legacy_json(ctx.log).stat().st_size / 1e6
    limit, reason = SIZE_RATIO_BY_SIZE.get(ctx.main.size, (SIZE_RATIO, ""))
    return [
        Row(
            "file-size",
            f"file size of {ctx.main.size} (profile.pop)",
            pop,
            legacy,
            "MB",
            "the same content as legacy JSON",
            f"ratio <= {limit:g}" + (f" on {ctx.main.size} ({reason}; {SIZE_RATIO:g} on large)" if reason else ""),
            pop <= limit * legacy,
        )
    ]


# -- start-up of the command line ------------------------------------------------------------------


def measure_startup(ctx: Context) -> list[Row]:
    medians = startup.measure(str(ctx.main.pop), max(ctx.repeat, 7))
    python = medians["python -c pass"]
    shell = medians.get('sqlite3 "select 1"')
    rows = []
    for name, row_name in (
        ("pva --help", "startup-help"),
        ("pva info", "startup-info"),
        ('pva sql "select 1"', "startup-sql"),
    ):
        baseline, what = (
            (shell, "the sqlite3 shell's select 1")
            if name.startswith("pva sql") and shell
            else (python, "python -c pass")
        )
        rows.append(
            Row(
                row_name,
                f"{name} on {ctx.main.size}, a whole process",
                medians[name],
                baseline,
                "ms",
                what,
                f"< {startup.STARTUP_LIMIT_MS:.0f} ms",
                medians[name] < startup.STARTUP_LIMIT_MS,
                details={"medians_ms": {k: round(v, 2) for k, v in medians.items()}},
            )
        )
    return rows


# -- growth over the three sizes ------------------------------------------------------------------

#: The report sizes growth is measured over, smallest first (those up to the run's size).
GROWTH_SIZES = ("tiny", "small", "large")
#: Growth exponent of a walk over all steps (linear is 1).
GROWTH_LIMIT = 1.1


def measure_growth(ctx: Context) -> list[Row]:
    """Growth exponents (slope of log time over log size) of open, the step walk and the SQL aggregate
    over the reports of the sizes up to the run's (all three on large); the visitor's is its own row."""
    from .corpus import corpus

    sizes = GROWTH_SIZES[: GROWTH_SIZES.index(ctx.main.size) + 1] if ctx.main.size in GROWTH_SIZES else ()
    if len(sizes) < 2:
        ctx.log("  growth needs two sizes or more: run with --size small or large")
        return []
    corpora = [ctx.main if size == ctx.main.size else corpus(size, ctx.log) for size in sizes]
    quantities = (
        ("open", _open_num_tiles, lambda c: c.pop.stat().st_size, "bytes of profile.pop", None),
        ("step-walk", _step_walk, lambda c: c.info["steps"], "steps", GROWTH_LIMIT),
        ("sql-aggregate", _sql_aggregate, lambda c: c.info["steps"], "steps", GROWTH_LIMIT),
    )
    rows = []
    for name, func, size_of, unit, limit in quantities:
        seconds = []
        for c in corpora:
            medians, _times, _results = alternate({"ours": lambda c=c, f=func: f(str(c.pop))}, ctx.repeat)
            seconds.append(medians["ours"])
        counts = [size_of(c) for c in corpora]
        exponent = growth_exponent(counts, seconds) if len(set(counts)) > 1 else float("nan")
        rows.append(
            Row(
                f"{name}-growth",
                f"growth exponent of {name} over {', '.join(sizes)} ({', '.join(f'{n:,}' for n in counts)} {unit})",
                exponent,
                1.0,
                "exponent",
                "linear growth",
                f"<= {limit:g}" if limit else "reported (opening reads no table in full)",
                bool(exponent <= limit) if limit else None,
                details={"sizes": list(sizes), "counts": counts, "seconds": seconds},
            )
        )
    return rows


# -- Chrome trace export and import ----------------------------------------------------------------


def measure_chrome_export(ctx: Context) -> list[Row]:
    """The rate side by side in this process (alternating); the peak memory of each in a child process."""
    from formats.chrome.export import export_chrome_trace

    from . import bench_chrome as chrome

    pop = str(ctx.main.pop)
    scratch = ctx.scratch()
    try:
        out = os.path.join(scratch, "execution.json")
        naive_out = os.path.join(scratch, "naive.json")
        medians, times, _ = alternate(
            {"ours": lambda: export_chrome_trace(pop, out), "naive": lambda: chrome.export_naive(pop, naive_out)},
            min(ctx.repeat, 3),
        )
        mb = os.path.getsize(out) / 1e6
        with open(out, "rb") as handle:
            events = chrome.count_events(handle)
        os.unlink(out)
        runs = alternate_children(
            {"ours": ("chrome-export", pop, out), "naive": ("chrome-export-naive", pop, naive_out)}, 1
        )
    finally:
        for name in os.listdir(scratch):
            os.unlink(os.path.join(scratch, name))
        os.rmdir(scratch)
    naive_mb = runs["naive"][0]["output_bytes"] / 1e6
    rate, naive_rate = mb / medians["ours"], naive_mb / medians["naive"]
    peak, naive_peak = runs["ours"][0]["peak_mb"], runs["naive"][0]["peak_mb"]
    what = "naive exporter: one query, one json.dumps per event, same steps"
    return [
        Row(
            "chrome-export-rate",
            f"pva export --format chrome-trace of {ctx.main.size} ({events:,} events, {mb:,.0f} MB of JSON): rate",
            rate,
            naive_rate,
            "MB/s",
            what,
            f">= {chrome.EXPORT_RATE_TARGET:g} MB/s"
            if ctx.main.size == "large"
            else f"reported on {ctx.main.size} (the target, >= {chrome.EXPORT_RATE_TARGET:g} MB/s, is for large: "
            f"a {mb:,.0f} MB export is mostly the fixed cost of starting)",
            rate >= chrome.EXPORT_RATE_TARGET if ctx.main.size == "large" else None,
            details={"times": _ms(times), "naive_bytes": naive_mb * 1e6},
        ),
        Row(
            "chrome-export-memory",
            f"pva export --format chrome-trace of {ctx.main.size}: peak memory (own process)",
            peak,
            naive_peak,
            "MB",
            what,
            f"<= {chrome.EXPORT_PEAK_TARGET:g} MB",
            peak <= chrome.EXPORT_PEAK_TARGET,
            details={
                "ours_runs": _runs(runs["ours"], "seconds", "peak_mb"),
                "baseline_runs": _runs(runs["naive"], "seconds", "peak_mb"),
            },
        ),
    ]


def measure_chrome_import(ctx: Context) -> list[Row]:
    from . import bench_chrome as chrome

    events = chrome.IMPORT_EVENTS[ctx.main.size]
    trace = str(chrome.chrome_trace(events, ctx.log))
    with ctx.scratch_directory() as scratch:
        runs = alternate_children(
            {
                "ours": ("chrome-import", trace, os.path.join(scratch, "trace.pvti")),
                "ijson": ("chrome-import-ijson", trace),
            },
            ctx.child_repeat,
        )
    mb = os.path.getsize(trace) / 1e6
    rate = mb / median_of(runs["ours"], "seconds")
    ijson_rate = mb / median_of(runs["ijson"], "seconds")
    peak, ijson_peak = median_of(runs["ours"], "peak_mb"), median_of(runs["ijson"], "peak_mb")
    # one bound for every size: the import keeps up to formats.chrome.importer.STAGE_MEMORY (256 MB)
    # of staged columns in memory before it spills, whatever the size of the trace
    peak_target = chrome.IMPORT_PEAK_TARGET
    what = "ijson streaming every event of the same file"
    return [
        Row(
            "chrome-import-rate",
            f"pva convert of a Chrome trace of {events:,} events ({mb:,.0f} MB): rate",
            rate,
            ijson_rate,
            "MB/s",
            what,
            f">= {chrome.IMPORT_RATE_TARGET:g} MB/s"
            if ctx.main.size == "large"
            else f"reported on {ctx.main.size} (the target, >= {chrome.IMPORT_RATE_TARGET:g} MB/s, is for large's "
            f"10^7 events: on {mb:,.0f} MB, starting the second process and merging the halves weigh more)",
            rate >= chrome.IMPORT_RATE_TARGET if ctx.main.size == "large" else None,
            details={
                "ours_runs": _runs(runs["ours"], "seconds", "peak_mb", "events", "threads", "output_bytes"),
                "baseline_runs": _runs(runs["ijson"], "seconds", "peak_mb", "events"),
            },
        ),
        Row(
            "chrome-import-memory",
            f"pva convert of a Chrome trace of {events:,} events: peak memory (its process and the one it starts)",
            peak,
            ijson_peak,
            "MB",
            what,
            f"<= {peak_target:,.0f} MB",
            peak <= peak_target,
        ),
    ]


# -- the whole suite -------------------------------------------------------------------------------

#: Measurement names for --only, in the order they run.
MEASUREMENTS = (
    "open",
    "first-answer",
    "tile-totals",
    "step-walk",
    "visitor",
    "sql-aggregate",
    "write",
    "file-size",
    "legacy-convert",
    "startup",
    "query-reports",
    "fleet",
    "debug-contexts",
    "chrome-export",
    "chrome-import",
    "kineto-import",
    "growth",
    "client-patterns",
)


def run(ctx: Context, only: set[str]) -> list[Row]:
    """Every selected measurement, in table order."""
    rows: list[Row] = []
    from .bench_compilation import measure_visitor

    simple = {
        "open": measure_open,
        "tile-totals": measure_tile_totals,
        "step-walk": measure_step_walk,
        "visitor": measure_visitor,
        "sql-aggregate": measure_sql,
        "write": measure_write,
        "file-size": measure_file_size,
        "startup": measure_startup,
        "chrome-export": measure_chrome_export,
        "chrome-import": measure_chrome_import,
    }
    from .bench_client_patterns import measure_client_patterns
    from .bench_debug import measure_debug_contexts
    from .bench_kineto import measure_kineto_import
    from .bench_query import measure_fleet, measure_query_reports

    simple.update(
        {
            "query-reports": measure_query_reports,
            "fleet": measure_fleet,
            "debug-contexts": measure_debug_contexts,
            "kineto-import": measure_kineto_import,
            "growth": measure_growth,
            "client-patterns": measure_client_patterns,
        }
    )
    json_runs = None
    for name in MEASUREMENTS:
        if name not in only:
            continue
        ctx.log(f"measuring {name} ...")
        if name in simple:
            rows.extend(simple[name](ctx))
            continue
        if json_runs is None:
            json_runs = _json_runs(ctx, "first-answer" in only, "legacy-convert" in only)
        rows.extend(first_answer_rows(ctx, json_runs) if name == "first-answer" else convert_rows(ctx, json_runs))
    return rows
