"""The memory of a tile: totals by region, by storage category and by vertex type (libpva Memory)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from formats.lazy_import import lazy_module
from formats.pop.categories import CATEGORY_DESCRIPTIONS

from .errors import InconsistentReportError
from .lists_and_enums import PvaList

if TYPE_CHECKING:
    import numpy as np

    from formats.pop.reader import ProfileReader
else:
    np = lazy_module("numpy")

__all__ = [
    "CATEGORIES",
    "Categories",
    "CategoryMemory",
    "Memory",
    "MemoryOverlap",
    "MemoryWithAndWithoutGaps",
    "VertexMemory",
]


class MemoryTables:
    """What the memory handles of one report share: memory_by_tile's columns, the category matrix
    and the vertex types, each read on first use."""

    def __init__(self, reader: ProfileReader, tiles_per_replica: int, vertex_type: Callable[[int], Any]) -> None:
        self.reader = reader
        self.tiles_per_replica = tiles_per_replica
        self.vertex_type = vertex_type
        self.columns = MemoryColumns(reader, tiles_per_replica)

    @functools.cached_property
    def category_names(self) -> list[str]:
        """The names of var_categories, by id."""
        return self.reader.category_names()

    @functools.cached_property
    def category_matrix(self) -> tuple[np.ndarray | None, dict[str, int]]:
        """memory_category_by_tile's rows (None without it) and each category's first column."""
        columns = {name: 6 * index for index, name in enumerate(self.category_names)}
        matrix = self.reader.matrix("memory_category_by_tile")
        if matrix is None:
            return None, columns
        if matrix.num_rows != self.tiles_per_replica:
            raise InconsistentReportError(
                f"{self.reader.path!r}: memory_category_by_tile has {matrix.num_rows} rows; expected one per tile "
                f"({self.tiles_per_replica})",
                self.reader.path,
            )
        return matrix.rows(), columns


class MemoryWithAndWithoutGaps:
    """Memory of a region with and without the gaps left by allocation constraints."""

    __slots__ = ("excludingGaps", "includingGaps")

    def __init__(self, excludingGaps: int, includingGaps: int) -> None:
        self.excludingGaps = excludingGaps
        self.includingGaps = includingGaps

    def __repr__(self) -> str:
        return f"<MemoryWithAndWithoutGaps excluding {self.excludingGaps:,} B, including {self.includingGaps:,} B>"


class MemoryOverlap:
    """Memory of a category and region split into overlapped and non-overlapped bytes."""

    __slots__ = ("nonOverlapped", "overlapped")

    def __init__(self, nonOverlapped: int, overlapped: int) -> None:
        self.nonOverlapped = nonOverlapped
        self.overlapped = overlapped

    @property
    def total(self) -> int:
        """Overlapped plus non-overlapped bytes."""
        return self.nonOverlapped + self.overlapped

    def __repr__(self) -> str:
        return f"<MemoryOverlap {self.nonOverlapped:,} B not overlapped, {self.overlapped:,} B overlapped>"


class CategoryMemory:
    """Memory of one category by region (interleaved, non-interleaved, overflowed)."""

    __slots__ = ("interleaved", "nonInterleaved", "overflowed")

    def __init__(self, interleaved: MemoryOverlap, nonInterleaved: MemoryOverlap, overflowed: MemoryOverlap) -> None:
        self.interleaved = interleaved
        self.nonInterleaved = nonInterleaved
        self.overflowed = overflowed

    @property
    def total(self) -> int:
        """Bytes in all three regions."""
        return self.interleaved.total + self.nonInterleaved.total + self.overflowed.total

    def __repr__(self) -> str:
        return f"<CategoryMemory {self.total:,} B>"


#: Memory categories in libpva order, with their descriptions (seed 004, Categories).
CATEGORIES = CATEGORY_DESCRIPTIONS

_ZERO_OVERLAP = MemoryOverlap(0, 0)
_ZERO_CATEGORY = CategoryMemory(_ZERO_OVERLAP, _ZERO_OVERLAP, _ZERO_OVERLAP)


class Categories:
    """Memory of one tile by storage category (libpva Categories); one property per category."""

    __slots__ = ("_c", "_tile")

    def __init__(self, tables: MemoryTables, tile: int) -> None:
        self._c = tables
        self._tile = tile

    def _category(self, name: str) -> CategoryMemory:
        matrix, columns = self._c.category_matrix
        base = columns.get(name)
        if base is None or matrix is None:
            return _ZERO_CATEGORY
        row = matrix[self._tile]
        v = row[base : base + 6].tolist()
        return CategoryMemory(MemoryOverlap(v[0], v[1]), MemoryOverlap(v[2], v[3]), MemoryOverlap(v[4], v[5]))

    def __repr__(self) -> str:
        matrix, columns = self._c.category_matrix
        if matrix is None:
            return f"<Categories of tile {self._tile}: none recorded>"
        row = matrix[self._tile]
        totals = sorted(((int(row[b : b + 6].sum()), n) for n, b in columns.items()), reverse=True)
        top = ", ".join(f"{n} {v:,} B" for v, n in totals[:3] if v)
        return f"<Categories of tile {self._tile}: {top or 'all 0 B'}>"


def _category_property(name: str, doc: str) -> property:
    return property(lambda self: self._category(name), doc=doc)


for _name, _doc in CATEGORIES.items():
    setattr(Categories, _name, _category_property(_name, _doc))


class VertexMemory:
    """Memory of one vertex type on one tile (libpva VertexMemory)."""

    __slots__ = (
        "_c",
        "_type",
        "codeBytes",
        "copyPtrBytes",
        "descriptorBytes",
        "edgePtrBytes",
        "paddingBytes",
        "vertexDataBytes",
    )

    def __init__(
        self,
        tables: MemoryTables,
        vertex_type: Any,
        code: Any,
        copy_ptr: Any,
        descriptor: Any,
        edge_ptr: Any,
        padding: Any,
        vertex_data: Any,
    ):
        self._c = tables
        self._type = vertex_type
        self.codeBytes = code
        self.copyPtrBytes = copy_ptr
        self.descriptorBytes = descriptor
        self.edgePtrBytes = edge_ptr
        self.paddingBytes = padding
        self.vertexDataBytes = vertex_data

    @property
    def type(self) -> Any:  # pva.compilation.VertexType
        """The vertex type."""
        return self._c.vertex_type(self._type)

    def __repr__(self) -> str:
        return f"<VertexMemory {self.type.name}: code {self.codeBytes:,} B, data {self.vertexDataBytes:,} B>"


class Memory:
    """Memory use of one tile (libpva Memory)."""

    __slots__ = ("_c", "_tile")

    def __init__(self, tables: MemoryTables, tile: int) -> None:
        self._c = tables
        self._tile = tile  # index within one replica

    def _pair(self, excluding: str, including: str) -> MemoryWithAndWithoutGaps:
        columns = self._c.columns
        return MemoryWithAndWithoutGaps(columns[excluding][self._tile], columns[including][self._tile])

    @property
    def total(self) -> MemoryWithAndWithoutGaps:
        """Total memory of the tile."""
        return self._pair("total", "total_including_gaps")

    @property
    def interleaved(self) -> MemoryWithAndWithoutGaps:
        """Memory in the interleaved region."""
        return self._pair("interleaved", "interleaved_including_gaps")

    @property
    def nonInterleaved(self) -> MemoryWithAndWithoutGaps:
        """Memory in the non-interleaved region."""
        return self._pair("non_interleaved", "non_interleaved_including_gaps")

    @property
    def overflowed(self) -> MemoryWithAndWithoutGaps:
        """Memory beyond the tile's capacity."""
        return self._pair("overflowed", "overflowed_including_gaps")

    @property
    def alwaysLiveBytes(self) -> int:
        """Always-live memory of the tile."""
        return self._c.columns["always_live_bytes"][self._tile]

    @property
    def notAlwaysLiveBytes(self) -> int:
        """Peak not-always-live memory of the tile."""
        return self._c.columns["not_always_live_bytes"][self._tile]

    @property
    def category(self) -> Categories:
        """Memory by storage category."""
        return Categories(self._c, self._tile)

    @property
    def vertices(self) -> PvaList:
        """Memory of each vertex type used on this tile."""
        rows = self._c.reader.vertex_memory_of_tile(self._tile)
        return PvaList(VertexMemory(self._c, *row) for row in rows)

    def __repr__(self) -> str:
        columns = self._c.columns
        return (
            f"<Memory of tile {self._tile}: {columns['total_including_gaps'][self._tile]:,} B including gaps, "
            f"{columns['always_live_bytes'][self._tile]:,} B always live>"
        )


MEMORY_FIELDS = {
    "total.includingGaps": "total_including_gaps",
    "total.excludingGaps": "total",
    "interleaved.includingGaps": "interleaved_including_gaps",
    "interleaved.excludingGaps": "interleaved",
    "nonInterleaved.includingGaps": "non_interleaved_including_gaps",
    "nonInterleaved.excludingGaps": "non_interleaved",
    "overflowed.includingGaps": "overflowed_including_gaps",
    "overflowed.excludingGaps": "overflowed",
    "alwaysLiveBytes": "always_live_bytes",
    "notAlwaysLiveBytes": "not_always_live_bytes",
}

#: categoryMemoryArray fields: CategoryMemory attribute paths and their columns in a category's 6.
CATEGORY_FIELDS = {
    "total": (0, 1, 2, 3, 4, 5),
    "interleaved.total": (0, 1),
    "interleaved.nonOverlapped": (0,),
    "interleaved.overlapped": (1,),
    "nonInterleaved.total": (2, 3),
    "nonInterleaved.nonOverlapped": (2,),
    "nonInterleaved.overlapped": (3,),
    "overflowed.total": (4, 5),
    "overflowed.nonOverlapped": (4,),
    "overflowed.overlapped": (5,),
}


class MemoryColumns(dict):
    """Columns of memory_by_tile as lists indexed by tile, each read with one query on first use."""

    def __init__(self, reader: ProfileReader, tiles_per_replica: int) -> None:
        super().__init__()
        self._reader = reader
        self._count = tiles_per_replica

    def __missing__(self, column: str) -> list[int]:
        if column not in _MEMORY_COLUMN_NAMES:
            raise KeyError(column)
        reader = self._reader
        count = self._count
        wanted = [column] + ([_MEMORY_PARTNERS[column]] if column in _MEMORY_PARTNERS else [])
        wanted = [c for c in wanted if c not in self]
        rows_count, low, high = reader.memory_by_tile_extent()
        if rows_count == count and low == 0 and high == count - 1:  # tile is the primary key: dense
            rows = reader.memory_by_tile_columns(wanted)
            for name, column_values in zip(wanted, zip(*rows)):
                self[name] = list(column_values)
        else:
            found = {name: [0] * count for name in wanted}
            for tile, *values in reader.memory_by_tile_columns(wanted, with_tile=True):
                if not isinstance(tile, int) or not 0 <= tile < count:
                    raise InconsistentReportError(
                        f"{reader.path!r}: memory_by_tile has tile {tile!r}; the report has {count} tiles per replica",
                        reader.path,
                    )
                for name, value in zip(wanted, values):
                    found[name][tile] = value
            self.update(found)
        return self[column]


#: Memory columns read together (excluding and including gaps of one region).
_MEMORY_PARTNERS = {}
for _excluding, _including in (
    ("total", "total_including_gaps"),
    ("interleaved", "interleaved_including_gaps"),
    ("non_interleaved", "non_interleaved_including_gaps"),
    ("overflowed", "overflowed_including_gaps"),
    ("always_live_bytes", "not_always_live_bytes"),
):
    _MEMORY_PARTNERS[_excluding] = _including
    _MEMORY_PARTNERS[_including] = _excluding
_MEMORY_COLUMN_NAMES = frozenset(MEMORY_FIELDS.values())
