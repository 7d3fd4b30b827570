"""poputil: tile-mapping utilities."""

from __future__ import annotations

from ..graph import Graph
from ..tensor import Tensor
from ._util import linear_intervals, map_linearly


def mapTensorLinearly(graph: Graph, t: Tensor, minElementsPerTile: int = 1, grainSize: int = 1) -> None:
    """Spread a tensor evenly over the tiles in chunks of grainSize (poputil::mapTensorLinearly)."""
    map_linearly(graph, t, grain=grainSize, min_per_tile=minElementsPerTile)


__all__ = ["linear_intervals", "mapTensorLinearly"]
