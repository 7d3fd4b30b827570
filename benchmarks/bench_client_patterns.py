"""The loops real pva clients write, timed per call beside a bare Python loop over a numpy array.

Run ``python -m benchmarks.bench_client_patterns`` (``--reports mnist-mlp bert-encoder`` to skip the
4-IPU ``large`` report, which takes minutes to simulate once). Each pattern is a public client's loop
(popliner, ipu_tensorflow_addons, TensorFlow's test utilities) over every tile and a sample of steps;
ours is timed once on a freshly opened report, so the first touch of every tile is included; the
baseline is the same loop reading the same answers out of a numpy array, best of three.

Targets (per call, amortised over the loop): at most 20 us and 40x the numpy loop, goal 10 us; the
first call on a report at most 50 ms; the growth exponent of the loop's time over its calls, across
the reports, at most 1.05.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import pathlib
import time
from collections.abc import Callable

import numpy as np

import pva

from .corpus import CACHE, REPORT_SOURCES, TIMESTAMP, source_hash
from .corpus import corpus as corpus_report
from .rows import Context, Row, growth_exponent

PER_CALL_US = 20.0
PER_CALL_GOAL_US = 10.0
BASELINE_RATIO = 40.0
FIRST_CALL_MS = 50.0
GROWTH_LIMIT = 1.05
#: Steps sampled (evenly) for the step x tile loops, and items for the per-item loops. popliner's
#: liveness loop visits every step: it is sampled at `LIVENESS_STEPS_SAMPLED`, so that the first
#: touch of each tile is amortised over about as many steps as on the presets (960 on bert-encoder).
STEPS_SAMPLED = 64
LIVENESS_STEPS_SAMPLED = 1024
ITEMS_SAMPLED = 64
#: The presets measured beside the suite's report (default knobs): name -> description.
PRESET_REPORTS = {"mnist-mlp": "the mnist-mlp preset", "bert-encoder": "the bert-encoder preset"}


@dataclasses.dataclass
class Pattern:
    """One client loop: `loop(report)` reads the lists the loop walks and returns the loop, which
    makes every call and returns the numbers read as a 2-D list. With `per_row`, each row is one
    call's answer (a list of variables); else each number is one."""

    name: str
    client: str
    code: str
    loop: Callable[[pva.Report], Callable[[], list[list]]]
    per_row: bool = False


def _sample(items: list, count: int) -> list:
    if len(items) <= count:
        return list(items)
    step = len(items) / count
    return [items[int(k * step)] for k in range(count)]


def _liveness_tiles(report: pva.Report) -> list[int]:
    return [t.tileId for t in report.compilation.tilesWithLivenessInfo]


# Each pattern below takes what the loop walks (untimed: the lists a client reads once) and returns
# the loop itself, which is timed.


def _nalm_bytes(report: pva.Report) -> Callable[[], list[list]]:
    steps = _sample(list(report.compilation.livenessProgramSteps), LIVENESS_STEPS_SAMPLED)
    tiles = _liveness_tiles(report)
    return lambda: [[step.notAlwaysLiveMemoryForTile(tile).bytes for tile in tiles] for step in steps]


def _nalm_variables(report: pva.Report) -> Callable[[], list[list]]:
    steps = _sample(list(report.compilation.livenessProgramSteps), 8)
    tiles = _sample(_liveness_tiles(report), ITEMS_SAMPLED * 4)
    return lambda: [
        [v.size for v in step.notAlwaysLiveMemoryForTile(tile).variables] for step in steps for tile in tiles
    ]


def _nalm_ipu(report: pva.Report) -> Callable[[], list[list]]:
    ipus = range(report.compilation.target.ipusPerReplica)
    steps = list(report.compilation.livenessProgramSteps)
    return lambda: [[step.notAlwaysLiveMemoryForIpu(ipu).bytes for ipu in ipus] for step in steps]


def _nalm_variable(report: pva.Report) -> Callable[[], list[list]]:
    steps = _sample(list(report.compilation.livenessProgramSteps), 256)
    variables = _sample(list(report.compilation.variables), ITEMS_SAMPLED)
    return lambda: [[step.notAlwaysLiveBytesForVariable(v) for step in steps] for v in variables]


def _lowered_for_tile(report: pva.Report) -> Callable[[], list[list]]:
    lowered = report.compilation.loweredVariables
    tiles = _liveness_tiles(report)
    return lambda: [[v.bytes for v in lowered.forTile(tile)] for tile in tiles]


def _always_live_for_tile(report: pva.Report) -> Callable[[], list[list]]:
    compilation = report.compilation
    tiles = _liveness_tiles(report)
    return lambda: [[v.size for v in compilation.alwaysLiveVariablesForTile(t)] for t in tiles]


_CATEGORIES = ("variable", "vertexCode", "stack", "controlCode", "internalExchangeCode", "constant")


def _categories(report: pva.Report) -> Callable[[], list[list]]:
    tiles = list(report.compilation.tiles)
    return lambda: [[getattr(t.memory.category, c).total for c in _CATEGORIES] for t in tiles]


def _step_cycles(report: pva.Report) -> Callable[[], list[list]]:
    steps = _sample(list(report.execution.steps), STEPS_SAMPLED)
    tiles = range(report.compilation.target.numTiles)
    return lambda: [[step.cyclesByTile[t] for t in tiles] for step in steps]


def _per_tile(items: list, attribute: str, report: pva.Report) -> Callable[[], list[list]]:
    tiles = range(report.compilation.target.tilesPerReplica)
    return lambda: [[getattr(item, attribute)[t] for t in tiles] for item in items]


def _ids(report: pva.Report, sql: str) -> list[int]:
    """Ids chosen in SQL, so that choosing reads no vector the loop then finds cached."""
    return _sample([row[0] for row in report.sql(sql)], ITEMS_SAMPLED)


def _cs_estimates(report: pva.Report) -> Callable[[], list[list]]:
    ids = _ids(report, "SELECT compute_set FROM compute_sets WHERE estimated_cycles_row IS NOT NULL ORDER BY 1")
    sets = report.compilation.computeSets
    return _per_tile([sets[i] for i in ids], "estimatedCyclesByTile", report)


def _control_code(report: pva.Report) -> Callable[[], list[list]]:
    ids = _ids(report, "SELECT program FROM program_vectors WHERE kind = 'control_code' ORDER BY 1")
    programs = report.compilation.programs
    return _per_tile([programs[i] for i in ids], "controlCodeByTile", report)


def _exchange_code(report: pva.Report) -> Callable[[], list[list]]:
    ids = _ids(report, "SELECT program FROM program_vectors WHERE kind = 'code_bytes' ORDER BY 1")
    programs = report.compilation.programs
    return _per_tile([programs[i] for i in ids], "codeBytesByTile", report)


def _vertex_counts(report: pva.Report) -> Callable[[], list[list]]:
    sets = report.compilation.computeSets
    ids = _ids(report, "SELECT DISTINCT compute_set FROM compute_set_vertices WHERE count_by_tile_row IS NOT NULL")
    vertices = [v for i in ids for v in sets[i].vertices][:ITEMS_SAMPLED]
    return _per_tile(vertices, "countByTile", report)


PATTERNS = (
    Pattern("nalm-tile-bytes", "popliner", "step.notAlwaysLiveMemoryForTile(t).bytes", _nalm_bytes),
    Pattern(
        "nalm-tile-variables", "popliner", "step.notAlwaysLiveMemoryForTile(t).variables", _nalm_variables, per_row=True
    ),
    Pattern("nalm-ipu", "popliner", "step.notAlwaysLiveMemoryForIpu(i).bytes", _nalm_ipu),
    Pattern("nalm-variable", "popliner", "step.notAlwaysLiveBytesForVariable(v)", _nalm_variable),
    Pattern(
        "lowered-for-tile",
        "popliner",
        "sum(v.bytes for v in loweredVariables.forTile(t))",
        _lowered_for_tile,
        per_row=True,
    ),
    Pattern("always-live-for-tile", "popliner", "alwaysLiveVariablesForTile(t)", _always_live_for_tile, per_row=True),
    Pattern("tile-categories", "ipu_tensorflow_addons", "tile.memory.category.<c>.total", _categories),
    Pattern("step-cycles-by-tile", "TensorFlow test utils", "step.cyclesByTile[t]", _step_cycles),
    Pattern("cs-estimated-by-tile", "pva clients", "computeset.estimatedCyclesByTile[t]", _cs_estimates),
    Pattern("control-code-by-tile", "pva clients", "program.controlCodeByTile[t]", _control_code),
    Pattern("code-bytes-by-tile", "pva clients", "exchange.codeBytesByTile[t]", _exchange_code),
    Pattern("count-by-tile", "pva clients", "vertices.countByTile[t]", _vertex_counts),
)


def _baseline(answers: list[list]) -> float:
    """Seconds of the same nested loop reading the answers out of a numpy array (best of three)."""
    width = max((len(row) for row in answers), default=0)
    array = np.zeros((len(answers), width), dtype=np.int64)
    for i, row in enumerate(answers):
        array[i, : len(row)] = row
    shape = [(i, range(len(row))) for i, row in enumerate(answers)]
    best = math.inf
    for _ in range(3):
        started = time.perf_counter()
        for i, columns in shape:
            for j in columns:
                array[i, j]
        best = min(best, time.perf_counter() - started)
    return best


def measure_report(path: str, log=print) -> dict[str, dict]:
    """Every pattern on one report: calls, ours and the baseline per call (us), first call (ms).

    Modules are imported first (numpy, pyarrow and its compute kernels): a first call is the
    report's cost, not the process's."""
    import pyarrow.compute  # noqa: F401

    results = {}
    for pattern in PATTERNS:
        with pva.openReport(path) as fresh:
            first_ms = _first_call(pattern, fresh) * 1e3
        with pva.openReport(path) as report:
            loop = pattern.loop(report)  # the lists the loop walks: untimed
            started = time.perf_counter()
            answers = loop()
            ours = time.perf_counter() - started
        base = _baseline(answers)
        calls = len(answers) if pattern.per_row else sum(len(row) for row in answers)
        if not calls:
            log(f"  {pattern.name}: no calls on this report")
            continue
        results[pattern.name] = {
            "calls": calls,
            "ours_us": ours / calls * 1e6,
            "baseline_us": base / calls * 1e6,
            "first_call_ms": first_ms,
            "seconds": ours,
        }
        log(f"  {pattern.name}: {calls:,} calls, {ours / calls * 1e6:.2f} us/call, first {first_ms:.1f} ms")
    return results


def _first_call(pattern: Pattern, report: pva.Report) -> float:
    """Seconds of one call of the pattern's accessor on a report opened for it (the object it is
    called on chosen first, untimed)."""
    compilation = report.compilation
    tile = compilation.tilesWithLivenessInfo[0] if len(compilation.tilesWithLivenessInfo) else compilation.tiles[0]
    step = compilation.livenessProgramSteps[len(compilation.livenessProgramSteps) // 2]
    variable = compilation.variables[0]
    compute_set = compilation.computeSets[0]
    program = compilation.programs[0]
    exchanges = [row[0] for row in report.sql("SELECT program FROM program_vectors WHERE kind = 'code_bytes' LIMIT 1")]
    exchange = compilation.programs[exchanges[0]] if exchanges else program
    run_step = report.execution.steps[0] if len(report.execution.steps) else None
    first = {
        "nalm-tile-bytes": lambda: step.notAlwaysLiveMemoryForTile(tile).bytes,
        "nalm-tile-variables": lambda: step.notAlwaysLiveMemoryForTile(tile).variables,
        "nalm-ipu": lambda: step.notAlwaysLiveMemoryForIpu(0).bytes,
        "nalm-variable": lambda: step.notAlwaysLiveBytesForVariable(variable),
        "lowered-for-tile": lambda: compilation.loweredVariables.forTile(tile),
        "always-live-for-tile": lambda: compilation.alwaysLiveVariablesForTile(tile),
        "tile-categories": lambda: tile.memory.category.variable.total,
        "step-cycles-by-tile": lambda: run_step.cyclesByTile[0] if run_step is not None else None,
        "cs-estimated-by-tile": lambda: compute_set.estimatedCyclesByTile,
        "control-code-by-tile": lambda: program.controlCodeByTile,
        "code-bytes-by-tile": lambda: exchange.codeBytesByTile,
        "count-by-tile": lambda: [v.countByTile for v in compute_set.vertices],
    }
    call = first[pattern.name]
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def rows_for(name: str, results: dict[str, dict]) -> list[Row]:
    """One suite row per pattern on the report called `name`."""
    rows = []
    for pattern in PATTERNS:
        figures = results.get(pattern.name)
        if figures is None:
            continue
        ours, base = figures["ours_us"], figures["baseline_us"]
        met = ours <= PER_CALL_US and ours <= BASELINE_RATIO * base and figures["first_call_ms"] <= FIRST_CALL_MS
        rows.append(
            Row(
                f"client-{pattern.name}",
                f"{pattern.code} ({pattern.client}) on {name}, {figures['calls']:,} calls",
                ours,
                base,
                "us/call",
                "the same loop over a numpy array of the answers",
                f"<= {PER_CALL_US:g} us and <= {BASELINE_RATIO:g}x; first call <= {FIRST_CALL_MS:g} ms",
                met,
                details=figures,
            )
        )
    return rows


def measure_client_patterns(ctx: Context) -> list[Row]:
    """Suite rows: every pattern on the run's report."""
    return rows_for(f"the {ctx.main.size} report", measure_report(str(ctx.main.pop), ctx.log))


def preset_report(name: str) -> pathlib.Path:
    """A preset's report with its default knobs, simulated once into the benchmark cache (again when
    the sources that write reports change)."""
    import shutil

    from simulator.presets import resolve_knobs, run_preset

    knobs = resolve_knobs(name, {})
    key = source_hash(REPORT_SOURCES, {"preset": name, "knobs": knobs, "timestamp": TIMESTAMP})
    directory = CACHE / f"client-{name}-{key}"
    path = directory / "profile.pop"
    if not path.exists():
        for stale in CACHE.glob(f"client-{name}-*"):
            shutil.rmtree(stale, ignore_errors=True)
        directory.mkdir(parents=True, exist_ok=True)
        run_preset(name, knobs, str(directory), timestamp=TIMESTAMP, functional=False)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", nargs="+", default=[*PRESET_REPORTS, "large"], help="presets and suite sizes")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON to OUT")
    args = parser.parse_args(argv)
    every: dict[str, dict] = {}
    for name in args.reports:
        path = preset_report(name) if name in PRESET_REPORTS else corpus_report(name).pop
        print(f"{name}: {path}")
        every[name] = measure_report(str(path))
    print()
    print(f"{'pattern':24} " + " ".join(f"{n:>22}" for n in every) + f" {'growth':>8}")
    for pattern in PATTERNS:
        cells, calls, seconds = [], [], []
        for figures in every.values():
            f = figures.get(pattern.name)
            if f is None:
                cells.append(f"{'-':>22}")
                continue
            cells.append(f"{f['ours_us']:7.2f} us {f['ours_us'] / f['baseline_us']:6.1f}x {f['first_call_ms']:4.0f}ms")
            calls.append(f["calls"])
            seconds.append(f["seconds"])
        growth = growth_exponent(calls, seconds) if len(set(calls)) > 1 else float("nan")
        print(f"{pattern.name:24} " + " ".join(cells) + f" {growth:8.2f}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(every, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
