"""Execution report benchmarks: walking steps, and per-tile cycle totals through the columnar call.

Run ``python -m benchmarks.bench_execution`` (``--size tiny`` for a smoke run in seconds). The
report is generated once through formats.pop.writer and cached under ``.bench-cache/``: a
4-IPU Mk2 target (5,888 tiles) with 50,000 steps and per-tile cycles for every step. Every
figure is printed beside a baseline measured in the same run, and as a ratio to it.

Targets: ``sum(s.ipus[0].cycles for s in report.execution.steps)`` at 200,000 steps/s or more;
per-tile totals over all steps at 1 GB/s of cycle data (8 bytes per step and tile) or more.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import sqlite3
import time

import numpy as np

import pva
from formats.pop.schema import read_schema_text
from formats.pop.writer import ProfileWriter

from .timing import best_of, ratio_line

SIZES = {
    "full": {"steps": 50_000, "num_ipus": 4, "tiles_per_ipu": 1472},
    "tiny": {"steps": 400, "num_ipus": 4, "tiles_per_ipu": 1472},
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
    "GlobalExchange",
)


def report_path(size: str) -> pathlib.Path:
    """The cached report of a size, generated if missing."""
    spec = SIZES[size]
    schema = hashlib.sha256((read_schema_text("profile.sql") + read_schema_text("profile_matrices.json")).encode())
    path = CACHE / f"execution-{size}-v{_GENERATOR_VERSION}-{schema.hexdigest()[:10]}.pop"
    if not path.exists():
        CACHE.mkdir(exist_ok=True)
        started = time.perf_counter()
        generate(path, **spec)
        print(f"generated {path.name} in {time.perf_counter() - started:.1f} s ({path.stat().st_size / 1e6:,.0f} MB)")
    return path


def generate(path: os.PathLike[str], *, steps: int, num_ipus: int, tiles_per_ipu: int, seed: int = 1) -> None:
    """Write a report with `steps` steps and per-tile cycles, vectorised with numpy."""
    rng = np.random.default_rng(seed)
    num_tiles = num_ipus * tiles_per_ipu
    with ProfileWriter(path, producer="pva-benchmarks", poplar_version="3.1.0 (bench)") as w:
        w.set_target(
            num_ipus=num_ipus,
            tiles_per_ipu=tiles_per_ipu,
            bytes_per_tile=638976,
            architecture="Ipu2",
            type="Ipu",
            num_worker_contexts=6,
        )
        w.insert("compute_sets", ("compute_set", "name", "num_vertices"), [(0, "layer/fwd", 4), (1, "layer/bwd", 4)])
        programs = [
            (
                i,
                kind,
                f"{kind.lower()}{i}",
                (i % 2) if kind == "OnTileExecute" else None,
                "Host" if kind == "StreamCopyMid" else None,
            )
            for i, kind in enumerate(_STEP_KINDS)
        ]
        w.insert("programs", ("id", "type", "name", "compute_set", "stream_copy_type"), programs)
        w.insert("control_programs", ("position", "program"), [(0, 0)])
        half = steps // 2
        w.insert(
            "runs",
            ("id", "name", "microseconds_start", "microseconds_end", "first_step", "num_steps"),
            [(0, "first", 0, 5_000_000, 0, half), (1, "second", 5_000_000, 9_000_000, half, steps - half)],
        )
        kinds = np.arange(steps) % len(_STEP_KINDS)
        w.insert(
            "steps",
            ("id", "run", "type", "program", "compute_set"),
            ((s, int(s >= half), _STEP_KINDS[k], k, programs[k][3]) for s, k in enumerate(kinds.tolist())),
        )
        matrix = w.matrix("step_cycles_by_tile")
        block_rows = 500
        base = rng.integers(200, 6000, size=steps)
        clock = np.zeros(num_ipus, dtype=np.int64)
        by_ipu = []
        for first in range(0, steps, block_rows):
            count = min(block_rows, steps - first)
            active = rng.random((count, num_tiles)) < 0.85
            noise = rng.integers(0, 64, size=(count, num_tiles), dtype=np.uint16)
            block = np.where(active, base[first : first + count, None].astype(np.uint16) + noise, 0).astype(np.uint16)
            matrix.append(block)
            per_ipu = block.reshape(count, num_ipus, tiles_per_ipu)
            sums = per_ipu.sum(axis=2, dtype=np.int64)
            longest = per_ipu.max(axis=2).astype(np.int64)
            shortest = per_ipu.min(axis=2).astype(np.int64)
            tiles_active = (per_ipu > 0).sum(axis=2)
            for r in range(count):
                s = first + r
                for ipu in range(num_ipus):
                    frm = int(clock[ipu])
                    length = int(longest[r, ipu])
                    by_ipu.append(
                        (
                            s,
                            ipu,
                            int(sums[r, ipu]),
                            int(tiles_active[r, ipu]),
                            0,
                            frm,
                            frm,
                            frm,
                            frm + int(shortest[r, ipu]),
                            frm + length,
                            frm + length // 2,
                            frm,
                            frm,
                            frm,
                            frm + int(shortest[r, ipu]),
                            frm + length,
                            frm + length // 2,
                            length,
                            0.9,
                            0.8,
                            0.95,
                            1024 * ipu,
                            2048 * ipu,
                            0.5,
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
                "thread_balance",
                "tile_balance",
                "active_tile_balance",
                "data_in",
                "data_out",
                "data_balance",
            ),
            by_ipu,
        )


def _line(*args, **kwargs) -> None:
    print(ratio_line(*args, decimals=0, **kwargs))


def bench_step_walk(path: pathlib.Path, repeat: int) -> float:
    """sum(s.ipus[0].cycles for s in report.execution.steps), cold (fresh open) and warm."""

    def cold() -> int:
        with pva.openReport(str(path)) as report:
            return sum(s.ipus[0].cycles for s in report.execution.steps)

    report = pva.openReport(str(path))
    report.execution.steps[0].ipus[0].cycles  # load once for the warm figure

    def warm() -> int:
        return sum(s.ipus[0].cycles for s in report.execution.steps)

    def raw() -> int:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return sum(c for (c,) in conn.execute("SELECT cycles FROM steps_by_ipu WHERE ipu = 0 ORDER BY step_id"))
        finally:
            conn.close()

    steps = len(report.execution.steps)
    t_cold, total_cold = best_of(cold, repeat)
    t_warm, total_warm = best_of(warm, repeat)
    t_raw, total_raw = best_of(raw, repeat)
    report.close()
    assert total_cold == total_warm == total_raw, (total_cold, total_warm, total_raw)
    print(f"sum(s.ipus[0].cycles for s in report.execution.steps) over {steps:,} steps = {total_cold:,}")
    _line(
        "pva, fresh openReport (cold)",
        steps / t_cold,
        "steps/s",
        "sqlite3 SELECT cycles + Python sum",
        steps / t_raw,
        "target >= 200,000 steps/s",
    )
    _line(
        "pva, report already open (warm)",
        steps / t_warm,
        "steps/s",
        "sqlite3 SELECT cycles + Python sum",
        steps / t_raw,
    )
    return steps / t_cold


def bench_tile_totals(path: pathlib.Path, repeat: int) -> float:
    """Per-tile totals over all steps through the columnar call, against numpy.sum in memory."""
    report = pva.openReport(str(path))
    execution = report.execution
    steps = len(execution.steps)
    tiles = report.compilation.target.numTiles
    logical = steps * tiles * 8

    def cold() -> np.ndarray:
        with pva.openReport(str(path)) as fresh:
            return fresh.execution.cyclesByTileTotals()

    t_cold, totals = best_of(cold, repeat)
    t_run, run_totals = best_of(lambda: execution.runs[1].cyclesByTileTotals(), repeat)
    sample_rows = min(steps, 4000)
    in_memory = execution.cyclesByTileArray(stop=sample_rows)
    t_numpy, sample_totals = best_of(lambda: np.sum(in_memory, axis=0, dtype=np.uint64), repeat)
    assert np.array_equal(sample_totals, execution.cyclesByTileTotals(stop=sample_rows))
    assert np.array_equal(totals, execution.cyclesByTileTotals(run=0) + run_totals)
    stored = sum(
        r[0]
        for r in report._reader.query(
            "SELECT sum(length(data)) FROM matrix_chunks WHERE matrix = 'step_cycles_by_tile'"
        )
    )
    report.close()
    numpy_rate = sample_rows * tiles * 8 / t_numpy
    print(
        f"per-tile cycle totals over {steps:,} steps x {tiles:,} tiles "
        f"({logical / 1e9:.2f} GB as uint64, {stored / 1e9:.2f} GB stored); total {int(totals.sum()):,} cycles"
    )
    _line(
        "cyclesByTileTotals(), all steps, cold",
        logical / t_cold / 1e6,
        "MB/s",
        "numpy.sum(axis=0), uint64 in memory",
        numpy_rate / 1e6,
        "target >= 1,000 MB/s",
    )
    run_steps = steps - steps // 2
    _line(
        "run.cyclesByTileTotals(), second run",
        run_steps * tiles * 8 / t_run / 1e6,
        "MB/s",
        "numpy.sum(axis=0), uint64 in memory",
        numpy_rate / 1e6,
    )
    return logical / t_cold / 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    path = report_path(args.size)
    print(f"report: {path} ({path.stat().st_size / 1e6:,.0f} MB)")
    steps_per_s = bench_step_walk(path, args.repeat)
    gb_per_s = bench_tile_totals(path, args.repeat)
    print(
        f"summary: step walk {steps_per_s:,.0f} steps/s (target 200,000); "
        f"per-tile totals {gb_per_s:.2f} GB/s (target 1.0)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
