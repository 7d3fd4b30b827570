"""Scripts written the way real pva clients write them, run unmodified in a fresh interpreter."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest
from test_compilation_builder import COMPUTE_SETS, NUM_IPUS, TILES, TILES_PER_IPU, model  # noqa: F401  (fixture)

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run(script: str, *args: str) -> str:
    """Run a client script with `python -c` and return its standard output."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_tutorial_basics(model):
    out = run(
        """
        import sys
        import pva

        report = pva.openReport(sys.argv[1])
        print("Number of compute sets: ", report.compilation.graph.numComputeSets)
        print("Number of tiles on target: ", report.compilation.target.numTiles)
        print("Version of Poplar used: ", report.poplarVersion.string)
    """,
        model.path,
    )
    assert out.splitlines() == [
        "Number of compute sets:  3",
        "Number of tiles on target:  16",
        "Version of Poplar used:  3.2.0 (8d5b1c2e3f)",
    ]


def test_total_memory(model):
    out = run(
        """
        import sys
        import pva

        report = pva.openReport(sys.argv[1])
        total_memory = sum(tile.memory.total.includingGaps for tile in report.compilation.tiles)
        print("Total memory use (bytes): ", total_memory)
    """,
        model.path,
    )
    expected = 2 * sum(row[2] for row in model.memory_rows)
    assert out.strip() == f"Total memory use (bytes):  {expected}"


def test_peak_liveness(model):
    out = run(
        """
        import sys
        import pva

        r = pva.openReport(sys.argv[1])
        always_live = sum(tile.memory.alwaysLiveBytes for tile in r.compilation.tiles)
        not_always_live = max(step.notAlwaysLiveMemory.bytes for step in r.compilation.livenessProgramSteps)
        print(always_live + not_always_live)
        print(sum(v.size for v in r.compilation.alwaysLiveVariables))
    """,
        model.path,
    )
    always = sum(row[9] for row in model.memory_rows)
    peak = max(model.live_bytes(s) for s in range(13))
    assert out.split() == [str(2 * always + peak), str(always)]


def test_visitor_prints_on_tile_executes_with_several_vertex_types(model):
    out = run(
        """
        import sys
        import pva

        class TestVisitor(pva.ProgramVisitor):
            def __init__(self):
                super(TestVisitor, self).__init__()

            def visitOnTileExecute(self, onTileExecute):
                if len(onTileExecute.computeset.vertices) > 1:
                    print(onTileExecute.name)

        report = pva.openReport(sys.argv[1])
        v = TestVisitor()
        for prog in report.compilation.programs:
            prog.accept(v)
    """,
        model.path,
    )
    assert out.splitlines() == ["layer/fwd"]


def test_glob_matching_compute_set_names(model):
    out = run(
        """
        import fnmatch
        import sys
        from pva import openReport

        report = openReport(sys.argv[1])
        names = [cs.name for cs in report.compilation.computeSets]
        for pattern in sys.argv[2:]:
            print(pattern, sorted(n for n in names if fnmatch.fnmatch(n, pattern)))
    """,
        model.path,
        "layer/*",
        "*zero",
        "nothing*",
    )
    assert out.splitlines() == ["layer/* ['layer/bwd', 'layer/fwd']", "*zero ['init/zero']", "nothing* []"]
    assert COMPUTE_SETS == ["init/zero", "layer/fwd", "layer/bwd"]


def test_per_ipu_code_memory(model):
    out = run(
        """
        import sys
        import pva

        report = pva.openReport(sys.argv[1])
        for ipu_id in range(len(report.compilation.ipus)):
            vertex_code = 0
            exchange_code = 0
            for tile in report.compilation.ipus[ipu_id].tiles:
                vertex_code += tile.memory.category.vertexCode.total
                exchange_code += tile.memory.category.internalExchangeCode.total
            print(ipu_id, vertex_code, exchange_code)
    """,
        model.path,
    )
    lines = []
    for ipu in range(NUM_IPUS):
        tiles = [t % TILES for t in range(ipu * TILES_PER_IPU, (ipu + 1) * TILES_PER_IPU)]
        vertex = sum(model.category_total("vertexCode", t) for t in tiles)
        exchange = sum(model.category_total("internalExchangeCode", t) for t in tiles)
        lines.append(f"{ipu} {vertex} {exchange}")
    assert out.splitlines() == lines


def test_popliner_style_liveness_check(model):
    out = run(
        """
        import sys
        import pva

        report = pva.openReport(sys.argv[1], sys.argv[2])
        tile = 5
        best, best_step, best_vars = 0, 0, []
        for i, step in enumerate(report.compilation.livenessProgramSteps):
            mem = step.notAlwaysLiveMemoryForTile(tile).bytes
            if best < mem:
                best, best_step = mem, i
                best_vars = step.notAlwaysLiveMemoryForTile(tile).variables
        best += report.compilation.tiles[tile].memory.alwaysLiveBytes
        acc = sum(var.size for var in best_vars)
        key = "alwaysLiveVariablesForTile"
        if hasattr(report.compilation, key) and callable(getattr(report.compilation, key)):
            acc += sum(var.size for var in report.compilation.alwaysLiveVariablesForTile(tile))
        assert acc == best
        print(best_step, best)
    """,
        model.path,
        model.debug_path,
    )
    peaks = [model.live_bytes(s, [5]) for s in range(13)]
    step = peaks.index(max(peaks))
    assert out.split() == [str(step), str(max(peaks) + sum(model.always_live(5).values()))]


@pytest.mark.parametrize("spelling", ["pva.Program.Type.OnTileExecute", "pva.pva_core.Program.Type.OnTileExecute"])
def test_type_comparisons_both_spellings(model, spelling):
    out = run(
        f"""
        import sys
        import pva
        import pva.pva_core

        report = pva.openReport(sys.argv[1])
        print(sum(1 for p in report.compilation.programs if p.type == {spelling}))
    """,
        model.path,
    )
    assert out.strip() == "3"
