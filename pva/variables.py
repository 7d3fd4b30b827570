"""Variables: unlowered variables, their categories and their lowered pieces on tiles (libpva 2.1)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import InconsistentReportError
from .lists_and_enums import PvaList
from .model_errors import NotPresentError

if TYPE_CHECKING:
    from .context import ReportContext


__all__ = [
    "EquivalenceClass",
    "Interval",
    "LoweredVariable",
    "LoweredVariableBrief",
    "LoweredVariables",
    "Variable",
    "VariableCategory",
    "VariableSize",
]


class VariableCategory:
    """The category of the data a variable holds (Message, Constant, Stack, ...)."""

    __slots__ = ("id", "name", "description")

    def __init__(self, category_id: int, name: str, description: str) -> None:
        self.id = category_id
        self.name = name
        self.description = description

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VariableCategory) and other.id == self.id

    def __hash__(self) -> int:
        return hash(("VariableCategory", self.id))

    def __repr__(self) -> str:
        return f"<VariableCategory {self.id} {self.name!r}>"


class Variable:
    """An unlowered variable; equal (and hashed) by id, so it can key dicts and sets.

    Variables that group lowered pieces without an unlowered variable (``<anon>`` and the
    like) have artificial negative ids.
    """

    __slots__ = ("_c", "_id", "name")

    def __init__(self, context: ReportContext, variable_id: int, name: str) -> None:
        self._c = context
        self._id = variable_id
        self.name = name

    @property
    def debugContexts(self) -> PvaList:
        """The debug contexts of the variable; empty without debug information."""
        return self._c.debug_contexts_of("variable", self._id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Variable) and other._id == self._id

    def __hash__(self) -> int:
        return hash(self._id)

    def __repr__(self) -> str:
        return f"<Variable {self._id} {self.name!r}>"


class VariableSize(Variable):
    """A variable with a size: an always-live or not-always-live variable of a liveness query."""

    __slots__ = ("size",)

    def __init__(self, context: ReportContext, variable_id: int, name: str, size: int) -> None:
        super().__init__(context, variable_id, name)
        self.size = size

    def __repr__(self) -> str:
        return f"<VariableSize {self._id} {self.name!r} {self.size:,} B>"


class Interval:
    """Liveness steps start..end-1 (``steps[start:end]`` in Python terms)."""

    __slots__ = ("start", "end")

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Interval) and (other.start, other.end) == (self.start, self.end)

    def __hash__(self) -> int:
        return hash((self.start, self.end))

    def __repr__(self) -> str:
        return f"<Interval {self.start}..{self.end}>"


class EquivalenceClass:
    """Lowered variables with the same liveness: the liveness steps in which they are live."""

    __slots__ = ("id", "steps")

    def __init__(self, class_id: int, steps: list[Interval]) -> None:
        self.id = class_id
        self.steps = PvaList(steps)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EquivalenceClass) and other.id == self.id

    def __hash__(self) -> int:
        return hash(("EquivalenceClass", self.id))

    def __repr__(self) -> str:
        spans = ", ".join(f"{i.start}..{i.end}" for i in self.steps[:4])
        more = ", ..." if len(self.steps) > 4 else ""
        return f"<EquivalenceClass {self.id} live in steps [{spans}{more}]>"


class LoweredVariableBrief:
    """Brief information on a lowered variable (LoweredVariables.allBriefVars)."""

    __slots__ = ("id", "bytes", "tileId", "equivalenceClass")

    def __init__(self, var_id: int, size: int, tile: int, equivalence_class: EquivalenceClass) -> None:
        self.id = var_id
        self.bytes = size
        self.tileId = tile
        self.equivalenceClass = equivalence_class

    def __repr__(self) -> str:
        return f"<LoweredVariableBrief {self.id} tile {self.tileId} {self.bytes:,} B class {self.equivalenceClass.id}>"


class LoweredVariable:
    """A piece of a variable on one tile (libpva LoweredVariable); equal by id.

    Its row holds formats.pop.query.compilation.LOWERED_VARIABLE_COLUMNS in order.
    """

    __slots__ = ("_lv", "_full", "_brief", "_batch")

    def __init__(self, lowered: LoweredVariables, row: tuple | None, brief: tuple = (), batch: _TileRows | None = None):
        self._lv = lowered
        self._full = row
        self._brief = brief if row is None else (row[0], row[1], row[3])  # id, tile, bytes
        self._batch = batch

    @property
    def _row(self) -> tuple:
        """The whole row, read with those of the other variables of its tile on first use."""
        row = self._full
        if row is None:
            assert self._batch is not None  # given whenever the row is not
            row = self._full = self._batch.row(self._brief[0])
        return row

    @property
    def _id(self) -> int:
        """The id of this lowered variable."""
        return self._brief[0]

    @property
    def tileId(self) -> int:
        """The tile the variable is on."""
        return self._brief[1]

    @property
    def name(self) -> str:
        """The name of the lowered variable."""
        return self._row[2]

    @property
    def bytes(self) -> int:
        """Size in bytes."""
        return self._brief[2]

    @property
    def alignment(self) -> int:
        """Alignment in bytes; normally at least 4."""
        return self._row[4]

    @property
    def offset(self) -> int:
        """Offset within the tile's variable storage area in bytes."""
        return self._row[5]

    @property
    def category(self) -> VariableCategory:
        """The category of the data stored in the variable."""
        return self._lv._c.category(self._row[6])

    @property
    def equivalenceClass(self) -> EquivalenceClass:
        """The equivalence class: variables of one class have the same liveness."""
        return self._lv._class(self._row[16])

    @property
    def elementConstraints(self) -> PvaList:
        """Lowered variables that cannot share a memory element with this one."""
        return self._lv._constraints(self._row[0], "element")

    @property
    def regionConstraints(self) -> PvaList:
        """Lowered variables that cannot share a memory region with this one."""
        return self._lv._constraints(self._row[0], "region")

    @property
    def hasUnloweredVar(self) -> bool:
        """Whether the variable comes from an unlowered variable."""
        return self._row[17] is not None

    @property
    def unloweredVar(self) -> Variable:
        """The unlowered variable this one comes from; NotPresentError if hasUnloweredVar is False."""
        var_id = self._row[17]
        if var_id is None:
            c = self._lv._c
            raise NotPresentError(
                f"{c.reader.path!r}: lowered variable {self._row[0]} ({self._row[2]!r}) has no unlowered variable; "
                f"check hasUnloweredVar first",
                c.reader.path,
            )
        return self._lv._c.variable(var_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LoweredVariable) and other._brief[0] == self._brief[0]

    def __hash__(self) -> int:
        return hash(("LoweredVariable", self._brief[0]))

    def __repr__(self) -> str:
        live = " always live" if self._row[9] else ""
        return f"<LoweredVariable {self._row[0]} {self._row[2]!r} tile {self._row[1]} {self._row[3]:,} B{live}>"


def _flag(index: int, doc: str) -> property:
    return property(lambda self: bool(self._row[index]), doc=doc)


for _name, _index, _doc in (
    ("allocated", 7, "True if allocated to a tile; otherwise ignore the rest of its data."),
    ("constant", 8, "True if the variable holds constant data that is never written."),
    ("alwaysLive", 9, "True if the variable can never overlap with others."),
    ("executable", 10, "True if the variable needs executable memory."),
    ("vertexCode", 11, "True if the variable holds vertex code."),
    ("lowest256KBytes", 12, "True if the variable must be in the first 256 KB (run instruction reach)."),
    ("startSection", 13, "True if the variable holds an entry point that may need special allocation."),
    ("inInterleavedMem", 14, "True if the variable must be stored in interleaved memory."),
    ("accessedInVertex", 15, "True if the variable may be accessed in a vertex."),
):
    setattr(LoweredVariable, _name, _flag(_index, _doc))


class _TileRows:
    """The rows of the lowered variables of one tile, read together when one of them is first needed."""

    __slots__ = ("_reader", "_tile", "_rows")

    def __init__(self, reader: Any, tile: int) -> None:
        self._reader = reader
        self._tile = tile
        self._rows: dict[int, tuple] | None = None

    def row(self, var_id: int) -> tuple:
        if self._rows is None:
            self._rows = {row[0]: row for row in self._reader.lowered_variables_on_tile(self._tile)}
        return self._rows[var_id]


class LoweredVariables:
    """Lowered variables by tile and by unlowered variable (libpva LoweredVariables)."""

    __slots__ = ("_c", "_classes", "_brief")

    def __init__(self, context: ReportContext) -> None:
        self._c = context
        self._classes: dict[int, EquivalenceClass] | None = None
        self._brief: list[LoweredVariableBrief] | None = None

    def forTile(self, tileId: Any) -> PvaList:
        """The lowered variables on a tile (an id or a Tile), in allocation order."""
        tile = self._c.replica_tile(tileId)
        briefs = self._c.reader.lowered_variable_briefs_on_tile(tile)
        batch = _TileRows(self._c.reader, tile)
        return PvaList(LoweredVariable(self, None, brief, batch) for brief in briefs)

    def forVar(self, var: Any) -> PvaList:
        """The lowered pieces of an unlowered variable (a Variable or its id), by id."""
        var_id = var._id if isinstance(var, Variable) else var
        if not isinstance(var_id, int):
            raise TypeError(f"forVar expects a Variable or a variable id, not {type(var).__name__}")
        if var_id < 0:  # an artificial variable grouping pieces by name
            name = self._c.artificial_variable_name(var_id)
            rows = self._c.reader.lowered_variables_named(name)
        else:
            rows = self._c.reader.lowered_variables_of_variable(var_id)
        return PvaList(LoweredVariable(self, row) for row in rows)

    @property
    def allBriefVars(self) -> PvaList:
        """Brief information for every lowered variable, by id; may be very long."""
        if self._brief is None:
            classes = self._all_classes()
            get = classes.get
            brief = []
            for var_id, size, tile, eq in self._c.reader.lowered_variable_briefs():
                cls = get(eq)
                if cls is None:
                    cls = classes[eq] = EquivalenceClass(eq, [])
                brief.append(LoweredVariableBrief(var_id, size, tile, cls))
            self._brief = brief
        return PvaList(self._brief)

    def _get(self, var_id: int) -> LoweredVariable:
        row = self._c.reader.lowered_variable(var_id)
        if row is None:
            raise InconsistentReportError(
                f"{self._c.reader.path!r}: lowered variable {var_id} is referenced but not in vars_info",
                self._c.reader.path,
            )
        return LoweredVariable(self, row)

    def _get_many(self, ids: Any) -> PvaList:
        """Lowered variables for ids, in the order given."""
        ids = list(ids)
        found = {row[0]: row for row in self._c.reader.lowered_variables_by_id(ids)}
        missing = [i for i in ids if i not in found]
        if missing:
            raise InconsistentReportError(
                f"{self._c.reader.path!r}: lowered variable(s) {missing[:5]} are referenced but not in vars_info",
                self._c.reader.path,
            )
        return PvaList(LoweredVariable(self, found[i]) for i in ids)

    def _constraints(self, var_id: int, kind: str) -> PvaList:
        ids = self._c.reader.lowered_variable_constraints(var_id, kind)
        return self._get_many(ids)

    def _all_classes(self) -> dict[int, EquivalenceClass]:
        if self._classes is None:
            spans: dict[int, list[Interval]] = {}
            for cls, start, end in self._c.reader.equivalence_class_steps():
                spans.setdefault(cls, []).append(Interval(start, end))
            self._classes = {cls: EquivalenceClass(cls, steps) for cls, steps in spans.items()}
        return self._classes

    def _class(self, class_id: int) -> EquivalenceClass:
        classes = self._all_classes()
        found = classes.get(class_id)
        if found is None:
            found = classes[class_id] = EquivalenceClass(class_id, [])
        return found

    def __repr__(self) -> str:
        count = self._c.reader.lowered_variable_count()
        return f"<LoweredVariables {count:,} on {self._c.target.tilesPerReplica:,} tiles>"


def lowered_variables_from_rows(lowered: LoweredVariables, rows: Any) -> PvaList:
    """LoweredVariable objects for lowered-variable rows of the query layer."""
    return PvaList(LoweredVariable(lowered, row) for row in rows)
