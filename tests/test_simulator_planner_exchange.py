"""The planner's exchange estimate, poplin's own (lib/poplin/ConvModel.cpp,
addExchangeCycleEstimates; lib/poplin/ExchangeEstimator.hpp): a tile receives only the share of
its operands not already on it, the inputs at twice the rate where the two tiles of a super tile
share them, and sends its partials on in every plan."""

from __future__ import annotations

import numpy as np

from simulator import FLOAT, HALF, Graph, Target
from simulator.poplibs import fullyconnected, poplin, popops
from simulator.poplibs.poplin.planner import _pass_costs
from simulator.target import architecture

SETUP = 97  # Architecture.exchange_setup_cycles of both targets


def _costs(
    arch_name: str,
    mb: int,
    nb: int,
    kb: int,
    pm: int,
    pn: int,
    *,
    k: int | None = None,
    pk: int = 1,
    method: int = 0,
    conv_kernel: int = 1,
    in_elems: int | None = None,
    standard_order: bool = True,
) -> dict:
    """_pass_costs of one grid of a half product with float partials, as _best_grid calls it."""

    def a(value: int) -> np.ndarray:
        return np.array([value], dtype=np.int64)

    costs = _pass_costs(
        architecture(arch_name),
        kb * pk if k is None else k,
        a(mb),
        a(nb),
        a(kb),
        a(pk),
        a(method),
        a(0),
        HALF,
        FLOAT,
        HALF,
        conv_kernel,
        None if in_elems is None else a(in_elems),
        pm=a(pm),
        pn=a(pn),
        standard_order=standard_order,
    )
    return {key: int(value[0]) for key, value in costs.items()}


def test_a_tile_receives_the_operands_not_already_on_it():
    # a 13 x 37 block of inputs (481 halves) and a 37 x 5 block of weights (185): a tile holds
    # 1/pn of its inputs and 1/pm of its weights already (floor division), and receives the rest,
    # the weights at 4 bytes a cycle and, on Mk2 for an even pn, the inputs at 8
    # pn = 4, pm = 2: 481 - 120 = 361 inputs, ceil(722 / 8) = 91; 185 - 92 = 93 weights,
    # ceil(186 / 4) = 47
    assert _costs("ipu2", 13, 5, 37, pm=2, pn=4)["exchange"] == SETUP + 91 + 47 == 235
    # pn = 3, odd: the two tiles of a super tile do not share inputs: 481 - 160 = 321 inputs at 4
    # bytes a cycle, ceil(642 / 4) = 161
    assert _costs("ipu2", 13, 5, 37, pm=2, pn=3)["exchange"] == SETUP + 161 + 47 == 305
    # pm = 7: 185 - 26 = 159 weights, ceil(318 / 4) = 80
    assert _costs("ipu2", 13, 5, 37, pm=7, pn=4)["exchange"] == SETUP + 91 + 80 == 268
    # a tile alone on its inputs and its weights holds them all: the set-up only
    assert _costs("ipu2", 13, 5, 37, pm=1, pn=1)["exchange"] == SETUP
    # Mk1 tiles cannot receive at twice the rate (supports_super_tile_send_receive): 361 inputs at
    # 4 bytes a cycle, ceil(722 / 4) = 181
    assert not architecture("ipu1").supports_super_tile_send_receive
    assert _costs("ipu1", 13, 5, 37, pm=2, pn=4)["exchange"] == SETUP + 181 + 47 == 325
    # nor can Mk2 tiles outside poplin's standard tile order (the backward and weight-update
    # passes of a joint plan: ExchangeEstimator's constructor)
    assert architecture("ipu2").supports_super_tile_send_receive
    assert _costs("ipu2", 13, 5, 37, pm=2, pn=4, standard_order=False)["exchange"] == SETUP + 181 + 47


def test_a_convolution_tile_receives_its_input_elements_and_its_kernels_weights():
    # 300 input elements and a 3 x 3 kernel of 8 x 16 channels (1,152 weights) on a 5 x 6 grid:
    # 300 - 50 = 250 inputs at 8 bytes a cycle, ceil(500 / 8) = 63; 1,152 - 230 = 922 weights,
    # 1,844 / 4 = 461
    costs = _costs("ipu2", 40, 16, 8, pm=5, pn=6, conv_kernel=9, in_elems=300)
    assert costs["exchange"] == SETUP + 63 + 461 == 621


def test_the_partials_are_sent_on_in_every_plan():
    # poplin counts the first reduction stage's exchange of the tile's partials, in the type the
    # vertex writes, though the input channels are not split (reduceFirstStageExchangeCycles): a
    # 24 x 10 block of float partials (k = 64, more than one conv unit's 16 halves), 4 bytes at 4 a
    # cycle, with no set-up of its own
    assert _costs("ipu2", 24, 10, 64, pm=2, pn=2)["reduceExchange"] == 24 * 10 * 4 // 4 == 240
    assert _costs("ipu1", 24, 10, 64, pm=2, pn=2)["reduceExchange"] == 240
    # a 3 x 5 block: AMP vertices of a 1x1 kernel whose k fits one conv unit write halves,
    # ceil(15 x 2 / 4) = 8; a wider kernel, HMAC vertices (method 1) and one split stage of two
    # write float partials; the outer product (method 2) writes its input type
    assert _costs("ipu2", 3, 5, 16, pm=1, pn=1)["reduceExchange"] == 8
    assert _costs("ipu2", 3, 5, 16, pm=1, pn=1, conv_kernel=9)["reduceExchange"] == 15
    assert _costs("ipu2", 3, 5, 16, pm=1, pn=1, method=1)["reduceExchange"] == 15
    assert _costs("ipu2", 3, 5, 1, pm=1, pn=1, method=2)["reduceExchange"] == 8
    # a k split of 2 is one stage: its set-up and the same partials (getMultiStageReducePlan(2) has
    # no intermediate stage, so partialSumExchangeCycleEstimate adds nothing)
    assert _costs("ipu2", 3, 5, 8, pm=1, pn=1, pk=2)["reduceExchange"] == SETUP + 15


def test_the_joint_plans_other_passes_receive_at_the_plain_rate():
    # [64, 512] x [512, 512] half on 64 Mk2 tiles, planned jointly on an 8 x 8 grid: the weight
    # update ([512, 64] x [64, 512], pm = pn = 8, k unsplit) receives 7/8 of its 64 x 64 block of
    # each operand, 3,584 halves, at 4 bytes a cycle (ceil(7,168 / 4) = 1,792 each), not its
    # inputs at 8 (896), its tiles being out of poplin's standard order (FC_WU); then it sends
    # its 64 x 64 float partials on. The forward pass (pn = 1) holds its inputs and receives 7/8
    # of its weights
    g = Graph(Target("ipu2", tiles_per_ipu=64))
    poplin.addCodelets(g)
    popops.addCodelets(g)
    plan = fullyconnected.plan_fully_connected(g, 64, 512, 512, HALF, mode="joint")
    fwd, wu = plan.fwd, plan.wu
    assert (fwd.pm, fwd.pn, fwd.pk) == (8, 1, 8) and (wu.pm, wu.pn, wu.pk) == (8, 8, 1)
    assert wu.estimate["exchange"] == SETUP + 1792 + 1792 == 3681
    assert wu.estimate["reduceExchange"] == 64 * 64 * 4 // 4
    assert fwd.estimate["exchange"] == SETUP + 1792 == 1889
    # the first stage's 4,096 partials, and the set-up of the one stage of the split of 8
    assert fwd.estimate["reduceExchange"] == 4096 + SETUP
