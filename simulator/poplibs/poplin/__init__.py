"""poplin: matrix multiplication and convolution on the accumulating matrix product units.

The package follows poplibs' own split of lib/poplin:

- planner: the grid, method and orientation of a matrix product, by poplin's cost model
  (ConvPlan.cpp, ConvModel.cpp);
- matmul: matrix products, the fully-connected weight transpose and matMulAcc (MatMul.cpp);
- conv_planner: a convolution's parameters, grid and transforms (ConvPlan.cpp, ConvUtil.cpp);
- conv: a convolution's layouts and vertices (Convolution.cpp).

The public names below are the ones the presets and poplibs-style client code use. Names with a
leading underscore are this simulator's internals, shared between the package's modules and with
the fully-connected passes (simulator/poplibs/fullyconnected.py, poplibs' FullyConnected.cpp).
"""

from __future__ import annotations

from ...graph import Graph
from .conv import convolution, createInput, createWeights, weightsTransposeChansFlipXY
from .conv_planner import SMALL_CHANNELS, ConvolutionPlan, ConvParams, conv_transforms, convolution_plan
from .matmul import (
    MAX_BROADCAST_DESTS,
    build_product,
    createMatMulInputLHS,
    createMatMulInputRHS,
    matMul,
    matmul_pass,
    matMulAcc,
    plan_product,
    transposeMatMulRHS,
)
from .planner import (
    AVAILABLE_MEMORY_PROPORTION,
    CONV_WEIGHT_UPDATE,
    DEFAULT_METHODS,
    ESTIMATE_KEYS,
    MATMUL_METHODS,
    MATMUL_PASSES,
    PARTITION_KEYS,
    MatMulPlan,
    estimate_matmul_cycles,
    input_elements,
    memory_bound,
    partial_chans_candidates,
    partials_type,
    plan_matmul,
    plan_methods,
    plan_partition,
    plan_swap,
    product_vertex_cycles,
    reduce_stage_depths,
    relaxed_bound,
    transform_cost,
)

__all__ = [
    "AVAILABLE_MEMORY_PROPORTION",
    "CONV_WEIGHT_UPDATE",
    "DEFAULT_METHODS",
    "ESTIMATE_KEYS",
    "MATMUL_METHODS",
    "MATMUL_PASSES",
    "MAX_BROADCAST_DESTS",
    "PARTITION_KEYS",
    "SMALL_CHANNELS",
    "ConvParams",
    "ConvolutionPlan",
    "MatMulPlan",
    "addCodelets",
    "build_product",
    "conv_transforms",
    "convolution",
    "convolution_plan",
    "createInput",
    "createMatMulInputLHS",
    "createMatMulInputRHS",
    "createWeights",
    "estimate_matmul_cycles",
    "input_elements",
    "matMul",
    "matMulAcc",
    "matmul_pass",
    "memory_bound",
    "partial_chans_candidates",
    "partials_type",
    "plan_matmul",
    "plan_methods",
    "plan_partition",
    "plan_product",
    "plan_swap",
    "product_vertex_cycles",
    "reduce_stage_depths",
    "relaxed_bound",
    "transform_cost",
    "transposeMatMulRHS",
    "weightsTransposeChansFlipXY",
]


def addCodelets(graph: Graph) -> None:
    """Make the poplin vertices available to the graph."""
    graph.addCodelets("poplin")
