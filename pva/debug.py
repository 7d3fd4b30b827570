"""Debug contexts from debug.cbor (libpva DebugContext, DebugContext.Filter, DebugContextLocation).

The contexts themselves come from the debug.cbor file passed to ``openReport``; which
programs, compute sets and variables each one owns comes from the report's
``debug_context_refs`` table.
"""

from __future__ import annotations

import functools
import json
from collections import deque
from typing import TYPE_CHECKING, Any

from formats.debug.debug_cbor import INVALID_ID, DebugInfoReader, DebugRecord, DebugRecords, context_json

from .lists_and_enums import PvaList
from .model_errors import NoSuchObjectError

if TYPE_CHECKING:
    from .context import ReportContext


__all__ = ["DebugContext", "DebugContextLocation", "DebugLayer"]


class DebugContextLocation:
    """Where in the source code a debug context was created; empty (invalid) if unknown."""

    __slots__ = ("fileName", "lineNumber", "functionName", "_valid")

    def __init__(self, fileName: str = "", lineNumber: int = 0, functionName: str = "", *, valid: bool | None = None):
        self.fileName = fileName
        self.lineNumber = lineNumber
        self.functionName = functionName
        self._valid = bool(fileName or lineNumber or functionName) if valid is None else valid

    @property
    def isValid(self) -> bool:
        """False for an empty location (then ignore the other fields)."""
        return self._valid

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DebugContextLocation) and (
            other.fileName,
            other.lineNumber,
            other.functionName,
            other._valid,
        ) == (self.fileName, self.lineNumber, self.functionName, self._valid)

    def __hash__(self) -> int:
        return hash((self.fileName, self.lineNumber, self.functionName))

    def __repr__(self) -> str:
        if not self._valid:
            return "<DebugContextLocation (none)>"
        function = f" in {self.functionName}" if self.functionName else ""
        return f"<DebugContextLocation {self.fileName}:{self.lineNumber}{function}>"


_NO_LOCATION = DebugContextLocation(valid=False)


class DebugLayer(str):
    """The layer of a debug context, e.g. ``"popart"``.

    It compares, hashes, prints and formats as the layer name (``ctx.layer == "popart"``),
    while its text is the JSON object ``{"layer": "popart"}``: client scripts written for
    libpva also read it with ``json.loads(ctx.layer)["layer"]``. ``name`` is the plain name.
    """

    name: str

    def __new__(cls, name: str) -> DebugLayer:
        self = super().__new__(cls, json.dumps({"layer": name}))
        self.name = name
        return self

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DebugLayer):
            return other.name == self.name
        if isinstance(other, str):
            return other == self.name or str.__eq__(self, other)
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        return hash(self.name)

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)

    def __repr__(self) -> str:
        return repr(self.name)

    def __reduce__(self) -> tuple:
        return (DebugLayer, (self.name,))


class _Filter:
    """Which debug contexts CompilationReport.debugContexts returns.

    ``Filter()`` selects every context, ``Filter("poplibs")`` those of one layer and
    ``Filter(True)`` those without a parent.
    """

    __slots__ = ("_layer", "_without_parent")

    def __init__(
        self, arg: str | bool | None = None, *, layer: str | None = None, withoutParent: bool | None = None
    ) -> None:
        self._layer = ""
        self._without_parent = False
        if layer is not None or withoutParent is not None:
            if arg is not None:
                raise TypeError("DebugContext.Filter takes one argument: a layer or withoutParent")
            arg = layer if layer is not None else withoutParent
            if layer is not None and withoutParent is not None:
                raise TypeError("DebugContext.Filter selects by layer or by withoutParent, not both")
        if arg is None:
            return
        if isinstance(arg, bool):
            self._without_parent = arg
        elif isinstance(arg, str):
            self._layer = str(arg.name if isinstance(arg, DebugLayer) else arg)
        else:
            raise TypeError(
                f"DebugContext.Filter takes a layer name (str) or withoutParent (bool), not {type(arg).__name__}"
            )

    @property
    def layer(self) -> str:
        """The layer selected; empty for any layer."""
        return self._layer

    @property
    def withoutParent(self) -> bool:
        """Whether only contexts without a parent are selected."""
        return self._without_parent

    def _accepts(self, record: DebugRecord) -> bool:
        if self._layer and record.layer != self._layer:
            return False
        return not (self._without_parent and record.parents)

    def __repr__(self) -> str:
        parts = [f"layer={self._layer!r}"] if self._layer else []
        if self._without_parent:
            parts.append("withoutParent=True")
        return f"<DebugContext.Filter {' '.join(parts) or 'everything'}>"


_Filter.__name__ = _Filter.__qualname__ = "Filter"


class DebugContext:
    """One debug context: a layer's record of what created programs and variables.

    Equal (and hashed) by id. Created by CompilationReport.debugContext(s), Program.debugContexts
    and friends, never directly.
    """

    #: The id no debug context has.
    INVALID_ID = INVALID_ID
    Filter = _Filter

    __slots__ = ("_info", "id")

    def __init__(self, info: DebugInfo, context_id: int) -> None:
        self._info = info
        self.id = context_id

    @property
    def _record(self) -> DebugRecord:
        return self._info.records[self.id]

    @property
    def layer(self) -> DebugLayer:
        """The layer that created the context, e.g. popart, poplibs, poplar (see DebugLayer)."""
        return DebugLayer(self._info.records.layer_of(self.id))

    @property
    def name(self) -> str:
        """The name of the context; may be empty."""
        return self._record.name

    @property
    def fullPath(self) -> str:
        """The names from the root context down to this one, joined with '/' (first parents)."""
        names = []
        seen = set()
        context_id: int | None = self.id
        records = self._info.records
        while context_id is not None and context_id not in seen:
            seen.add(context_id)
            name = records[context_id].name
            if name:
                names.append(name)
            parents = records.parents_of(context_id)
            context_id = parents[0] if parents else None
        return "/".join(reversed(names))

    @property
    def json(self) -> str:
        """Everything recorded for the context (layer, name and the layer's data) as a JSON string.

        Always valid JSON: NaN and infinities are null, integers of more than 4,300 digits are
        hexadecimal strings.
        """
        record = self._record
        return context_json(record.layer, record.name, record.data)

    @property
    def location(self) -> DebugContextLocation:
        """Where the context was created; invalid if not recorded."""
        location = self._record.location
        if location is None:
            return _NO_LOCATION
        return DebugContextLocation(*location, valid=True)

    @property
    def parents(self) -> PvaList:
        """The immediate parent contexts."""
        context = self._info.context
        return PvaList(context(p) for p in self._info.records.parents_of(self.id))

    @property
    def children(self) -> PvaList:
        """The immediate child contexts, by id."""
        context = self._info.context
        return PvaList(context(c) for c in self._info.records.children_of(self.id))

    def programs(self, inlineCalls: bool = True) -> PvaList:
        """The programs of this context and its descendants, in program-tree order.

        With ``inlineCalls`` the programs of a called function follow the Call program that
        calls it (recursively); otherwise they come after the control programs.
        """
        info = self._info
        owned = info.owned_programs(info.descendants(self.id))
        table = info._context.program_table
        return table.list_of(table.ordered(owned, inline_calls=bool(inlineCalls)))

    def variables(self) -> PvaList:
        """The (unlowered) variables of this context and its descendants, by id."""
        info = self._info
        ids: set[int] = set()
        for context_id in info.descendants(self.id):
            ids.update(info.refs_by_context["variable"].get(context_id, ()))
        variable = info._context.variable
        return PvaList(variable(i) for i in sorted(ids))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DebugContext) and other.id == self.id and other._info is self._info

    def __hash__(self) -> int:
        return hash(("DebugContext", self.id))

    def __repr__(self) -> str:
        record = self._record
        return f"<DebugContext {self.id} {record.layer} {record.name!r}>"


class DebugInfo:
    """The debug contexts of a report and the objects each one owns (internal)."""

    def __init__(self, path: str, context: ReportContext) -> None:
        self.path = path
        self._context = context

    @functools.cached_property
    def records(self) -> DebugRecords:
        """Every context record by id (the file is read on first use)."""
        return DebugInfoReader(self.path).records

    @functools.cached_property
    def _contexts(self) -> list[DebugContext | None]:
        """The DebugContext made for each row of `records`, once asked for."""
        return [None] * len(self.records)

    @functools.cached_property
    def _refs(self) -> tuple[dict, dict]:
        by_object: dict[str, dict[int, list[int]]] = {"program": {}, "compute_set": {}, "variable": {}}
        by_context: dict[str, dict[int, list[int]]] = {"program": {}, "compute_set": {}, "variable": {}}
        for kind, obj, context_id in self._context.reader.debug_context_refs():
            if kind not in by_object:
                continue
            by_object[kind].setdefault(obj, []).append(context_id)
            by_context[kind].setdefault(context_id, []).append(obj)
        return by_object, by_context

    @property
    def refs_by_object(self) -> dict[str, dict[int, list[int]]]:
        """Debug context ids of each program, compute set and variable."""
        return self._refs[0]

    @property
    def refs_by_context(self) -> dict[str, dict[int, list[int]]]:
        """Program, compute set and variable ids of each debug context."""
        return self._refs[1]

    def context(self, context_id: int) -> DebugContext:
        """The context with an id (the same object every time)."""
        row = self.records._row(context_id)
        if row < 0:
            raise NoSuchObjectError(
                f"{self.path!r}: no debug context with id {context_id!r} "
                f"({len(self.records):,} contexts{'; 0 is the invalid id' if context_id == 0 else ''})",
                self.path,
            )
        contexts = self._contexts
        found = contexts[row]
        if found is None:
            found = contexts[row] = DebugContext(self, context_id)
        return found

    def select(self, chosen: _Filter) -> PvaList:
        """The contexts a filter selects, by id."""
        contexts = self._contexts
        make = DebugContext
        result = PvaList()
        append = result.append
        for row, context_id in self.records.select_rows(chosen._layer, chosen._without_parent):
            found = contexts[row]
            if found is None:
                found = contexts[row] = make(self, context_id)
            append(found)
        return result

    def contexts_of(self, kind: str, obj: int) -> PvaList:
        """The contexts recorded for a program, compute set or variable; unknown ids are skipped."""
        ids = self.refs_by_object[kind].get(obj, ())
        records = self.records
        return PvaList(self.context(i) for i in ids if i in records)

    def descendants(self, context_id: int) -> list[int]:
        """The context and every context below it, each once, breadth first."""
        self.context(context_id)
        children_of = self.records.children_of
        seen = {context_id}
        order = [context_id]
        queue = deque([context_id])
        while queue:
            for child in children_of(queue.popleft()):
                if child not in seen:
                    seen.add(child)
                    order.append(child)
                    queue.append(child)
        return order

    def owned_programs(self, context_ids: Any) -> set[int]:
        """Ids of the programs owned by any of the contexts."""
        by_context = self.refs_by_context["program"]
        owned: set[int] = set()
        for context_id in context_ids:
            owned.update(by_context.get(context_id, ()))
        return owned
