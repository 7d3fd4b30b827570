"""Plans as poplibs' benchmark tools print them with ``--report-plan``: the method, channel groups,
transforms and partition poplin's planner chose for a product or convolution, and its estimate.

The names are poplin's (lib/poplin/ConvPlan.cpp, the Plan, Partition and ConvTransform fields); the
estimate is this simulator's port of the planner's cost model, in tile cycles and temporary bytes
per tile, beside the memory bound the plan was chosen within.
"""

from __future__ import annotations

import math

from .fullyconnected import FullyConnectedPlan
from .poplin import ConvolutionPlan, MatMulPlan

#: The parts of a plan's estimate, in the order they are printed, with their names.
_PARTS = (
    ("compute", "partial sums"),
    ("exchange", "exchange"),
    ("reduceExchange", "reduction exchange"),
    ("reduceCompute", "reduction"),
    ("padding", "padding zeros"),
    ("transform", "rearranging copies"),
)


def _bound(bound: float, memory: int) -> str:
    if math.isinf(bound):
        return "no bound"
    if memory > bound:
        # no plan fits: poplin relaxes the bound (poplin.relaxed_bound)
        return f"over the bound of {int(bound):,}, which no plan fits, so the planner relaxed it"
    return f"bound {int(bound):,}"


def _method(plan: MatMulPlan) -> str:
    units = f" on {plan.conv_units} conv units" if plan.method == "AMP" and plan.conv_units else ""
    return (
        f"  method {plan.method}{units}, inChansPerGroup {plan.k_grain}, partialChansPerGroup {plan.n_grain}; "
        f"types: partials {plan.partials_type.name}, result {plan.out_type.name}"
    )


def _estimate(plan: MatMulPlan, bound: float) -> str:
    e = plan.estimate
    parts = [(label, e.get(key, 0)) for key, label in _PARTS]
    memory = f"{e['memory']:,} temporary bytes per tile ({_bound(bound, e['memory'])})"
    if plan.serial > 1:
        # the parts are one step's; the total adds each step's slices and updates (_with_serial_splits)
        shown = ", ".join(f"{label} {v:,}" for label, v in parts if v)
        return f"  estimate: {e['total']:,} cycles in {plan.serial} serial steps, each with {shown}; {memory}"
    rest = e["total"] - sum(v for _, v in parts)
    if rest:
        parts.append(("syncs and casts", rest))
    shown = " + ".join(f"{label} {v:,}" for label, v in parts if v)
    return f"  estimate: {e['total']:,} cycles ({shown}); {memory}"


def _partition(rows: str, plan: MatMulPlan) -> str:
    return (
        f"  partition: {rows} {plan.pm}, outChanSplit.parallel {plan.pn}, outChanSplit.serial {plan.serial}, "
        f"inChanSplit.parallel {plan.pk}, on {len(set(plan.tiles.tolist())):,} tiles"
    )


def matmul_plan_lines(title: str, plan: MatMulPlan, bound: float, swapped: bool | None = None) -> list[str]:
    """A matrix product's plan: `title`, then its method, transform, partition and estimate; the
    shape is the product planned, C^T = B^T A^T when `swapped` (by default, the plan's own)."""
    swapped = plan.swapped if swapped is None else swapped
    shape = f"[{plan.m}, {plan.k}] x [{plan.k}, {plan.n}]"
    step = plan.step()
    return [
        f"{title}: {shape} {plan.in_type.name}" + (", the operands swapped" if swapped else ""),
        _method(plan),
        f"  transform: swapOperands {str(swapped).lower()}",
        _partition("batchSplit", plan),
        f"  a tile's block: {min(step.mb, step.m)} rows x {min(step.nb, step.n)} output channels x "
        f"{min(plan.kb, plan.k)} input channels",
        _estimate(plan, bound),
    ]


def fully_connected_plan_lines(plan: FullyConnectedPlan, bound: float, passes: str = "all") -> list[str]:
    """The plans of a fully-connected layer, joint or separate, for its `passes` (fwd, bwd, wu or
    all, as --single-phase)."""
    kind = "joint plan" if plan.joint else "separate plans"
    lines = [
        f"Fully-connected layer [{plan.batch}, {plan.input_size}] x [{plan.input_size}, {plan.output_size}]: {kind}"
    ]
    if plan.joint_cost is not None:
        lines.append(f"  joint plan {plan.joint_cost[0]:,} cycles, {plan.joint_cost[1]:,} temporary bytes per tile")
    lines.append(
        f"  separate plans {plan.separate_cost[0]:,} cycles, {plan.separate_cost[1]:,} temporary bytes per tile"
    )
    for phase, title, name, p in (
        ("fwd", "Forward plan", "TRAINING_FWD", plan.fwd),
        ("bwd", "Backward plan", "TRAINING_BWD", plan.bwd),
        ("wu", "Weight-update plan", "TRAINING_WU", plan.wu),
    ):
        if passes not in ("all", phase):
            continue
        # a joint plan's passes swap their operands (ConvPlan.cpp, getSwapOperandCandidates); its
        # plans hold the swapped products
        lines += matmul_plan_lines(f"{title} ({name})", p, bound, plan.joint or p.swapped)
    return lines


def convolution_plan_lines(title: str, plan: ConvolutionPlan, bound: float) -> list[str]:
    """A convolution's plan: `title`, then its transforms, method, partition and estimate."""
    g = plan.grid
    p, mm = g.params, g.plan
    dims = "{" + ",".join(map(str, plan.expand_dims)) + "}"
    transformed = plan.swap_operands or plan.expand_dims or plan.flattened
    return [
        f"{title}{', planned after its transforms as' if transformed else ':'} batch {p.batch}, "
        f"field {p.field[0]}x{p.field[1]}, kernel {p.kernel[0]}x{p.kernel[1]}, "
        f"{p.in_chans} -> {p.out_chans} channels, {p.dtype.name}",
        _method(mm),
        f"  transform: swapOperands {str(plan.swap_operands).lower()}, expandDims {dims}, "
        f"flattened {str(plan.flattened).lower()}",
        _partition("batch and output rows split", mm),
        f"  a tile's block: {g.rows_per} output rows x {g.o_per} output channels x {g.c_per} input channels",
        _estimate(mm, bound) + ("; the transforms' copies besides" if plan.swap_operands or plan.expand_dims else ""),
    ]
