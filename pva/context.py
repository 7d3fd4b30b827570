"""What the objects of one compilation report share: its query layer, tile and variable lookups, and
the parts built by the modules that import this one (programs, variables, debug information).

pva.compilation builds one `ReportContext` per report and installs the parts; pva.programs,
pva.variables, pva.liveness and pva.debug read only this, never the CompilationReport.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from formats.lazy_import import lazy_module

from .lists_and_enums import PvaList, refuse_pickle
from .liveness_index import LivenessIndex
from .model_errors import NoSuchObjectError
from .vectors import VectorCache

if TYPE_CHECKING:
    import numpy as np

    from formats.pop.reader import ProfileReader
else:
    np = lazy_module("numpy")


class ReportContext:
    """The shared state of one compilation report (built by pva.compilation.CompilationReport)."""

    def __init__(
        self, reader: ProfileReader, report: Any, target: Any, tile_type: type[Any], ipu_type: type[Any]
    ) -> None:
        self.reader = reader
        self.report = report
        self._target = target
        self._tile_type = tile_type
        self._ipu_type = ipu_type
        self._parts: dict[str, Callable[[], Any]] = {}
        self.vectors = VectorCache()  # per-tile vectors read recently
        self.variable: Callable[[int], Any] = self._not_installed
        self.sized_variables: Callable[[Iterable], PvaList] = self._not_installed
        self.category: Callable[[int], Any] = self._not_installed

    __reduce_ex__ = refuse_pickle

    def install(
        self,
        *,
        program_table: Callable[[], Any],
        compute_sets: Callable[[], list],
        lowered_variables: Callable[[], Any],
        debug_info: Callable[[], Any],
        variable: Callable[[int], Any],
        sized_variables: Callable[[Iterable], PvaList],
        category: Callable[[int], Any],
    ) -> None:
        """How each part is built (once, on first use) and how variables are looked up."""
        self._parts = {
            "program_table": program_table,
            "compute_sets": compute_sets,
            "lowered_variables": lowered_variables,
            "debug_info": debug_info,
        }
        self.variable, self.sized_variables, self.category = variable, sized_variables, category

    @staticmethod
    def _not_installed(*args: Any) -> Any:
        raise RuntimeError("the report context's parts are not installed")

    @functools.cached_property
    def program_table(self) -> Any:
        """Every program of the report (pva.programs.ProgramTable)."""
        return self._parts["program_table"]()

    @functools.cached_property
    def compute_sets(self) -> list:
        """Every compute set by id (pva.compilation.ComputeSet)."""
        return self._parts["compute_sets"]()

    @functools.cached_property
    def lowered_variables(self) -> Any:
        """The report's pva.variables.LoweredVariables."""
        return self._parts["lowered_variables"]()

    @functools.cached_property
    def debug_info(self) -> Any:
        """The report's pva.debug.DebugInfo, or None when it was opened without debug.cbor."""
        return self._parts["debug_info"]()

    def debug_contexts_of(self, kind: str, obj: object) -> PvaList:
        """The debug contexts of a program, compute set or variable; empty without debug information."""
        info = self.debug_info
        if info is None or obj is None:
            return PvaList()
        return info.contexts_of(kind, obj)

    # -- tiles and IPUs --

    def replica_tile(self, tile: Any) -> int:
        """A tile id (or Tile) checked against the target and mapped into one replica."""
        limits = self._tile_limits
        if type(tile) is int and 0 <= tile < limits[0]:  # the common case, first
            return tile % limits[1]
        if isinstance(tile, self._tile_type):
            tile = tile.tileId
        if isinstance(tile, bool) or not isinstance(tile, (int, np.integer)):
            raise TypeError(f"expected a tile id or a Tile, not {type(tile).__name__}")
        tile = int(tile)
        target = self.target
        if not 0 <= tile < target.numTiles:
            raise NoSuchObjectError(
                f"{self.reader.path!r}: no tile {tile}; the target has tiles 0..{target.numTiles - 1}",
                self.reader.path,
            )
        return tile % target.tilesPerReplica

    def replica_ipu(self, ipu: Any) -> int:
        """An IPU id (or IPU) checked against the target and mapped into one replica."""
        if isinstance(ipu, self._ipu_type):
            ipu = ipu.id
        if isinstance(ipu, bool) or not isinstance(ipu, (int, np.integer)):
            raise TypeError(f"expected an IPU id or an IPU, not {type(ipu).__name__}")
        ipu = int(ipu)
        target = self.target
        if not 0 <= ipu < target.numIPUs:
            raise NoSuchObjectError(
                f"{self.reader.path!r}: no IPU {ipu}; the target has IPUs 0..{target.numIPUs - 1}",
                self.reader.path,
            )
        return ipu % target.ipusPerReplica

    @functools.cached_property
    def target(self) -> Any:
        """The report's pva.compilation.Target."""
        return self._target()

    @functools.cached_property
    def _tile_limits(self) -> tuple[Any, Any]:
        return self.target.numTiles, self.target.tilesPerReplica

    @functools.cached_property
    def liveness_index(self) -> LivenessIndex:
        """Not-always-live bytes of every step by tile and by variable (pva.liveness_index)."""
        return LivenessIndex(self.reader, self.reader.liveness_step_count(), lambda rows: self.sized_variables(rows))

    @functools.cached_property
    def liveness_tiles(self) -> frozenset[int]:
        """The tiles with per-tile liveness."""
        return frozenset(self.reader.liveness_tiles())

    # -- artificial variables (lowered pieces grouped by name, with negative ids) --

    @functools.cached_property
    def artificial_names(self) -> list[str]:
        """The names of the artificial variables; id -1 - index."""
        return self.reader.artificial_variable_names()

    @functools.cached_property
    def artificial_ids(self) -> dict[str, int]:
        """The id of each artificial variable, by name."""
        return {name: -1 - index for index, name in enumerate(self.artificial_names)}

    def artificial_variable_name(self, var_id: int) -> str:
        """The name of an artificial variable (a negative id)."""
        names = self.artificial_names
        index = -1 - var_id
        if not 0 <= index < len(names):
            raise NoSuchObjectError(f"{self.reader.path!r}: no variable {var_id}", self.reader.path)
        return names[index]
