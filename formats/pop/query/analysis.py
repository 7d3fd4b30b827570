"""Aggregates for the analyses: summary, comparison, operator times, estimates, charts.

Memory and liveness questions live in memory.py, cycle questions in cycles.py; this module adds
the program structure the analyses walk and the row counts of tables.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ...errors import InvalidInputError
from .cycles import CycleQueries
from .memory import _PROGRAM_LABEL, MemoryQueries, _name

if TYPE_CHECKING:
    from ..sqlite_reader import SqliteFile


class AnalysisQueries(MemoryQueries, CycleQueries):
    """Whole-report aggregates (a mixin of ProfileReader; uses `self.file`)."""

    file: SqliteFile
    path: str
    metadata: dict[str, str]

    # -- what a converted source did not record ----------------------------------------------------

    def not_recorded(self) -> frozenset[str]:
        """The "table.column" figures the source did not record (metadata not_recorded); empty if all were."""
        text = self.metadata.get("not_recorded")
        if not text:
            return frozenset()
        try:
            names = json.loads(text)
        except ValueError as error:
            raise InvalidInputError(f"{self.path!r}: metadata not_recorded is not JSON: {error}") from None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise InvalidInputError(
                f"{self.path!r}: metadata not_recorded: expected a JSON array of strings, found {text[:80]!r}"
            )
        return frozenset(names)

    def summary_memory_totals(self) -> dict | None:
        """The device-wide memory figures of a converted text summary (metadata memory_totals), or None."""
        text = self.metadata.get("memory_totals")
        if not text:
            return None
        try:
            totals = json.loads(text)
        except ValueError as error:
            raise InvalidInputError(f"{self.path!r}: metadata memory_totals is not JSON: {error}") from None
        if not isinstance(totals, dict):
            raise InvalidInputError(
                f"{self.path!r}: metadata memory_totals: expected a JSON object, found {text[:80]!r}"
            )
        return totals

    # -- programs -------------------------------------------------------------------------------

    def program_structure(self) -> list[tuple]:
        """(id, type, compute set, repeat count, call target) of every program."""
        return self.file.query("SELECT id, type, compute_set, repeat_count, call_target FROM programs")

    def programs_labelled(self, max_chars: int | None = None, type_chars: int | None = None) -> list[tuple]:
        """(id, type, label, repeat count, call target) of every program by id; the label is its name, else its
        compute set's."""
        return self.file.query(
            f"SELECT p.id, {_name('p.type', type_chars)}, {_name(_PROGRAM_LABEL, max_chars)}, p.repeat_count, "
            "p.call_target "
            "FROM programs p LEFT JOIN compute_sets cs ON cs.compute_set = p.compute_set ORDER BY p.id"
        )

    def program_label(self, program: int) -> tuple[str, str] | None:
        """(type, label) of one program, or None if there is no such program."""
        return self.file.query_one(
            f"SELECT p.type, {_PROGRAM_LABEL} FROM programs p LEFT JOIN compute_sets cs "
            "ON cs.compute_set = p.compute_set WHERE p.id = ?",
            (int(program),),
        )

    def program_child_links(self) -> list[tuple[int, int]]:
        """(parent, child) of every link of the program tree, by parent and position."""
        return self.file.query("SELECT parent, child FROM program_children ORDER BY parent, position")

    def program_vector_rows_of_kinds(self, kinds: Iterable[str]) -> list[tuple[int, str, int]]:
        """(program, kind, matrix row) of the per-tile vectors of the given kinds."""
        wanted = tuple(kinds)
        return self.file.query(
            f"SELECT program, kind, row FROM program_vectors WHERE kind IN ({','.join('?' * len(wanted))})", wanted
        )

    def program_debug_contexts(self) -> list[tuple[int, int]]:
        """(program, debug context) of every reference from a program to a debug context, by program."""
        return self.file.query(
            "SELECT object, debug_context FROM debug_context_refs WHERE kind = 'program' ORDER BY object, debug_context"
        )

    def compute_set_estimate_rows(self) -> list[tuple[int, str, int | None]]:
        """(compute set, name, row of its estimated cycles per tile or None) of every compute set."""
        return self.file.query("SELECT compute_set, name, estimated_cycles_row FROM compute_sets")

    def optimisation_metrics_by_name(self) -> list[tuple[str, float]]:
        """(name, value) of the compiler's optimisation metrics, by name."""
        return self.file.query("SELECT name, value FROM optimisation_metrics ORDER BY name")

    # -- tables ---------------------------------------------------------------------------------

    def _table_name(self, table: str) -> str:
        tables = self.file.tables
        if table not in tables:
            path = self.file.path
            raise InvalidInputError(f"{path!r}: no table {table!r}; expected one of {', '.join(sorted(tables))}", path)
        return table

    def table_columns(self, table: str) -> tuple[str, ...]:
        """The columns of one table of this file; an InvalidInputError names the tables if there is no such table."""
        return self.file.tables[self._table_name(table)]

    def table_counts(self, tables: Sequence[str] | None = None) -> dict[str, int]:
        """Rows of each table (all tables of the file when `tables` is None), counted with sqlite-utils."""
        import sqlite3

        import sqlite_utils

        from ...errors import CorruptReportError

        names = list(self.file.tables) if tables is None else [self._table_name(t) for t in tables]
        database = sqlite_utils.Database(
            self.file.conn,
            recursive_triggers=False,
            execute_plugins=False,
        )
        try:
            with self.file._lock:  # one statement at a time on the shared connection
                return {name: database.table(name).count for name in names}
        except sqlite3.DatabaseError as exc:
            path = self.file.path
            raise CorruptReportError(f"{path!r}: the profile report is damaged ({exc})", path) from None
