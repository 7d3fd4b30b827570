"""AMP input groups narrower than a conv unit's weights: poplin offers a matrix product every
inChansPerGroup from weightsPerConvUnit down whose group loads whole data-path words, and pads the
1x1 kernel to fill the conv units' weights (lib/poplin/ConvVertexType.cpp,
getConvVertexAMPCandidates; ConvModel.cpp, addTileLevelTransformEstimates)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from simulator_run import codelet_graph, run_product

from simulator import FLOAT, HALF
from simulator.codelets import poplin as amp
from simulator.poplibs import fullyconnected as fc
from simulator.poplibs import poplin
from simulator.poplibs.poplin import planner
from simulator.target import architecture


@pytest.mark.parametrize(
    "arch, dtype, groups",
    [("ipu2", HALF, (16, 8, 4)), ("ipu2", FLOAT, (8, 4, 2)), ("ipu1", HALF, (16, 8, 4)), ("ipu1", FLOAT, (8, 4, 2))],
)
def test_input_groups_divide_the_weights_and_load_whole_words(arch, dtype, groups):
    # 64-bit data path: half groups of fewer than 4 and float groups of 1 are not aligned loads
    assert planner.in_chans_candidates(architecture(arch), dtype) == groups


def test_a_product_of_two_input_channels_takes_groups_of_two(monkeypatch):
    g = codelet_graph(tiles=32)
    narrow = poplin.plan_product(g, 5000, 2, 16, FLOAT)
    assert (narrow.method, narrow.k_grain, narrow.swapped) == ("AMP", 2, False)
    # 8 float weights a conv unit over groups of 2: the kernel padded to 4 rows
    assert planner.amp_weight_height(g.target.arch, FLOAT, FLOAT, narrow.k_grain) == 4
    # a tile's 157 rows x 16 columns: 3 x 2 x 16 kernel zeros and 3 x 157 x 2 input zeros, floats
    # exchanged at 4 bytes a cycle (one column split: no super-tile rate), one cycle each
    assert (narrow.mb, narrow.nb, narrow.kb) == (157, 16, 2)
    assert narrow.estimate["padding"] == 96 + 942
    # with whole groups only, its input channels would be padded from 2 to 8, at a higher estimate
    monkeypatch.setattr(
        planner, "in_chans_candidates", lambda arch, in_type: (amp.weights_per_conv_unit(in_type.name),)
    )
    planner._best_grid.cache_clear()
    whole = poplin.plan_product(g, 5000, 2, 16, FLOAT)
    planner._best_grid.cache_clear()
    assert whole.k_grain == 8
    assert narrow.estimate["total"] < whole.estimate["total"]


def test_a_product_on_narrow_groups_computes_a_times_b(tmp_path):
    g = codelet_graph(tiles=32)
    expected, got, _ = run_product(g, (5000, 2, 16), None, tmp_path, seed=11)
    assert np.allclose(got, expected, atol=1e-4)
    vertices = {b.vtype.name for cs in g.state.compute_sets for b in cs.batches}
    assert "poplin::ConvPartialnx1<float,float,true,false>" in vertices


def test_only_groups_that_round_k_up_to_the_weights_write_the_output_type():
    # a half product's AMP vertices write half outputs, not float partials, only when k rounds up
    # to a conv unit's 16 weights in their groups (getConvVertexAMPCandidates:
    # roundUp(inputChannelsPerConvGroup, inChansPerGroup) == weightsPerConvUnit)
    g = codelet_graph(tiles=32)
    plan = poplin.plan_product(g, 5000, 16, 64, HALF)
    assert plan.vertex_out_type() == HALF
    assert dataclasses.replace(plan, k=4, k_grain=4).vertex_out_type() == FLOAT
    assert dataclasses.replace(plan, k=4, k_grain=16).vertex_out_type() == HALF
    assert dataclasses.replace(plan, k=12, k_grain=8).vertex_out_type() == HALF
    # the planner's estimate follows the same rule: 100 x 64 outputs exchanged as half (2 bytes)
    # on groups of 16, as float partials (4 bytes) on groups of 4, at 4 bytes a cycle
    one = np.ones(2, dtype=np.int64)
    costs = planner._pass_costs(
        g.target.arch,
        4,
        100 * one,
        64 * one,
        4 * one,
        one,
        0 * one,
        0 * one,
        HALF,
        FLOAT,
        HALF,
        pm=one,
        pn=one,
        k_grain=np.array([16, 4]),
    )
    assert costs["reduceExchange"].tolist() == [3200, 6400]
    assert costs["total"][1] > costs["total"][0] + 3200  # and the float partials are cast


def test_joint_plans_weigh_forward_input_groups_of_a_multiple_of_the_conv_units():
    # a joint plan's forward input groups become its weight update's output channels, so they are a
    # multiple of the conv units (getConvVertexAMPCandidates with isJointPlan): on Mk2 half with
    # float partials, 8 units, groups of 16 and of 8, each with output groups of 8 or 16; 4 is left out
    cands = fc._joint_candidates(architecture("ipu2"), 4, 1000, HALF, FLOAT)
    amp_groups = [(c.icpg, c.ocpg) for c in cands if c.methods == ("AMP",) * 3]
    assert amp_groups == [(16, 8), (16, 16), (8, 8), (8, 16)]
    # Mk1 float, 4 units a tile: groups of 8 and of 4; Mk2 float, a joint forward pass on 8 of the
    # tile's 16 units (8 weights a unit): one group
    cands = fc._joint_candidates(architecture("ipu1"), 4, 1000, FLOAT, FLOAT)
    assert [(c.icpg, c.ocpg) for c in cands] == [(8, 4), (8, 8), (4, 4), (4, 8)]
    cands = fc._joint_candidates(architecture("ipu2"), 4, 1000, FLOAT, FLOAT)
    assert [(c.icpg, c.ocpg) for c in cands] == [(8, 8)]
