"""Cycle aggregates: run lengths, tile-cycle totals, steps, vertex types and compute sets."""

from __future__ import annotations

from ...errors import InconsistentReportError
from .checks import typed
from .memory import _name

#: A step's label: its own name, else its program's, else its compute set's, else "".
_STEP_LABEL = "coalesce(nullif(s.name, ''), nullif(p.name, ''), cs.name, '')"


class CycleQueries:
    """Where the cycles went (a mixin of ProfileReader; uses `self.file`)."""

    # -- totals ---------------------------------------------------------------------------------

    def total_run_cycles(self) -> int:
        """Cycles of all runs: each run's longest extent over the IPUs, summed."""
        return self.file.query_one(  # type: ignore[attr-defined]
            'SELECT coalesce(sum(length), 0) FROM (SELECT run, max("end" - start) AS length FROM run_cycles_by_ipu '
            "GROUP BY run)"
        )[0]

    def cycle_totals_by_kind(self) -> dict[str, int]:
        """Tile-cycles summed over tiles and runs, by kind, and `rows`: how many rows of totals the report holds.

        Kinds: active_compute, compute, internal_exchange, inter_ipu_exchange, stream_copy (begin, mid and
        end), sync and total.
        """
        row = self.file.query_one(  # type: ignore[attr-defined]
            "SELECT coalesce(sum(active_compute), 0), coalesce(sum(compute), 0), coalesce(sum(internal_exchange), 0), "
            "coalesce(sum(inter_ipu_exchange), 0), coalesce(sum(stream_copy_begin + stream_copy + stream_copy_end), 0), "
            "coalesce(sum(sync), 0), coalesce(sum(total), 0), count(*) FROM cycle_totals"
        )
        return dict(
            zip(
                (
                    "active_compute",
                    "compute",
                    "internal_exchange",
                    "inter_ipu_exchange",
                    "stream_copy",
                    "sync",
                    "total",
                    "rows",
                ),
                row,
            )
        )

    # -- vertex types ---------------------------------------------------------------------------

    def vertex_type_names(self, max_chars: int | None = None) -> list[tuple[int, str]]:
        """(id, name) of every vertex type."""
        rows = self.file.query(f"SELECT id, {_name('name', max_chars)} FROM vertex_types")  # type: ignore[attr-defined]
        return typed(self.file.path, rows, "vertex_types.id", "vertex_types.name")  # type: ignore[attr-defined]

    def vertex_instances_by_type(self) -> list[tuple[int, int]]:
        """(vertex type, instances in all compute sets)."""
        return self.file.query(  # type: ignore[attr-defined]
            "SELECT vertex_type, sum(count) FROM compute_set_vertices GROUP BY vertex_type"
        )

    def measured_cycles_by_vertex_type(self) -> list[tuple[int, int]]:
        """(vertex type, measured cycles over all steps); empty without vertex instrumentation."""
        return self.file.query(  # type: ignore[attr-defined]
            "SELECT vertex_type, sum(cycles) FROM step_vertex_cycles GROUP BY vertex_type"
        )

    def estimated_cycles_by_vertex_type(self) -> list[tuple[int, int]]:
        """(vertex type, estimated cycles times the executions of each compute set by a step)."""
        return self.file.query(  # type: ignore[attr-defined]
            "SELECT v.vertex_type, sum(v.estimated_cycles * n.times) FROM compute_set_vertices v JOIN "
            "(SELECT compute_set, count(*) AS times FROM steps WHERE compute_set IS NOT NULL GROUP BY compute_set) n "
            "ON n.compute_set = v.compute_set GROUP BY v.vertex_type"
        )

    def measured_cycles_by_step_and_vertex_type(self) -> list[tuple[int, int, int]]:
        """(step, vertex type, measured cycles)."""
        return self.file.query(  # type: ignore[attr-defined]
            "SELECT step_id, vertex_type, sum(cycles) FROM step_vertex_cycles GROUP BY step_id, vertex_type"
        )

    def vertex_cycles_by_step(self, max_chars: int | None = None) -> list[tuple[int, str, int, int]]:
        """(step, vertex type name, instances, measured cycles), by step and then most cycles first."""
        rows = self.file.query(  # type: ignore[attr-defined]
            f"SELECT c.step_id, {_name('t.name', max_chars)}, c.count, c.cycles FROM step_vertex_cycles c "
            "JOIN vertex_types t ON t.id = c.vertex_type ORDER BY c.step_id, c.cycles DESC"
        )
        return typed(self.file.path, rows, None, "vertex_types.name", None, None)  # type: ignore[attr-defined]

    def estimated_vertex_weights(self) -> list[tuple[int, int, int]]:
        """(compute set, vertex type, estimated cycles (at least 1) times instances)."""
        return self.file.query(  # type: ignore[attr-defined]
            "SELECT compute_set, vertex_type, sum(max(estimated_cycles, 1) * count) FROM compute_set_vertices "
            "GROUP BY compute_set, vertex_type"
        )

    def _cycle_rows(self, sql: str, what: str, positions: tuple[int, ...] | None = None) -> list:
        """The rows of a query of cycles, checked to hold whole numbers (at `positions`, or wherever
        they hold numbers): a REAL planted in a cycles column (2^64 - 1 is stored as one) is damage,
        named here, not an overflow later."""
        rows = self.file.query(sql)  # type: ignore[attr-defined]
        for row in rows:
            for value in row if positions is None else (row[i] for i in positions):
                if isinstance(value, float):
                    path = self.path  # type: ignore[attr-defined]
                    raise InconsistentReportError(
                        f"{path!r}: the cycles of steps_by_ipu ({what}) must be integers, found {value!r}", path
                    )
        return rows

    # -- steps ----------------------------------------------------------------------------------

    def steps_labelled(self, max_chars: int | None = None, type_chars: int | None = None) -> list[tuple]:
        """(id, type, program, compute set, label, sync type, cycles overlapped) of every step, by id.

        The label is the step's name, else its program's, else its compute set's.
        """
        return self.file.query(  # type: ignore[attr-defined]
            f"SELECT s.id, {_name('s.type', type_chars)}, s.program, s.compute_set, {_name(_STEP_LABEL, max_chars)}, "
            "s.sync_type, s.cycles_overlapped FROM steps s LEFT JOIN programs p ON p.id = s.program "
            "LEFT JOIN compute_sets cs ON cs.compute_set = s.compute_set ORDER BY s.id"
        )

    def step_ipu_figures(self) -> list[tuple]:
        """Per step and IPU: (step, ipu, profiled, cycles, active tiles, start, end, thread balance, tile balance,
        active tile balance, bytes exchanged, data balance), by step and IPU."""
        return self._cycle_rows(
            "SELECT step_id, ipu, profiled, tile_cycles_max, active_tiles, cycles_base + all_cycles_from_min, "
            "cycles_base + all_cycles_to_max, thread_balance, tile_balance, active_tile_balance, data_in + data_out, "
            "data_balance FROM steps_by_ipu ORDER BY step_id, ipu",
            "step_ipu_figures",
            positions=(3, 4, 5, 6, 10),
        )

    def step_lengths(self) -> list[tuple[int, int]]:
        """(step, longest extent over the IPUs) of every profiled step."""
        return self._cycle_rows(
            "SELECT step_id, max(all_cycles_to_max - all_cycles_from_min) FROM steps_by_ipu WHERE profiled = 1 "
            "GROUP BY step_id",
            "step_lengths",
        )

    def step_intervals(self) -> list[tuple[int, int, int, int]]:
        """(ipu, step, start, end) of every profiled step on each IPU, in cycles on the IPU's counter
        (the run's base plus the step's earliest start and latest end)."""
        rows = self.file.query(  # type: ignore[attr-defined]
            "SELECT ipu, step_id, cycles_base, all_cycles_from_min, all_cycles_to_max FROM steps_by_ipu "
            "WHERE profiled = 1"
        )
        path = self.path  # type: ignore[attr-defined]
        columns = ("ipu", "step_id", "cycles_base", "all_cycles_from_min", "all_cycles_to_max")
        typed(path, rows, *(f"steps_by_ipu.{c}" for c in columns))
        out = [(ipu, step, base + lo, base + hi) for ipu, step, base, lo, hi in rows]
        if out and max(max(abs(r[2]), abs(r[3])) for r in out) >= 1 << 63:
            raise InconsistentReportError(
                f"{path!r}: steps_by_ipu: a step's cycles_base plus its cycles from or to passes 2^63 - 1", path
            )
        return out

    def steps_by_type(self) -> list[tuple[str, int, int]]:
        """(step type, steps, their cycles: the longest tile of each step and IPU, summed)."""
        return self._cycle_rows(
            "SELECT s.type, count(DISTINCT s.id), coalesce(sum(b.tile_cycles_max), 0) FROM steps s "
            "LEFT JOIN steps_by_ipu b ON b.step_id = s.id GROUP BY s.type",
            "steps_by_type",
        )

    # -- compute sets and programs --------------------------------------------------------------

    def compute_set_estimated_max(self) -> list[tuple[str, int]]:
        """(compute set name, estimated cycles of its slowest tile, 0 if unknown) of every compute set."""
        return self.file.query(  # type: ignore[attr-defined]
            "SELECT name, coalesce(estimated_cycles_max, 0) FROM compute_sets"
        )

    def measured_cycles_by_compute_set_name(self) -> list[tuple[str, int]]:
        """(compute set name, longest tile of each of its steps and IPUs, summed)."""
        return self._cycle_rows(
            "SELECT cs.name, sum(b.tile_cycles_max) FROM steps s JOIN compute_sets cs ON cs.compute_set = s.compute_set "
            "JOIN steps_by_ipu b ON b.step_id = s.id GROUP BY cs.name",
            "measured_cycles_by_compute_set_name",
        )

    def compute_set_figures(self) -> list[tuple]:
        """(id, name, vertices, estimated max, estimated total, last measured cycles or None) of every compute set.

        The last measured cycles come only from reports converted from a legacy profile.
        """
        legacy = "measured_cycles" in self.file.tables.get("compute_sets", ())  # type: ignore[attr-defined]
        return self.file.query(  # type: ignore[attr-defined]
            "SELECT compute_set, name, num_vertices, estimated_cycles_max, estimated_cycles_total, "
            f"{'measured_cycles' if legacy else 'NULL'} FROM compute_sets"
        )

    def measured_cycles_by_compute_set(self) -> list[tuple[int, int, int]]:
        """(compute set, executions, cycles: the longest IPU of each execution, summed)."""
        return self._cycle_rows(
            "SELECT compute_set, count(*), sum(longest) FROM (SELECT s.compute_set, max(b.tile_cycles_max) AS longest "
            "FROM steps s JOIN steps_by_ipu b ON b.step_id = s.id WHERE s.compute_set IS NOT NULL GROUP BY s.id) "
            "GROUP BY compute_set",
            "measured_cycles_by_compute_set",
        )

    def measured_cycles_by_program(self) -> list[tuple[int, int, int]]:
        """(program, executions, cycles: the longest IPU of each execution, summed)."""
        return self._cycle_rows(
            "SELECT program, count(*), coalesce(sum(longest), 0) FROM (SELECT s.program, max(b.tile_cycles_max) AS "
            "longest FROM steps s JOIN steps_by_ipu b ON b.step_id = s.id WHERE s.program IS NOT NULL GROUP BY s.id) "
            "GROUP BY program",
            "measured_cycles_by_program",
        )
