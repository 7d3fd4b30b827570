"""poplin's availableMemoryProportion and partialsType options on the planner and the presets, and
the presets' --report-plan (the benchmark tools' options of the same names)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pva.cli import main as cli_main
from simulator import HALF, Graph, Target
from simulator.errors import GraphError, OptionError
from simulator.poplibs import fullyconnected, planreport, poplin, popops
from simulator.presets import build_preset, resolve_knobs, run_preset
from simulator.types import FLOAT

TS = "2024-01-01T00:00:00Z"
MK2_TILE = 638_976  # bytes of a Mk2 tile (poplar::Target::getBytesPerTile)

#: A product that fits 64 Mk2 tiles in one pass at poplin's default bound, and needs serial steps
#: at smaller ones.
GEMM = {"m": 256, "k": 512, "n": 1024, "tiles-per-ipu": 64}


def _graph(tiles: int = 64) -> Graph:
    g = Graph(Target("ipu2", tiles_per_ipu=tiles))
    poplin.addCodelets(g)
    popops.addCodelets(g)
    return g


def test_memory_bound_is_poplins_proportion_of_the_tile():
    # a whole number of bytes, as poplin holds it
    assert poplin.memory_bound(None, MK2_TILE) == 383_385 == math.floor(0.6 * MK2_TILE)
    # Poplar's option flags are strings; a number is taken as well
    assert poplin.memory_bound({"availableMemoryProportion": "0.25"}, MK2_TILE) == 159_744
    assert poplin.memory_bound({"availableMemoryProportion": 1}, MK2_TILE) == MK2_TILE
    # 0: no bound, the fewest cycles (ConvPlan.cpp, createPlan without a memory bound)
    assert math.isinf(poplin.memory_bound({"availableMemoryProportion": 0}, MK2_TILE))
    for bad in (-0.1, "lots", True, float("nan"), None, "1_0", 1e308):
        with pytest.raises(GraphError, match="availableMemoryProportion must be a number of at least 0"):
            poplin.memory_bound({"availableMemoryProportion": bad}, MK2_TILE)


def test_partials_type_is_half_or_float():
    assert poplin.partials_type(None) == FLOAT
    assert poplin.partials_type({"partialsType": "half"}) == HALF
    assert poplin.partials_type({"partialsType": HALF}) == HALF
    with pytest.raises(GraphError, match="partialsType must be half or float, got 'int'"):
        poplin.partials_type({"partialsType": "int"})


def test_the_bound_is_relaxed_as_poplin_relaxes_it():
    tile = 1000
    # a candidate fits: the bound stands
    assert poplin.relaxed_bound([500, 900], 600, tile) == 600
    # none fits: doubled, and doubled again while none fits below twice the tile's memory
    assert poplin.relaxed_bound([1100, 1500], 600, tile) == 1200
    assert poplin.relaxed_bound([2300], 600, tile) == 2400
    # none fits even then: no bound, the fewest cycles
    assert math.isinf(poplin.relaxed_bound([2500], 600, tile))
    # a bound already past twice the tile is still doubled once (the do-while of minimizeMemory)
    assert poplin.relaxed_bound([2500, 4000], 2100, tile) == 4200
    # a proportion so small that the bound is 0 bytes: doubling would never raise it, so no bound
    assert math.isinf(poplin.relaxed_bound([64], 0, tile))
    assert poplin.memory_bound({"availableMemoryProportion": 1e-6}, 638_976) == 0
    with pytest.raises(GraphError, match="availableMemoryProportion must be a number"):
        poplin.memory_bound({"availableMemoryProportion": 10**400}, 638_976)


def test_a_smaller_proportion_plans_within_its_bound():
    g = _graph()
    # the product as given (plan_matmul without a swap, so without transform costs)
    default = poplin.plan_matmul(g, 256, 512, 1024, HALF)
    # all 256 rows on each tile: its 256 x 32 block of B is already on it (pm = 1), and 31/32 of
    # its 256 x 256 block of A come in at 8 bytes a cycle (pn = 32, even: ConvModel.cpp,
    # addExchangeCycleEstimates); the operands and the float partials (256 x 32) take 180,224 bytes
    assert (default.pm, default.pn, default.pk, default.serial) == (1, 32, 2, 1)
    assert default.estimate["memory"] == (256 * 256 + 256 * 32) * 2 + 256 * 32 * 4 == 180_224
    small = poplin.plan_matmul(
        g, 256, 512, 1024, HALF, bound=poplin.memory_bound({"availableMemoryProportion": 0.05}, MK2_TILE)
    )
    # 0.05 of the tile is 31,948 bytes: 16 serial steps of 64 columns on a 2 x 4 x 8 grid, a
    # step's operands (128 x 64 and 64 x 16 halves) and partials (128 x 16 floats) 26,624 bytes
    assert (small.pm, small.pn, small.pk, small.serial) == (2, 4, 8, 16)
    assert small.estimate["memory"] == (128 * 64 + 64 * 16) * 2 + 128 * 16 * 4 == 26_624 <= 0.05 * MK2_TILE
    assert small.estimate["total"] > default.estimate["total"]
    # no bound: the fastest plan, here the default's
    unbounded = poplin.plan_matmul(g, 256, 512, 1024, HALF, bound=math.inf)
    assert (unbounded.pm, unbounded.pn, unbounded.pk, unbounded.estimate["total"]) == (
        1,
        32,
        2,
        default.estimate["total"],
    )
    # poplin plans the lone product swapped as well (NONE_MATMUL) and keeps that: C^T's 1,024 rows
    # over 4 and A's 256 rows, its output channels, over 8, the same blocks and bytes a tile
    chosen = poplin.plan_product(g, 256, 512, 1024, HALF, {"availableMemoryProportion": 0.05})
    assert chosen.swapped and (chosen.pm, chosen.pn, chosen.pk, chosen.serial) == (8, 1, 8, 16)
    assert chosen.estimate["memory"] == small.estimate["memory"]
    assert poplin.plan_product(g, 256, 512, 1024, HALF).estimate["memory"] == 180_224


def test_half_partials_plan_on_all_sixteen_conv_units():
    # Mk2 has 16 conv units for half partials and 8 for float (getFp16InFp16OutConvUnitsPerTile)
    g = _graph()
    half = poplin.plan_product(g, 256, 512, 1024, HALF, {"partialsType": "half"})
    assert half.partials_type == HALF and half.n_grain == 16
    assert half.estimate["compute"] < poplin.plan_product(g, 256, 512, 1024, HALF).estimate["compute"]


def test_half_partials_of_a_float_product_are_float():
    # poplin widens partials narrower than the output (ConvValidation.cpp, validateLayerParams):
    # there is no float-input, half-partials AMP vertex
    assert poplin.partials_type({"partialsType": "half"}, FLOAT) == FLOAT
    assert poplin.partials_type({"partialsType": "half"}, HALF) == HALF
    g = _graph()
    plan = poplin.plan_product(g, 256, 512, 1024, FLOAT, {"partialsType": "half"})
    assert plan.partials_type == FLOAT
    assert plan.estimate == poplin.plan_product(g, 256, 512, 1024, FLOAT).estimate


def test_fully_connected_plans_take_the_proportion():
    # [64, 512] x [512, 512] half on 64 tiles: the joint plan needs 32,768 temporary bytes a tile
    g = _graph()
    default = fullyconnected.plan_fully_connected(g, 64, 512, 512, HALF)
    assert default.joint and default.joint_cost == (70_299, 32_768)
    # within 0.05 of the tile (31,948 bytes) only separate plans of two serial steps fit, and
    # poplin keeps the plans that fit (separatePlanHasLowerCost)
    tight = fullyconnected.plan_fully_connected(g, 64, 512, 512, HALF, options={"availableMemoryProportion": 0.05})
    assert not tight.joint and tight.separate_cost == (107_082, 27_648)
    assert [p.serial for p in (tight.fwd, tight.bwd, tight.wu)] == [2, 2, 2]
    # within 0.02 (12,779 bytes) nothing fits, and the joint plan needs no more than the separate
    # ones, so it is kept
    assert fullyconnected.plan_fully_connected(g, 64, 512, 512, HALF, options={"availableMemoryProportion": 0.02}).joint


def test_gemm_preset_proportion_trades_cycles_for_memory(tmp_path):
    figures = {}
    for proportion in (0.6, 0.05):
        directory = tmp_path / str(proportion)
        engine = run_preset(
            "gemm", {**GEMM, "available-memory-proportion": proportion}, str(directory), timestamp=TS, functional=False
        )
        figures[proportion] = (int(engine.clock.max()), _peak_not_always_live(directory))
    (fast_cycles, fast_peak), (slow_cycles, slow_peak) = figures[0.6], figures[0.05]
    assert slow_cycles > 1.5 * fast_cycles
    assert slow_peak < fast_peak / 2


def _peak_not_always_live(directory) -> int:
    import pva

    report = pva.openReport(str(directory / "profile.pop"))
    return int(report.compilation.memoryArray("notAlwaysLiveBytes").max())


def test_report_plan_prints_the_plan_that_runs(tmp_path, capsys):
    args = ["simulate", "--preset", "gemm", *(f"--{k}={v}" for k, v in GEMM.items())]
    assert cli_main([*args, "--report-plan", "-o", str(tmp_path / "a"), "--timestamp", TS, "--no-functional"]) == 0
    out = capsys.readouterr().out.splitlines()
    # planned swapped, as poplin plans a lone product when that is no dearer
    assert out[0] == "Plan of op(A) x op(B): [1024, 512] x [512, 256] half, the operands swapped"
    assert out[1] == "  method AMP, inChansPerGroup 16, partialChansPerGroup 16; types: partials float, result half"
    assert out[2] == "  transform: swapOperands true"
    assert out[3] == (
        "  partition: batchSplit 4, outChanSplit.parallel 8, outChanSplit.serial 1, inChanSplit.parallel 2, on 64 tiles"
    )
    assert out[4] == "  a tile's block: 256 rows x 32 output channels x 256 input channels"
    # before the run, as the tools print plans: the engine's output gets them first
    import io

    stream = io.StringIO()
    run_preset("gemm", {**GEMM, "report-plan": "1"}, str(tmp_path / "c"), output=stream, functional=False)
    assert stream.getvalue().splitlines() == out[:6]
    assert out[5].endswith("; 180,224 temporary bytes per tile (bound 383,385)")
    # the AMP vertices run on the 64 tiles the plan names
    import pva

    report = pva.openReport(str(tmp_path / "a" / "profile.pop"))
    run = report.execution.runs[0]
    cycles = run.cyclesByTileArray()
    convolve = [i for i, s in enumerate(run.steps) if s.program.name.endswith("Convolve")]
    assert convolve and all(np.count_nonzero(cycles[i]) == 64 for i in convolve)
    # given a value, as fully_connected_layer and single_conv_layer take it
    assert cli_main([*args, "--report-plan", "0", "-o", str(tmp_path / "b"), "--no-functional"]) == 0
    assert "Plan of" not in capsys.readouterr().out


def test_report_plan_of_a_serial_split_names_the_steps():
    built = build_preset("gemm", {**GEMM, "available-memory-proportion": 0.05, "report-plan": "true"})
    assert built.printed[3].startswith("  partition: batchSplit 8, outChanSplit.parallel 1, outChanSplit.serial 16")
    assert " cycles in 16 serial steps, each with partial sums " in built.printed[5]
    assert built.printed[5].endswith("; 26,624 temporary bytes per tile (bound 31,948)")
    unbounded = build_preset("gemm", {**GEMM, "available-memory-proportion": 0, "report-plan": "yes"})
    assert unbounded.printed[5].endswith("temporary bytes per tile (no bound)")


def test_fc_report_plan_names_the_joint_plan_and_its_swapped_passes():
    knobs = {"batch-size": 4, "input-size": 1000, "output-size": 1000, "dtype": "float", "report-plan": "1"}
    lines = build_preset("fc", knobs).printed
    assert lines[0] == "Fully-connected layer [4, 1000] x [1000, 1000]: joint plan"
    assert lines[1].startswith("  joint plan ") and lines[2].startswith("  separate plans ")
    titles = [line for line in lines if not line.startswith(" ")]
    assert titles[1:] == [
        "Forward plan (TRAINING_FWD): [1000, 1000] x [1000, 4] float, the operands swapped",
        "Backward plan (TRAINING_BWD): [1000, 1000] x [1000, 4] float, the operands swapped",
        "Weight-update plan (TRAINING_WU): [1000, 4] x [4, 1000] float, the operands swapped",
    ]
    assert lines.count("  transform: swapOperands true") == 3
    # only the passes that run, as fully_connected_layer prints them
    fwd = build_preset("fc", {**knobs, "single-phase": "fwd"}).printed
    assert [line for line in fwd if not line.startswith(" ")][1:] == [titles[1]]


def test_fc_matmul_options_reach_every_pass():
    knobs = {"batch-size": 16, "input-size": 64, "output-size": 48, "tiles-per-ipu": 16, "report-plan": "true"}
    options = '{"partialsType": "half", "availableMemoryProportion": "0.3"}'
    lines = build_preset("fc", {**knobs, "matmul-options": options, "plan": "separate"}).printed
    methods = [line for line in lines if line.startswith("  method ")]
    assert len(methods) == 3 and all("partials half" in line for line in methods)
    bounds = [line for line in lines if line.startswith("  estimate: ")]
    assert all(line.endswith("(bound 191,692)") for line in bounds)


def test_gemm_plan_constraints_swap_the_operands_as_poplin_would():
    swapped = '{"0": {"transform": {"swapOperands": true}}}'
    lines = build_preset("gemm", {**GEMM, "plan-constraints": swapped, "report-plan": "1"}).printed
    assert lines[0] == "Plan of op(A) x op(B): [1024, 512] x [512, 256] half, the operands swapped"
    assert lines[2] == "  transform: swapOperands true"
    hmac = build_preset("gemm", {**GEMM, "plan-constraints": '{"method": "HMAC"}', "report-plan": "1"}).printed
    assert hmac[1].startswith("  method HMAC, inChansPerGroup 2, partialChansPerGroup 1;")


@pytest.mark.parametrize(
    "preset, knobs, message",
    [
        ("fc", {"matmul-options": '{"foo": 1}'}, "knob --matmul-options: the simulator does not model option 'foo'"),
        ("fc", {"matmul-options": "[0.3]"}, "knob --matmul-options expects a JSON object"),
        ("fc", {"matmul-options": "{"}, "knob --matmul-options expects a JSON object"),
        (
            "conv",
            {"convolution-options": '{"partialsType": "int"}'},
            "knob --convolution-options: partialsType must be half or float",
        ),
        (
            "gemm",
            {"available-memory-proportion": -1},
            "knob --available-memory-proportion: availableMemoryProportion must be a number of at least 0",
        ),
        ("gemm", {"partials-type": "double"}, "knob --partials-type of preset 'gemm' must be one of half, float"),
        ("conv", {"report-plan": "maybe"}, "knob --report-plan of preset 'conv' expects true or false"),
        (
            "gemm",
            {"plan-constraints": '{"inChansPerGroup": 8}'},
            "knob --plan-constraints: the simulator does not model 'inChansPerGroup'; it honours method, "
            "0.transform.swapOperands",
        ),
    ],
)
def test_bad_plan_options_are_refused(preset, knobs, message):
    with pytest.raises(OptionError, match=message):
        build_preset(preset, resolve_knobs(preset, knobs))


def test_cli_refuses_bad_options_with_status_2(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli_main(["simulate", "--preset", "fc", "--matmul-options", '{"foo": 1}', "-o", str(out)]) == 2
    assert "the simulator does not model option 'foo'" in capsys.readouterr().err
    assert not out.exists()


def test_conv_report_plan_and_options():
    knobs = {"batch": 2, "in-chans": 16, "out-chans": 16, "height": 8, "width": 8, "tiles-per-ipu": 16}
    built = build_preset(
        "conv", {**knobs, "convolution-options": '{"availableMemoryProportion": 0}', "report-plan": "true"}
    )
    titles = [line for line in built.printed if not line.startswith(" ")]
    assert [t.split(":")[0] for t in titles] == ["Forward plan", "Backward plan", "Weight-update plan"]
    assert titles[0] == "Forward plan: batch 2, field 8x8, kernel 3x3, 16 -> 16 channels, half"
    transforms = [line for line in built.printed if line.startswith("  transform: ")]
    assert transforms[0] == "  transform: swapOperands false, expandDims {}, flattened false"
    # a tile's block counts the channels there are, not whole groups: the weight update of 8
    # output channels, planned in groups of 8, holds 8 of them
    small = {**knobs, "in-chans": 8, "out-chans": 8, "height": 6, "width": 6, "report-plan": "1"}
    lines = build_preset("conv", small).printed
    assert lines[-2] == "  a tile's block: 24 rows x 8 output channels x 16 input channels"
    # and a transformed convolution is titled as planned
    assert lines[0] == (
        "Forward plan, planned after its transforms as batch 1, field 72x1, kernel 1x1, 72 -> 8 channels, half"
    )
    assert lines[2] == "  transform: swapOperands false, expandDims {1,0}, flattened true"
    assert all(line.endswith("(no bound)") for line in built.printed if line.startswith("  estimate: "))
    # the reported forward plan is the one convolution() builds
    g = build_preset("conv", knobs).graph
    params = poplin.ConvParams(2, 16, 16, (8, 8), (3, 3), (1, 1), (1, 1), HALF)
    plan = poplin.convolution_plan(g, params)
    assert planreport.convolution_plan_lines("Forward plan", plan, poplin.memory_bound(None, g.target.bytesPerTile))[
        3
    ].startswith(f"  partition: batch and output rows split {plan.grid.pm}, outChanSplit.parallel {plan.grid.pn}")
