"""poprand: random-number seeds."""

from __future__ import annotations

import numpy as np

from ..graph import Graph
from ..programs import Execute, Sequence
from ..tensor import Tensor
from ._util import add_vertices, poplibs_op, require_codelets


def addCodelets(graph: Graph) -> None:
    """Make the poprand vertices available to the graph."""
    graph.addCodelets("poprand")


@poplibs_op("SetSeed")
def setSeed(graph: Graph, masterSeed: Tensor, seedModifier: int, prog: Sequence, debugPrefix: str = "setSeed") -> None:
    """Seed the random number generator of every tile from a master seed (poprand::setSeed)."""
    require_codelets(graph, "poprand")
    cs = graph.addComputeSet(f"{debugPrefix}/setMasterSeed")
    tiles = np.asarray(graph.tile(np.arange(graph.num_tiles, dtype=np.int64)), dtype=np.int64)
    n = tiles.size
    seed = masterSeed
    add_vertices(
        graph,
        cs,
        "poprand::SetSeedSupervisor",
        tiles,
        {
            "seed": (
                np.repeat(np.arange(n), seed.vars.size),
                np.tile(seed.vars, n),
                np.tile(seed.starts, n),
                np.tile(seed.lengths, n),
            )
        },
    )
    graph.state.compute_sets[cs.id].functional.append(lambda data: None)
    prog.add(Execute(cs))
