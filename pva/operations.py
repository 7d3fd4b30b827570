"""OperationAnalysis: programs grouped into the framework operations that created them.

An operation is a debug context of a framework layer (popart, poptorch, tensorflow, ...: any
layer but the Poplar libraries' ``poplar`` and ``poplibs``). Each program with debug
contexts belongs to the operation of each of them: the nearest ancestor-or-self of a
framework layer or, when there is none, the root reached through first parents. Operations
come in the order of their first liveness step; framework contexts without framework children
that own no program in a step follow, by id, with step indices -1.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from .debug import DebugContext, DebugInfo
from .lists_and_enums import PvaList

__all__ = ["LIBRARY_LAYERS", "Operation", "OperationAnalysis"]

#: Layers of the Poplar libraries: their contexts are never operations of their own when a
#: framework context is above them.
LIBRARY_LAYERS = frozenset({"poplar", "poplibs"})


class Operation:
    """One framework operation: its debug context, programs, liveness steps and variables."""

    __slots__ = ("_analysis", "debugContext", "name", "_programs", "firstStepIndex", "lastStepIndex", "_vars")

    def __init__(
        self, analysis: OperationAnalysis, context: DebugContext, programs: list[int], first: int, last: int
    ) -> None:
        self._analysis = analysis
        self.debugContext = context
        data = analysis._info.records[context.id].data
        op_name = data.get("op_name")
        self.name = op_name if isinstance(op_name, str) else context.name
        self._programs = programs
        self.firstStepIndex = first
        self.lastStepIndex = last
        self._vars: PvaList | None = None

    def programs(self) -> PvaList:
        """The programs of the operation: those of its liveness steps in step order, then the rest by id."""
        return self._analysis._table.list_of(self._programs)

    @property
    def replacedDebugContext(self) -> PvaList:
        """Debug contexts of the operations this one replaced (outlining into a Call); may be empty."""
        info = self._analysis._info
        raw = info.records[self.debugContext.id].data.get("replacedDebugContextIds")
        if isinstance(raw, str):  # PopART writes the ids as the text "[1,2,3]"
            try:
                raw = json.loads(raw)
            except ValueError:
                raw = None
        if not isinstance(raw, list):
            return PvaList()
        records = info.records
        return PvaList(info.context(i) for i in raw if isinstance(i, int) and i in records)

    @property
    def vars(self) -> PvaList:
        """The lowered variables the operation's programs use, by id."""
        if self._vars is None:
            found = {}
            for program in self.programs():
                for var in program.vars:
                    found[var._id] = var
            self._vars = PvaList(found[i] for i in sorted(found))
        return PvaList(self._vars)

    def __repr__(self) -> str:
        steps = (
            f"steps {self.firstStepIndex}..{self.lastStepIndex}" if self.firstStepIndex >= 0 else "no liveness steps"
        )
        return f"<Operation {self.name!r} (context {self.debugContext.id}), {len(self._programs)} programs, {steps}>"


class OperationAnalysis:
    """The operations of a report opened with its debug information.

    >>> report = pva.openReport("profile.pop", "debug.cbor")          # doctest: +SKIP
    >>> for op in pva.OperationAnalysis(report).operations:           # doctest: +SKIP
    ...     print(op.name, len(op.programs()), op.firstStepIndex, op.lastStepIndex)
    """

    def __init__(self, report: Any) -> None:
        compilation = report.compilation
        self._info: DebugInfo = compilation._require_debug()
        self._compilation = compilation
        self._table = compilation._program_table
        self._operations: PvaList | None = None
        self._op_of: dict[int, int] = {}

    @property
    def operations(self) -> PvaList:
        """Every operation, in order of first liveness step (the same list on every call)."""
        if self._operations is None:
            self._operations = self._analyse()
        return self._operations

    def _operation_context(self, context_id: int) -> int:
        """The operation a debug context belongs to (see the module docstring)."""
        found = self._op_of.get(context_id)
        if found is not None:
            return found
        records = self._info.records
        seen = {context_id}
        queue = deque([context_id])
        result = None
        while queue:
            current = queue.popleft()
            if records.layer_of(current) not in LIBRARY_LAYERS:
                result = current
                break
            for parent in records.parents_of(current):
                if parent not in seen:
                    seen.add(parent)
                    queue.append(parent)
        if result is None:  # only library layers above: the root through first parents
            result = context_id
            visited = {result}
            parents = records.parents_of(result)
            while parents and parents[0] not in visited:
                result = parents[0]
                visited.add(result)
                parents = records.parents_of(result)
        self._op_of[context_id] = result
        return result

    def _analyse(self) -> PvaList:
        info = self._info
        records = info.records
        program_refs = info.refs_by_object["program"]
        op_of = self._operation_context
        ops_of_program: dict[int, list[int]] = {}
        for program, contexts in program_refs.items():
            ops = []
            for context_id in contexts:
                if context_id in records:
                    op = op_of(context_id)
                    if op not in ops:
                        ops.append(op)
            if ops:
                ops_of_program[program] = ops

        first: dict[int, int] = {}
        last: dict[int, int] = {}
        step_programs: dict[int, list[int]] = {}
        in_steps: dict[int, set[int]] = {}
        for index, program, _bytes in self._compilation._reader.liveness_steps():
            for op in ops_of_program.get(program, ()):
                if op not in first:
                    first[op] = index
                    step_programs[op] = []
                    in_steps[op] = set()
                last[op] = index
                if program not in in_steps[op]:
                    in_steps[op].add(program)
                    step_programs[op].append(program)

        other_programs: dict[int, list[int]] = {}
        for program in sorted(ops_of_program):
            for op in ops_of_program[program]:
                if program not in in_steps.get(op, ()):
                    other_programs.setdefault(op, []).append(program)

        operations = []
        for op in sorted(first, key=lambda o: (first[o], o)):
            programs = step_programs[op] + other_programs.get(op, [])
            operations.append(Operation(self, info.context(op), programs, first[op], last[op]))
        children_of, layer_of = records.children_of, records.layer_of
        for op in records:
            if op in first:
                continue
            owns = op in other_programs
            framework_leaf = layer_of(op) not in LIBRARY_LAYERS and not any(
                layer_of(c) not in LIBRARY_LAYERS for c in children_of(op)
            )
            if owns or framework_leaf:
                operations.append(Operation(self, info.context(op), other_programs.get(op, []), -1, -1))
        return PvaList(operations)

    def __repr__(self) -> str:
        count = "not analysed yet" if self._operations is None else f"{len(self._operations):,} operations"
        return f"<OperationAnalysis {count}>"
