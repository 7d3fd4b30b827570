"""poplin's serial split of a product's output columns: planned when no grid fits the memory
bound, run as a Repeat loop of dynamic slices (lib/poplin/ConvModel.cpp and Convolution.cpp)."""

from __future__ import annotations

import numpy as np
import pytest
from simulator_run import run_functional

from simulator import HALF, Graph, Sequence, Target
from simulator.codelets.popops import dynamic_slice_1d_cycles
from simulator.compiler.regions import split_by_mapping
from simulator.poplibs import poplin, popops
from simulator.poplibs._util import map_linearly
from simulator.poplibs.poplin import AVAILABLE_MEMORY_PROPORTION
from simulator.types import FLOAT


def test_dynamic_slice_estimate_is_poplibs_formula():
    # getDynamicSlice1dEstimate: supervisor 11 + 14, then per worker 41 + 27 + its share of the
    # region in data-path vectors (4 halves or 2 floats), times 6 workers
    assert dynamic_slice_1d_cycles("half", 600) == 25 + (41 + 27 + 100 // 4) * 6 == 583
    assert dynamic_slice_1d_cycles("float", 600) == 25 + (41 + 27 + 100 // 2) * 6 == 733


def test_planner_splits_the_output_columns_serially_when_no_grid_fits():
    # [512, 256] x [256, 256] half on 16 Mk1 tiles of 64 KB: no grid of the whole product fits
    # 0.6 x 64 KB; eight steps of 32 columns do, on a 4 x 1 x 4 grid
    bound = AVAILABLE_MEMORY_PROPORTION * 65536
    grid, estimate, *_, serial = _best_grid_of("ipu1", 65536, 16, 512, 256, 256, HALF, FLOAT, HALF, (1, 1))
    estimate = dict(estimate)
    assert serial == 8 and grid == (4, 1, 4)
    assert estimate["memory"] == 36864 <= bound
    # a step's exchange as poplin estimates it (ConvModel.cpp, addExchangeCycleEstimates): the
    # tile's 128 x 64 block of A is already on it (pn = 1), and a quarter of its 64 x 32 block of
    # B (pm = 4), so 1,536 halves come in at 4 bytes a cycle; then the tile's 128 x 32 float
    # partials go out, in the one reduction stage of 4
    assert estimate["exchange"] == 97 + (64 * 32 - 64 * 32 // 4) * 2 // 4 == 865
    assert estimate["reduceExchange"] == 97 + 128 * 32 * 4 // 4 == 4193
    # eight times the step's cycles and its two slices: the tile's share of all of B (256 x 256
    # halves over 16 tiles) and its step's outputs (128 x 32 floats over the 4 of the k split),
    # each divided by the 8 steps (addDynamicSliceEstimate)
    step = (
        estimate["compute"]
        + estimate["exchange"]
        + estimate["reduceExchange"]
        + estimate["reduceCompute"]
        + 2 * 101  # the syncs of the convolution and of its one reduction stage
    )
    slices = dynamic_slice_1d_cycles("half", 256 * 256 // 16 // 8) + dynamic_slice_1d_cycles(
        "float", 128 * 32 // 4 // 8
    )
    assert estimate["total"] == 8 * (step + slices) == 182200
    # a prime number of columns has no serial split: the bound is doubled instead
    grid, estimate, *_, serial = _best_grid_of("ipu1", 65536, 16, 512, 256, 251, HALF, FLOAT, HALF, (1, 1))
    assert serial == 1 and dict(estimate)["memory"] > 2 * bound
    # the column split times the serial split is at most the output-channel groups: 16 columns
    # are one group of 16, so they are not split serially however much memory that would save
    *_, method, serial = _best_grid_of("ipu1", 262144, 16, 16384, 64, 16, HALF, FLOAT, HALF, (1, 1))
    assert (method, serial) == ("AMP", 1)


@pytest.mark.parametrize("b_layout", ["planned", "linear"])
def test_a_serially_split_product_computes_a_times_b(tmp_path, b_layout):
    # [1024, 512] x [512, 1024] half on 16 Mk1 tiles: the float partials alone would be 256 KB a
    # tile, past the 157 KB bound, so the 1,024 columns are computed in steps. A B laid out
    # otherwise than for the plan is copied into the steps' layout before the loop, so that each
    # tile slices its columns of B from its own memory (rearrangeIfSplitOverTiles)
    g = Graph(Target("ipu1", tiles_per_ipu=16))
    poplin.addCodelets(g)
    popops.addCodelets(g)
    plan = poplin.plan_product(g, 1024, 512, 1024, HALF)
    assert plan.serial > 1 and 1024 % plan.serial == 0
    A = poplin.createMatMulInputLHS(g, HALF, (1024, 512), (512, 1024), "A")
    if b_layout == "planned":
        B = poplin.createMatMulInputRHS(g, HALF, (1024, 512), (512, 1024), "B")
    else:
        B = g.addVariable(HALF, [512, 1024], "B")
        map_linearly(g, B)
    prog = Sequence()
    C = poplin.matMul(g, A, B, prog, "mm")
    names = [cs.name for cs in g.state.compute_sets]
    assert names.count("mm/serialSlice") == 1 and names.count("mm/serialUpdate") == 1
    loops = [p for p in _programs(prog) if type(p).__name__ == "Repeat"]
    assert [p.count for p in loops] == [plan.serial]
    (batch,) = g.state.compute_sets[names.index("mm/serialSlice")].batches
    vertex, var, start, length = batch.fields["baseT"]
    row, tile, _, _ = split_by_mapping(g.state, var, start, length)
    assert np.array_equal(tile, batch.tiles[vertex[row]])
    rng = np.random.default_rng(7)
    a = rng.integers(-2, 3, (1024, 512)).astype(np.float16)
    b = rng.integers(-2, 3, (512, 1024)).astype(np.float16)
    g.createHostWrite("A", A)
    g.createHostWrite("B", B)
    g.createHostRead("C", C)
    out = run_functional(g, prog, tmp_path, {"A": a, "B": b}, ["C"])
    np.testing.assert_array_equal(out["C"].astype(np.float64), a.astype(np.float64) @ b.astype(np.float64))


def _programs(prog):
    stack, seen = [prog], []
    while stack:
        p = stack.pop()
        seen.append(p)
        stack.extend(p.children())
    return seen


def _best_grid_of(*problem):
    """The planner's cheapest grid of a ProductProblem given field by field."""
    from simulator.poplibs.poplin.planner import ProductProblem, _best_grid

    return _best_grid(ProductProblem(*problem))
