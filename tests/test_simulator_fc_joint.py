"""poplin's joint plan of the fully-connected passes: the plan, its choice and its lowering."""

from __future__ import annotations

import numpy as np
import pytest
from simulator_invariants import check_report

from formats.pop.reader import ProfileReader
from pva.cli import main
from simulator import FLOAT, HALF, Engine, Graph, Sequence, Target
from simulator.errors import GraphError
from simulator.poplibs import fullyconnected as fc
from simulator.poplibs import poplin, popops
from simulator.presets import build_preset

TS = "2024-01-01T00:00:00Z"


def _graph(tiles: int = 16, arch: str = "ipu2") -> Graph:
    g = Graph(Target(arch, tiles_per_ipu=tiles))
    poplin.addCodelets(g)
    popops.addCodelets(g)
    return g


def test_joint_plan_estimate_is_the_sum_of_the_three_passes():
    g = _graph(tiles=1472)
    plan = fc.plan_fully_connected(g, 4, 1000, 1000, HALF, mode="joint")
    assert plan.joint
    totals = [p.estimate["total"] for p in (plan.fwd, plan.bwd, plan.wu)]
    assert plan.joint_cost is not None
    assert plan.joint_cost[0] == sum(totals) == plan.cycles
    assert plan.joint_cost[1] == max(p.estimate["memory"] for p in (plan.fwd, plan.bwd, plan.wu))
    # one partition: the batch unsplit, the forward pass's O and I splits are the backward pass's
    # I and O splits and the weight update's O and I splits, with its k (the batch) unsplit
    fwd, bwd, wu = plan.fwd, plan.bwd, plan.wu
    assert (fwd.m, fwd.k, fwd.n, fwd.pn) == (1000, 1000, 4, 1)
    assert (bwd.m, bwd.k, bwd.n) == (1000, 1000, 4)
    assert (bwd.pm, bwd.pn, bwd.pk) == (fwd.pk, 1, fwd.pm)
    assert (wu.m, wu.k, wu.n) == (1000, 4, 1000)
    assert (wu.pm, wu.pn, wu.pk) == (fwd.pm, fwd.pk, 1)
    # the three passes' cells of one (O block, I block) share a tile
    for i_o in range(fwd.pm):
        for k_i in range(fwd.pk):
            tile = fwd.tiles[i_o * fwd.pk + k_i]
            assert bwd.tiles[k_i * fwd.pm + i_o] == tile
            assert wu.tiles[i_o * fwd.pk + k_i] == tile
    # the weight update's AMP vertices take the forward pass's output channel groups as input channels
    assert (wu.k_grain, wu.n_grain) == (fwd.n_grain, fwd.k_grain)


def test_poplin_rule_keeps_the_cheaper_plans():
    bound = 100.0
    # separate plans fit: they win when faster, or when the joint plan does not fit
    assert fc.separate_plan_has_lower_cost((90, 50), (100, 50), bound)
    assert not fc.separate_plan_has_lower_cost((100, 50), (100, 50), bound)  # a tie keeps the joint plan
    assert fc.separate_plan_has_lower_cost((500, 50), (100, 150), bound)
    # separate plans over the bound: they win only when the joint plan is over it too and bigger
    assert not fc.separate_plan_has_lower_cost((10, 150), (100, 50), bound)
    assert fc.separate_plan_has_lower_cost((10, 150), (100, 160), bound)
    assert not fc.separate_plan_has_lower_cost((10, 170), (100, 160), bound)
    assert fc.separate_plan_has_lower_cost((10, 50), None, bound)


def test_separate_plans_are_chosen_when_cheaper():
    # a large batch: the joint plan never splits the batch, so its passes run on few tiles; poplin's
    # rule picks the separate plans, whose summed estimate is lower
    g = _graph(tiles=1472)
    plan = fc.plan_fully_connected(g, 1440, 100, 200, HALF)
    assert not plan.joint
    assert plan.joint_cost is not None and plan.separate_cost[0] < plan.joint_cost[0]
    assert plan.cycles == plan.separate_cost[0]
    # each separate plan is the pass planned alone, as poplin.plan_product plans it
    alone = poplin.plan_product(g, 1440, 100, 200, HALF, {"fullyConnectedPass": "TRAINING_FWD"})
    assert (plan.fwd.m, plan.fwd.k, plan.fwd.n, plan.fwd.swapped) == (alone.m, alone.k, alone.n, alone.swapped)
    # and the joint plan where it is cheaper
    chosen = fc.plan_fully_connected(g, 4, 1000, 1000, FLOAT)
    assert chosen.joint and chosen.cycles == chosen.joint_cost[0] < chosen.separate_cost[0]


def test_joint_plan_charges_each_pass_its_rearranging_copies():
    # poplin costs each pass of a joint plan with its transforms (ConvModel.cpp, addEstimates:
    # addTransformCycleEstimate with isJointPlan): 1,000 half input channels in groups of 16 are
    # padded, so the forward pass rearranges its operands; the weight update always rearranges its
    # input; planned jointly, the backward pass's input and the weight update's output are not
    g = _graph(tiles=1472)
    plan = fc.plan_fully_connected(g, 4, 1000, 1000, HALF, mode="joint")
    fwd, bwd, wu = plan.fwd, plan.bwd, plan.wu
    # output groups of 16: the weight update's 4 input channels then round up to a conv unit's 16
    # weights, so it writes half outputs, uncast (getConvVertexAMPCandidates: roundUp)
    assert (fwd.k_grain, fwd.n_grain, fwd.pm, fwd.pk) == (16, 16, 21, 63)
    assert wu.vertex_out_type() == HALF
    # 1,323 tiles: each pass copies its padded operands (the field of 1,008 rows, 1,008 input
    # channels) and its output of 16 padded rows, and the weight update its input as well: bytes per
    # tile exchanged at 4 bytes a cycle and copied at 2 bytes a cycle, scaled by 5/4
    assert [p.estimate["transform"] for p in (fwd, bwd, wu)] == [1392, 1392, 1389]
    assert plan.cycles == plan.joint_cost[0] == sum(p.estimate["total"] for p in (fwd, bwd, wu))
    arch = g.target.arch
    # the joint rules against a pass planned alone, on channels that need no padding
    alone_bwd, joint_bwd = (
        int(poplin.transform_cost(arch, True, 512, 512, 16, 16, 8, 256, HALF, HALF, "TRAINING_BWD", j)[0])
        for j in (False, True)
    )
    assert alone_bwd > 0 and joint_bwd == 0
    alone_wu, joint_wu = (
        int(poplin.transform_cost(arch, True, 512, 16, 512, 8, 16, 256, HALF, HALF, "TRAINING_WU", j)[0])
        for j in (False, True)
    )
    assert alone_wu > joint_wu > 0  # the input is rearranged either way, the output only alone


@pytest.mark.parametrize("arch", ["ipu1", "ipu2"])
def test_poplins_rule_plans_float_layers_of_up_to_8_rows_jointly(arch):
    # poplibs' published figures of fully_connected_layer 1,000 x 1,000 in float show one plan for a
    # batch of 1, 4 and 8 (the same total memory, 11.59-11.61 MB on Mk2), as a joint plan, which
    # never splits the batch, would; with the transforms charged, poplin's rule picks the joint
    # plan for those and the separate plans for 16 rows and for half layers of several rows, whose
    # 1,000 input channels a joint plan on AMP must pad to groups of 16 (one row: see below)
    # (on Mk1 a single row plans HMAC vertices and an outer product: see below)
    g = _graph(tiles={"ipu1": 1216, "ipu2": 1472}[arch], arch=arch)
    for batch in (1, 4, 8) if arch == "ipu2" else (4, 8):
        plan = fc.plan_fully_connected(g, batch, 1000, 1000, FLOAT)
        assert plan.joint and plan.fwd.method == "AMP", batch
    for batch in (4, 8, 16):
        assert not fc.plan_fully_connected(g, batch, 1000, 1000, HALF).joint, batch
    assert not fc.plan_fully_connected(g, 16, 1000, 1000, FLOAT).joint


def test_joint_plan_amp_vertices_follow_poplin_candidates():
    from simulator.target import architecture

    ipu2, ipu1 = architecture("ipu2"), architecture("ipu1")
    # half inputs, float partials on Mk2: 8 conv units, groups of 8 or 16 output channels
    assert fc.amp_vertex_candidates(ipu2, HALF, FLOAT, 16, joint_forward=True) == [(8, 8), (8, 16)]
    # float on Mk2: 16 conv units take 8 input channels, not a multiple of 16, so a joint plan runs
    # its vertices on 8 of them (canUseAmp8), while a lone product may use all 16
    assert fc.amp_vertex_candidates(ipu2, FLOAT, FLOAT, 8, joint_forward=True) == [(8, 8)]
    assert fc.amp_vertex_candidates(ipu2, FLOAT, FLOAT, 8)[0] == (16, 16)
    # the weight update of a half joint plan: input groups of the forward output groups
    assert fc.amp_vertex_candidates(ipu2, HALF, FLOAT, 8, partials=16) == [(8, 16)]
    assert fc.amp_vertex_candidates(ipu1, FLOAT, FLOAT, 8, joint_forward=True) == [(4, 4), (4, 8)]


def test_float_joint_plan_runs_its_vertices_on_half_the_conv_units(tmp_path):
    g = _graph(tiles=1472)
    plan = fc.plan_fully_connected(g, 4, 1000, 1000, FLOAT)
    assert plan.joint
    assert [p.conv_units for p in (plan.fwd, plan.bwd, plan.wu)] == [8, 8, 8]
    with pytest.raises(GraphError, match="plan mode"):
        fc.plan_fully_connected(g, 4, 1000, 1000, HALF, mode="both")
    # the vertices' cycles in the report are the estimate for 8 conv units
    from simulator.codelets import poplin as amp
    from simulator.presets import run_preset

    knobs = {"batch-size": 4, "input-size": 64, "output-size": 48, "tiles-per-ipu": 16, "plan": "joint"}
    run_preset("fc", {**knobs, "dtype": "float", "single-phase": "fwd"}, str(tmp_path), timestamp=TS)
    small = fc.plan_fully_connected(_graph(tiles=16), 4, 64, 48, FLOAT, mode="joint")
    fwd = small.fwd
    assert fwd.conv_units == 8
    r = ProfileReader(tmp_path / "profile.pop")
    (cycles,) = r.query_one(
        "SELECT sum(v.estimated_cycles) FROM compute_set_vertices v JOIN vertex_types t ON t.id = v.vertex_type "
        "WHERE t.name LIKE 'poplin::ConvPartial1x1Out%'"
    )
    arch = Target("ipu2").arch

    def expected(units):
        total = 0
        for im in range(fwd.pm):
            for ik in range(fwd.pk):
                rows = min(fwd.m, (im + 1) * fwd.mb) - im * fwd.mb
                chans = min(fwd.k, (ik + 1) * fwd.kb) - ik * fwd.kb
                total += int(
                    amp.conv_partial_1x1_cycles(
                        arch, "float", "float", rows, -(-chans // 8), 1, out_chans_per_group=8, conv_units=units
                    )
                )
        return total

    assert cycles == expected(8) != expected(16)


@pytest.mark.parametrize(
    ("b", "i", "o", "methods", "arch", "dtype"),
    [
        (4, 64, 48, ("AMP", "AMP", "AMP"), "ipu2", HALF),
        (1, 120, 80, ("HMAC", "HMAC", "OUTER_PRODUCT"), "ipu2", HALF),
        (4, 64, 48, ("AMP", "AMP", "AMP"), "ipu1", FLOAT),
    ],
)
def test_joint_passes_compute_on_data_and_transpose_weights_on_tile(tmp_path, b, i, o, methods, arch, dtype):
    g = _graph(tiles=16, arch=arch)
    plan = fc.plan_fully_connected(g, b, i, o, dtype, mode="joint")
    assert plan.joint
    assert (plan.fwd.method, plan.bwd.method, plan.wu.method) == methods
    rng = np.random.default_rng(5)
    host = np.float16 if dtype == HALF else np.float32
    a = rng.integers(-2, 3, (b, i)).astype(host)
    w = rng.integers(-2, 3, (i, o)).astype(host)
    z = rng.integers(-2, 3, (b, o)).astype(host)
    A = fc.createInput(g, plan, "prevAct")
    W = fc.createWeights(g, plan, "weights")
    Z = fc.createDeltas(g, plan, "zDeltas")
    prog = Sequence()
    C = fc.forward(g, plan, A, W, prog, "Fwd")
    Wt = fc.transposeWeights(g, plan, W, prog, "Bwd/WeightsTranspose")
    D = fc.backward(g, plan, Z, Wt, prog, "Bwd")
    fc.weightUpdate(g, plan, W, -0.5, A, Z, prog, "Wu")
    for name, t in (("A", A), ("W", W), ("Z", Z)):
        g.createHostWrite(name, t)
    for name, t in (("C", C), ("D", D), ("W_out", W)):
        g.createHostRead(name, t)
    with Engine(
        g, [prog], {"autoReport.all": "true", "autoReport.directory": str(tmp_path)}, timestamp=TS, functional=True
    ) as e:
        for name, value in (("A", a), ("W", w), ("Z", z)):
            e.writeTensor(name, value)
        e.run(0)
        out = {name: e.readTensor(name) for name in ("C", "D", "W_out")}
    assert check_report(tmp_path / "profile.pop") == []
    f = np.float32
    assert np.array_equal(out["C"].astype(f), a.astype(f) @ w.astype(f))
    assert np.array_equal(out["D"].astype(f), z.astype(f) @ w.astype(f).T)
    assert np.array_equal(out["W_out"].astype(f), w.astype(f) - 0.5 * (a.astype(f).T @ z.astype(f)))
    r = ProfileReader(tmp_path / "profile.pop")
    names = set(r.column("SELECT name FROM programs"))
    assert "Bwd/WeightsTranspose/Transpose" in names
    # the transposed weights are laid out on the tiles of the blocks they transpose: nothing is
    # exchanged before the transpose, and the forward and backward passes read their weights in place
    assert not any(n.startswith("Bwd/WeightsTranspose") and "Exchange" in n for n in names)
    assert any(n.startswith("Bwd/Conv_1/Convolve") and n.endswith("ExchangePre") for n in names)
    assert not any("Fwd/weightsRearranged" in n or "Fwd/actsRearranged" in n for n in names)
    assert not any("Bwd/actsRearranged" in n or "Bwd/weightsRearranged" in n for n in names)
    # an AMP weight update takes the forward pass's output groups as its input groups: on Mk1 4
    # floats, half a conv unit's weights, so it runs the nx1 vertex over a kernel padded to 2 rows;
    # on Mk2 16 halves, a conv unit's weights, on the 1x1 vertex
    (wu_vertex,) = r.column(
        "SELECT DISTINCT t.name FROM compute_set_vertices v JOIN vertex_types t ON t.id = v.vertex_type "
        "JOIN compute_sets c ON c.compute_set = v.compute_set WHERE c.name = 'Wu/Conv_1/Convolve'"
    )
    if methods[2] == "AMP":
        group, vertex = {"ipu1": (4, "poplin::ConvPartialnx1<"), "ipu2": (16, "poplin::ConvPartial1x1Out<")}[arch]
        assert plan.wu.k_grain == group
        assert wu_vertex.startswith(vertex)


@pytest.mark.parametrize("arch", ["ipu1", "ipu2"])
def test_joint_plan_of_one_row_runs_hmac_and_an_outer_product(arch):
    # fully_connected_layer 1 x 1,000 x 1,000 half: poplin also weighs joint plans on HMAC vertices,
    # whose backward pass stays on HMAC and whose weight update of one row is an outer product
    # (ConvModel.cpp, getFullyConnectedBwdMethod, getFullyConnectedWUMethod); input groups of 40
    # need no padding, so no pass pays for rearranging its operands, and the joint plan is the
    # cheapest: 7,508 planned cycles against 8,647 (Mk2) and 9,978 (Mk1) for the separate plans
    g = _graph(tiles={"ipu1": 1216, "ipu2": 1472}[arch], arch=arch)
    plan = fc.plan_fully_connected(g, 1, 1000, 1000, HALF)
    assert plan.joint
    assert (plan.fwd.method, plan.bwd.method, plan.wu.method) == ("HMAC", "HMAC", "OUTER_PRODUCT")
    assert (plan.fwd.k_grain, plan.fwd.n_grain, plan.fwd.pm, plan.fwd.pk) == (40, 1, 25, 25)
    assert plan.joint_cost is not None and plan.joint_cost[0] == 7508
    assert plan.separate_cost[0] == {"ipu1": 9978, "ipu2": 8647}[arch]
    # poplin's exchange estimate of each pass (ConvModel.cpp, addExchangeCycleEstimates): the
    # forward and backward passes' 40 x 40 block is already on its tile (their pn is 1), so each
    # receives 39 of its 40 halves of the one row (1/25 on the tile): 97 + ceil(78 / 4); the
    # weight update's outer product receives 39 of 40 of each operand (a 25 x 25 grid), and sends
    # its 40 x 40 halves on, unreduced (reduceFirstStageExchangeCycles)
    assert [p.estimate["exchange"] for p in (plan.fwd, plan.bwd, plan.wu)] == [97 + 20, 97 + 20, 97 + 20 + 20]
    assert plan.wu.estimate["reduceExchange"] == 40 * 40 * 2 // 4
    assert all(p.estimate["transform"] == 0 for p in (plan.fwd, plan.bwd))
    # the weight update's outer product takes the forward input groups as its output channels
    assert (plan.wu.k, plan.wu.k_grain, plan.wu.n_grain) == (1, 1, 40)


def test_fc_layer_of_one_row_holds_nothing_in_interleaved_memory(tmp_path):
    # Poplar's largest tile of fully_connected_layer 1 x 1,000 x 1,000 half holds 32,872 bytes on
    # both targets (poplibs' tests/benchmark_results.csv): nothing sits in interleaved memory, so no
    # pass runs AMP vertices, whose partials need it. The joint plan on HMAC and an outer product
    # keeps every tile below the interleaved region, 208 KB up a Mk2 tile
    from simulator.presets import run_preset

    run_preset("fc", {"batch-size": 1, "input-size": 1000, "output-size": 1000}, str(tmp_path), timestamp=TS)
    r = ProfileReader(tmp_path / "profile.pop")
    assert r.column("SELECT name FROM vertex_types WHERE name LIKE '%ConvPartial1x1Out%'") == []
    assert {"poplin::OuterProduct<half>"} <= set(r.column("SELECT name FROM vertex_types"))
    interleaved = r.column("SELECT sum(interleaved) FROM memory_by_tile")
    assert interleaved == [0]
    largest = r.column("SELECT max(total_including_gaps) FROM memory_by_tile")[0]
    assert 20_000 < largest < 48_000


def test_fc_preset_plans_as_poplin_does_by_default():
    knobs = {"batch-size": 4, "input-size": 1000, "output-size": 1000, "dtype": "float"}
    assert build_preset("fc", knobs).notes["jointPlan"] is True  # poplin's rule, the default
    assert build_preset("fc", {**knobs, "plan": "separate"}).notes["jointPlan"] is False
    assert build_preset("fc", {**knobs, "dtype": "half"}).notes["jointPlan"] is False
    assert build_preset("fc", {**knobs, "dtype": "half", "plan": "joint"}).notes["jointPlan"] is True
    large_batch = {"batch-size": 1440, "input-size": 100, "output-size": 200, "plan": "poplin"}
    assert build_preset("fc", large_batch).notes["jointPlan"] is False
    # poplin derives a lone pass's plan from the forward pass's joint plan (ConvPlan.cpp, getPlan)
    lone = build_preset("fc", {**knobs, "single-phase": "bwd"})
    assert lone.notes["jointPlan"] is True
    assert len(lone.programs) == 1


@pytest.mark.parametrize("phase", ["all", "fwd", "bwd", "wu"])
def test_fc_preset_with_a_joint_plan_writes_valid_reports(tmp_path, phase):
    from simulator.presets import run_preset

    knobs = {"batch-size": 4, "input-size": 64, "output-size": 48, "tiles-per-ipu": 16, "plan": "joint"}
    run_preset("fc", {**knobs, "single-phase": phase}, str(tmp_path), timestamp=TS)
    assert check_report(tmp_path / "profile.pop") == []
    assert main(["check", str(tmp_path / "profile.pop")]) == 0
    names = set(ProfileReader(tmp_path / "profile.pop").column("SELECT name FROM programs"))
    assert ("Bwd/WeightsTranspose/Transpose" in names) == (phase in ("all", "bwd"))
    assert ("Wu/AddTo/AddTo" in names) == (phase in ("all", "wu"))


def test_weight_update_on_narrow_input_groups_pads_its_kernel():
    # poplin's AMP pass covers weightsPerConvUnit / inChansPerGroup kernel rows (of the conv units
    # used); above 1 it pads the kernel and runs the nx1 vertex (ConvModel.cpp,
    # addPartialCalcCycleEstimate and canUseConvPartial1x1Vertex: convUnitWeightHeight)
    from simulator.codelets import poplin as amp
    from simulator.poplibs.poplin import planner
    from simulator.target import architecture

    ipu1, ipu2 = architecture("ipu1"), architecture("ipu2")
    assert planner.amp_weight_height(ipu1, FLOAT, FLOAT, 4) == 2  # 8 weights, groups of 4
    assert planner.amp_weight_height(ipu2, HALF, FLOAT, 8) == 2  # 16 weights, groups of 8
    assert planner.amp_weight_height(ipu2, HALF, FLOAT, 16) == 1
    assert planner.amp_weight_height(ipu2, FLOAT, FLOAT, 8, conv_units=8) == 1
    # the nx1 estimate of a filter height of 2: 46 cycles of loads in the innermost loop where a
    # height of 1 has 15, in each of the 2 passes of 8 output channels over Mk1's 4 float units
    one, two = (
        int(
            amp.conv_partial_nx1_cycles(
                ipu1, "float", "float", [[1]], [[10]], 3, 2, zero_elems=10, filter_height=h, out_chans_per_group=8
            )[0]
        )
        for h in (1, 2)
    )
    assert two - one == 3 * 2 * 2 * (46 - 15)  # in groups x out groups x passes x the loads


def test_mk1_float_layer_of_one_row_plans_hmac_as_poplar_does():
    # fully_connected_layer 1 x 1,000 x 1,000 float on Mk1: Poplar's largest tile holds 32,952
    # bytes and the layer takes 34,192 cycles (benchmark_results.csv), so no pass runs AMP. A joint
    # plan on AMP has a weight update on input groups of 4, the forward pass's output groups, and
    # pays for the padded kernel (the nx1 vertex and the zeros it exchanges), so the joint plan on
    # HMAC vertices and an outer product is the cheaper: 11,321 planned cycles
    g = _graph(tiles=1216, arch="ipu1")
    plan = fc.plan_fully_connected(g, 1, 1000, 1000, FLOAT)
    assert plan.joint
    assert (plan.fwd.method, plan.bwd.method, plan.wu.method) == ("HMAC", "HMAC", "OUTER_PRODUCT")
    assert plan.joint_cost is not None and plan.joint_cost[0] == 11321
