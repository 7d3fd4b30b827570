"""Every program of a report, made at once and shared by the program objects (pva.programs)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import TYPE_CHECKING, Any

from formats.gcpause import gc_paused
from formats.lazy_import import lazy_module

from .errors import InconsistentReportError
from .lists_and_enums import PvaList
from .programs import PROGRAM_CLASSES, CallProgram, Program, UnknownProgram
from .vectors import TileVector

if TYPE_CHECKING:
    import numpy as np

    from .context import ReportContext
else:
    np = lazy_module("numpy")


#: Programs' vectors looked up one by one before every program's matrix rows are read at once.
_VECTOR_LOOKUPS = 256
#: Program.Type and class of each type name stored in the programs table.
_TYPE_BY_NAME = dict(Program.Type.__members__)
_CLASS_BY_NAME = {name: PROGRAM_CLASSES.get(type_, Program) for name, type_ in _TYPE_BY_NAME.items()}
#: Set one slot of a program without a Python frame (the slots Program.__init__ sets).
_SLOTS: dict[str, Any] = dict(vars(Program))  # the slot descriptors, read without mypy's instance-attribute rule
_SET_C, _SET_ID, _SET_TYPE = _SLOTS["_c"].__set__, _SLOTS["_id"].__set__, _SLOTS["_type"].__set__
#: Runs an iterator to its end, keeping nothing.
_consume: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend


class ProgramTable:
    """Every program of a report, shared by all program objects.

    Making the objects reads only the id and type of each program, with the garbage collector
    paused; names and the other columns are read for all programs at once on first use.
    """

    def __init__(self, context: ReportContext) -> None:
        self._c = context
        reader = context.reader
        self._path = reader.path
        count, low, high, unique = reader.program_id_range()
        #: Whether the ids are 0..count-1, so that an id is its position (checked again on each look-up).
        self._dense = count == 0 or (unique and low == 0 and high == count - 1)
        if self._dense:
            types = reader.program_types(count)
            if len(types) != count:
                raise InconsistentReportError(f"{self._path!r}: table programs changed while it was read", self._path)
            ids: range | list = range(count)
        else:
            rows = reader.program_kinds()
            ids = [row[0] for row in rows]
            types = [row[1] for row in rows]
        unknown = Program.Type.Unknown
        with gc_paused():  # the objects form no cycles: collections would only walk them again and again
            # made without a Python frame per program: object.__new__, then each slot set by C loops
            made: list[Program] = list(map(object.__new__, map(_CLASS_BY_NAME.get, types, repeat(UnknownProgram))))
            _consume(map(_SET_C, made, repeat(context)))
            _consume(map(_SET_ID, made, ids))
            _consume(map(_SET_TYPE, made, map(_TYPE_BY_NAME.get, types, repeat(unknown))))
            self.all: list[Program] = made
        self._positions: dict | None = None
        self._names: list[str] | None = None
        self._details: list[tuple] | None = None
        self._children: dict[int, list[int]] | None = None
        self._vectors: dict[tuple[int, str], int] | None = None
        self._vector_lookups = 0

    def _position(self, program_id: Any) -> int | None:
        """The index in `all` of the program with an id, or None."""
        if (
            self._dense
            and type(program_id) is int
            and 0 <= program_id < len(self.all)
            and (self.all[program_id]._id == program_id)
        ):
            return program_id
        if self._positions is None:
            self._positions = {program._id: index for index, program in enumerate(self.all)}
        try:
            return self._positions.get(program_id)
        except TypeError:  # an unhashable id
            return None

    def get(self, program_id: int | None) -> Program:
        """The program with an id, or an InconsistentReportError naming the missing id."""
        position = self._position(program_id)
        if position is None:
            raise InconsistentReportError(
                f"{self._path!r}: program {program_id!r} is referenced but not defined", self._path
            )
        return self.all[position]

    def list_of(self, ids: Any) -> PvaList:
        """Programs for a sequence of ids."""
        get = self.get
        return PvaList(get(i) for i in ids)

    def _index(self, program_id: int) -> int:
        """The index in `all` of a program of this table, by its id."""
        if self._dense:
            return program_id  # made from range(count): every program's id is its index
        position = self._position(program_id)
        assert position is not None, program_id
        return position

    def name_of(self, program_id: int) -> str:
        """The stored name of a program of this table ("" when none)."""
        names = self._names
        if names is None:
            with gc_paused():
                loaded = self._c.reader.program_names()
            if len(loaded) != len(self.all):
                raise InconsistentReportError(f"{self._path!r}: table programs changed while it was read", self._path)
            names = self._names = [name or "" for name in loaded]
        return names[self._index(program_id)]

    def details_of(self, program_id: int) -> tuple:
        """The stored details of a program of this table (formats.pop.query.compilation.PROGRAM_DETAIL_COLUMNS)."""
        details = self._details
        if details is None:
            with gc_paused():
                details = self._c.reader.program_details()
            if len(details) != len(self.all):
                raise InconsistentReportError(f"{self._path!r}: table programs changed while it was read", self._path)
            self._details = details
        return details[self._index(program_id)]

    def _children_map(self) -> dict[int, list[int]]:
        if self._children is None:
            children: dict[int, list[int]] = {}
            for parent, child in self._c.reader.program_children():
                children.setdefault(parent, []).append(child)
            self._children = children
        return self._children

    def children_of(self, program_id: int) -> PvaList:
        """The children of a program, in order."""
        return self.list_of(self._children_map().get(program_id, ()))

    def _vector_row(self, program_id: int, kind: str) -> int | None:
        """The matrix row of a program's vector: looked up one by one at first, then, once
        `_VECTOR_LOOKUPS` have been asked for, every program's read at once."""
        if self._vectors is None:
            self._vector_lookups += 1
            if self._vector_lookups <= _VECTOR_LOOKUPS:
                return self._c.reader.program_vector_row(program_id, kind)
            self._vectors = {(program, k): row for program, k, row in self._c.reader.program_vector_rows()}
        return self._vectors.get((program_id, kind))

    def array(self, program_id: int, kind: str) -> np.ndarray:
        """A per-tile vector of a program as uint64; empty when not recorded."""
        row = self._vector_row(program_id, kind)
        return self._c.reader.matrix_row(f"program_{kind}_by_tile", row)

    def vector(self, program_id: int, kind: str) -> TileVector:
        """A per-tile vector of a program as a list; empty when not recorded."""
        return self._c.vectors.get(("program", program_id, kind), lambda: self.array(program_id, kind))

    def vars_of(self, program_id: int) -> PvaList:
        """Lowered variables used by a program, by id."""
        from .variables import lowered_variables_from_rows

        rows = self._c.reader.lowered_variables_of_program(program_id)
        return lowered_variables_from_rows(self._c.lowered_variables, rows)

    def ordered(self, owned: set[int], *, inline_calls: bool) -> list[int]:
        """The ids in `owned` in program-tree order (depth first from the control programs).

        With `inline_calls` a Call program is followed by the programs of the function it
        calls (recursively, once per call); otherwise functions follow the control programs.
        Owned programs the walk does not reach come last, by id.
        """
        if not owned:
            return []
        children = self._children_map()
        position = self._position
        everything = self.all
        reader = self._c.reader
        roots = reader.control_program_ids()
        functions = reader.function_program_ids()

        def kids(pid: int) -> list[int]:
            found = children.get(pid, [])
            if inline_calls:
                at = position(pid)
                program = None if at is None else everything[at]
                if isinstance(program, CallProgram) and program._row[4] is not None:
                    return [*found, program._row[4]]
            return found

        memo: dict[int, tuple[int, ...]] = {}
        result: list[int] = []
        for root in roots if inline_calls else [*roots, *functions]:
            result.extend(_expand(root, owned, memo, kids))
        if inline_calls:
            reached = set(result)
            for function in functions:
                if function not in memo:
                    result.extend(p for p in _expand(function, owned, memo, kids) if p not in reached)
        else:
            result = list(dict.fromkeys(result))  # first occurrence of each, in order
        reached = set(result)
        result.extend(sorted(p for p in owned if p not in reached))
        return result


def _expand(root: int, owned: set[int], memo: dict[int, tuple[int, ...]], kids: Any) -> tuple[int, ...]:
    """The owned programs of the tree under `root`, depth first; a program on its own path is skipped."""
    if root in memo:
        return memo[root]
    on_path: set[int] = set()
    stack: list[tuple[int, bool]] = [(root, False)]
    while stack:
        pid, done = stack.pop()
        if done:
            on_path.discard(pid)
            parts: list[int] = [pid] if pid in owned else []
            for kid in kids(pid):
                parts.extend(memo.get(kid, ()))
            memo[pid] = tuple(parts) if parts else ()
            continue
        if pid in memo or pid in on_path:
            continue
        on_path.add(pid)
        stack.append((pid, True))
        for kid in reversed(kids(pid)):
            if kid not in memo and kid not in on_path:
                stack.append((kid, False))
    return memo.get(root, ())
