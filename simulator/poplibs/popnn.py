"""popnn: non-linearities and their gradients, losses and accuracy."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import codelets as lib
from ..errors import GraphError
from ..graph import Graph
from ..programs import Execute, Sequence
from ..tensor import Tensor
from ..types import UNSIGNED_INT
from . import popops
from ._util import add_vertices, elementwise_fields, poplibs_op, require_codelets, tile_pieces

_FORWARD: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "RELU": lambda x: np.maximum(x, 0),
    "SIGMOID": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "TANH": np.tanh,
    "GELU": lambda x: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x**3))),
}
_GRADIENT = {  # d out / d in, from the output y (and the input for GELU, approximated from y)
    "RELU": lambda y: (y > 0).astype(np.float64),
    "SIGMOID": lambda y: y * (1 - y),
    "TANH": lambda y: 1 - y * y,
    "GELU": lambda y: np.where(y > 0, 1.0, 0.1),
}


def addCodelets(graph: Graph) -> None:
    """Make the popnn vertices available to the graph."""
    graph.addCodelets("popnn")


def _kind(nonLinearityType) -> str:
    name = str(getattr(nonLinearityType, "name", nonLinearityType)).upper()
    if name not in _FORWARD:
        raise GraphError(f"unknown non-linearity {nonLinearityType!r}; expected one of {', '.join(_FORWARD)}")
    return name


@poplibs_op("NonLinearity")
def nonLinearityInPlace(
    graph: Graph, nonLinearityType, t: Tensor, prog: Sequence, debugPrefix: str = "nonLinearity"
) -> None:
    """Apply a non-linearity to `t` in place (popnn::nonLinearityInPlace)."""
    require_codelets(graph, "popnn")
    kind = _kind(nonLinearityType)
    cs = graph.addComputeSet(f"{debugPrefix}/Nonlinearity")
    vertex_tiles, (data_f,) = elementwise_fields(graph, t)
    add_vertices(graph, cs, lib.non_linearity(kind, t.dtype), vertex_tiles, {"data": data_f})
    fn = _FORWARD[kind]
    graph.state.compute_sets[cs.id].functional.append(lambda data: data.write(t, fn(data.read(t).astype(np.float64))))
    prog.add(Execute(cs))


@poplibs_op("NonLinearity")
def nonLinearity(
    graph: Graph, nonLinearityType, t: Tensor, prog: Sequence, debugPrefix: str = "nonLinearity"
) -> Tensor:
    """A non-linearity applied to a copy of `t` (popnn::nonLinearity)."""
    from ..programs import Copy

    out = graph.clone(t, f"{debugPrefix}/out")
    prog.add(Copy(t, out))
    nonLinearityInPlace(graph, nonLinearityType, out, prog, debugPrefix)
    return out


@poplibs_op("NonLinearityGrad")
def nonLinearityInputGradient(
    graph: Graph,
    nonLinearityType,
    out: Tensor,
    outGradient: Tensor,
    prog: Sequence,
    debugPrefix: str = "nonLinearityGrad",
) -> Tensor:
    """The gradient at the non-linearity's input from its output and output gradient."""
    require_codelets(graph, "popnn")
    kind = _kind(nonLinearityType)
    in_grad = graph.clone(outGradient, f"{debugPrefix}/inGrad")
    cs = graph.addComputeSet(f"{debugPrefix}/NonLinearityGrad")
    vertex_tiles, (in_grad_f, out_grad_f, out_f) = elementwise_fields(graph, in_grad, outGradient, out)
    add_vertices(
        graph,
        cs,
        lib.non_linearity(kind, out.dtype, grad=True),
        vertex_tiles,
        {"outGrad": out_grad_f, "out": out_f, "inGrad": in_grad_f},
    )
    fn = _GRADIENT[kind]
    graph.state.compute_sets[cs.id].functional.append(
        lambda data: data.write(in_grad, data.read(outGradient) * fn(data.read(out).astype(np.float64)))
    )
    prog.add(Execute(cs))
    return in_grad


@poplibs_op("Loss")
def calcLoss(
    graph: Graph, probs: Tensor, expected: Tensor, lossType: str, prog: Sequence, debugPrefix: str = "loss"
) -> tuple[Tensor, Tensor]:
    """Loss deltas (same shape as `probs`) and the scalar loss; lossType SUM_SQUARED or CROSS_ENTROPY."""
    require_codelets(graph, "popnn")
    kind = str(lossType).upper()
    if kind not in ("SUM_SQUARED", "CROSS_ENTROPY"):
        raise GraphError(f"unknown loss type {lossType!r}; expected SUM_SQUARED or CROSS_ENTROPY")
    if probs.shape != expected.shape:
        raise GraphError(
            f"calcLoss needs probabilities and expected values of one shape, got "
            f"{list(probs.shape)} and {list(expected.shape)}"
        )
    deltas = graph.clone(probs, f"{debugPrefix}/deltas")
    transformed = graph.clone(probs, f"{debugPrefix}/transformed")
    name = "LossSumSquared" if kind == "SUM_SQUARED" else "LossCrossEntropy"
    cs = graph.addComputeSet(f"{debugPrefix}/{name}Transform")
    vertex_tiles, (deltas_f, probs_f, expected_f, transformed_f) = elementwise_fields(
        graph, deltas, probs, expected, transformed
    )
    add_vertices(
        graph,
        cs,
        f"popnn::{name}Transform<{probs.dtype}>",
        vertex_tiles,
        {"probs": probs_f, "expected": expected_f, "deltas": deltas_f, "transformed": transformed_f},
    )

    def run(data):
        p = data.read(probs).astype(np.float64)
        e = data.read(expected).astype(np.float64)
        data.write(deltas, p - e)
        data.write(transformed, 0.5 * (p - e) ** 2 if kind == "SUM_SQUARED" else -e * np.log(np.maximum(p, 1e-30)))

    graph.state.compute_sets[cs.id].functional.append(run)
    prog.add(Execute(cs))
    loss = popops.reduce(
        graph, transformed, list(range(transformed.rank())), prog, "ADD", debugPrefix=f"{debugPrefix}/reduce_loss"
    )
    return deltas, loss


@poplibs_op("Accuracy")
def calcAccuracy(
    graph: Graph, activations: Tensor, labels: Tensor, numCorrect: Tensor, prog: Sequence, debugPrefix: str = "accuracy"
) -> None:
    """Count correct predictions of a [batch, classes] activation tensor into numCorrect."""
    require_codelets(graph, "popnn")
    batch = activations.shape[0]
    max_index = graph.addVariable(UNSIGNED_INT, [batch], f"{debugPrefix}/maxIndex")
    max_value = graph.addVariable(activations.dtype, [batch], f"{debugPrefix}/maxValue")
    tiles, pos, var, start, length = tile_pieces(graph, activations)
    first_tile = int(tiles[0]) if tiles.size else 0
    from .popops import graph_tiles_inverse

    graph.setTileMapping(max_index, graph_tiles_inverse(graph, np.array([first_tile]))[0])
    graph.setTileMapping(max_value, graph_tiles_inverse(graph, np.array([first_tile]))[0])
    cs = graph.addComputeSet(f"{debugPrefix}/ReduceMaxClassGather")
    vertex_tiles, vidx = np.unique(tiles, return_inverse=True)
    n = vertex_tiles.size
    mi, mv = int(max_index.vars[0]), int(max_value.vars[0])
    add_vertices(
        graph,
        cs,
        f"popnn::ReduceMaxClassGather<{activations.dtype},unsigned int>",
        vertex_tiles,
        {
            "activations": (vidx, var, start, length),
            "maxValue": (np.arange(n), np.full(n, mv), np.zeros(n, np.int64), np.full(n, batch)),
            "maxIndex": (np.arange(n), np.full(n, mi), np.zeros(n, np.int64), np.full(n, batch)),
        },
    )
    cs2 = graph.addComputeSet(f"{debugPrefix}/CalcAccuracy")
    lt, lp, lv, ls, ll = tile_pieces(graph, labels)
    cv = numCorrect
    add_vertices(
        graph,
        cs2,
        "popnn::CalcAccuracy<unsigned int>",
        [first_tile],
        {
            "maxPerBatch": (np.zeros(1, np.int64), [mi], [0], [batch]),
            "expected": (np.zeros(lv.size, np.int64), lv, ls, ll),
            "numCorrect": (np.zeros(cv.vars.size, np.int64), cv.vars, cv.starts, cv.lengths),
        },
    )

    def gather(data):
        a = data.read(activations).reshape(batch, -1)
        data.write(max_index, a.argmax(axis=1))
        data.write(max_value, a.max(axis=1))

    def count(data):
        correct = int((data.read(max_index).reshape(-1) == data.read(labels).reshape(-1)).sum())
        data.write(numCorrect, data.read(numCorrect).reshape(-1) + correct)

    graph.state.compute_sets[cs.id].functional.append(gather)
    graph.state.compute_sets[cs2.id].functional.append(count)
    prog.add(Execute(cs))
    prog.add(Execute(cs2))
