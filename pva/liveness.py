"""Liveness: program steps with their not-always-live memory (libpva LivenessProgramStep).

The not-always-live variables of a step are the allocated lowered variables that are not
always live and whose equivalence class is live in the step, summed per unlowered variable
(pieces without one are grouped by name under an artificial negative id).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .lists_and_enums import PvaList
from .model_errors import NotPresentError
from .variables import Variable

if TYPE_CHECKING:
    from .context import ReportContext


__all__ = ["LivenessProgramStep", "NotAlwaysLiveMemory"]


class NotAlwaysLiveMemory:
    """Not-always-live memory of a step: total bytes and the variables live in it."""

    __slots__ = ("bytes", "_load", "_variables")

    def __init__(self, size: int, variables: PvaList | Callable[[], PvaList]) -> None:
        self.bytes = size
        self._load: Callable[[], PvaList] | None
        self._variables: PvaList | None
        if callable(variables):
            self._load = variables
            self._variables = None
        else:
            self._load = None
            self._variables = variables

    @property
    def variables(self) -> PvaList:
        """The not-always-live variables of the step, with their sizes, by name."""
        if self._variables is None:
            assert self._load is not None  # set whenever _variables is not
            self._variables = self._load()
            self._load = None
        return PvaList(self._variables)

    def __repr__(self) -> str:
        return f"<NotAlwaysLiveMemory {self.bytes:,} B>"


class LivenessProgramStep:
    """One program step of the depth-first liveness walk (libpva LivenessProgramStep)."""

    __slots__ = ("_c", "_index", "_program", "_bytes")

    def __init__(self, context: ReportContext, index: int, program: int, size: int) -> None:
        self._c = context
        self._index = index
        self._program = program
        self._bytes = size

    @property
    def program(self) -> Any:
        """The program this step is for."""
        return self._c.program_table.get(self._program)

    @property
    def notAlwaysLiveMemory(self) -> NotAlwaysLiveMemory:
        """Not-always-live memory of this step over all tiles (of one replica)."""
        return NotAlwaysLiveMemory(self._bytes, lambda: self._variables(None))

    def notAlwaysLiveMemoryForTile(self, tileId: Any) -> NotAlwaysLiveMemory:
        """Not-always-live memory of this step on one tile (an id or a Tile).

        Only tiles of CompilationReport.tilesWithLivenessInfo have it; other tiles raise
        NotPresentError.
        """
        tile = self._c.replica_tile(tileId)
        if tile not in self._c.liveness_tiles:
            path = self._c.reader.path
            shown = sorted(self._c.liveness_tiles)[:10]
            raise NotPresentError(
                f"{path!r}: tile {tile} has no per-tile liveness information; tiles with it: "
                f"{shown if shown else 'none'}{' ...' if len(self._c.liveness_tiles) > 10 else ''}",
                path,
            )
        index = self._c.liveness_index
        step = self._index
        return NotAlwaysLiveMemory(index.tile_bytes(step, tile), lambda: PvaList(index.tile_variables(step, tile)))

    def notAlwaysLiveMemoryForIpu(self, ipuId: Any) -> NotAlwaysLiveMemory:
        """Not-always-live memory of this step on one IPU (an id or an IPU) of a replica."""
        ipu = self._c.replica_ipu(ipuId)
        index = self._c.liveness_index
        size = index.ipu_bytes(self._index, ipu)
        per_ipu = self._c.target.tilesPerIpu
        lo, hi = ipu * per_ipu, (ipu + 1) * per_ipu
        if size is None:
            size = index.tiles_bytes(self._index, lo, hi)
        return NotAlwaysLiveMemory(size, lambda: self._variables((lo, hi)))

    def notAlwaysLiveBytesForVariable(self, var: Any) -> int:
        """Bytes of a variable (a Variable or its id) that are live, not always live, in this step."""
        var_id = var._id if isinstance(var, Variable) else var
        index = self._c.liveness_index
        if var_id < 0:
            return index.named_bytes(self._index, self._c.artificial_variable_name(var_id))
        return index.variable_bytes(self._index, var_id)

    def _variables(self, tiles: tuple[int, int] | None) -> PvaList:
        return self._c.sized_variables(self._c.reader.not_always_live_variables(self._index, tiles=tiles))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LivenessProgramStep) and other._c is self._c and other._index == self._index

    def __hash__(self) -> int:
        return hash(("LivenessProgramStep", self._index))

    def __repr__(self) -> str:
        program = self._c.program_table.get(self._program)
        name = f" {program.name!r}" if program.name else ""
        return f"<LivenessProgramStep {self._index} {program.type.name}{name}: {self._bytes:,} B not always live>"
