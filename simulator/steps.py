"""One program step as the engine runs it: what every execution of it costs, tile by tile."""

from __future__ import annotations

import numpy as np

from .compiler.regions import Sparse


class StepTemplate:
    """What every execution of one program costs: per-tile cycles and per-IPU summaries."""

    __slots__ = (
        "type",
        "program",
        "cs",
        "name",
        "sync",
        "cycles",
        "active",
        "recv",
        "sent",
        "stats",
        "dynamic",
        "vertex_rows",
        "overlap_after",
    )

    def __init__(self, type_: str, program: int | None, name: str, cycles: Sparse) -> None:
        self.type = type_
        self.program = program
        self.cs: int | None = None
        self.name = name
        self.sync: str | None = None
        self.cycles = cycles
        self.active: Sparse | None = None
        self.recv: Sparse | None = None
        self.sent: Sparse | None = None
        self.stats: dict[str, np.ndarray] = {}  # set by whoever builds the template
        self.dynamic = False  # True for syncs whose cycles include waiting for other IPUs
        self.vertex_rows: list[tuple[int, int, int]] = []
        self.overlap_after: dict[int, int] = {}
