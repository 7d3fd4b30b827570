"""Queries of the execution report: runs, steps, cycles and per-tile matrices."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from ..schema import profile_schema

#: cycle_totals columns, in the order `cycle_totals` sums them.
CYCLE_ACTIVITIES = profile_schema().tables["cycle_totals"].column_names[2:]

#: Per-IPU figures of a step in steps_by_ipu, by name: the SQL expression of each.
STEP_IPU_FIGURES = {
    "profiled": "profiled",
    "cycles": "cycles",
    "active_tiles": "active_tiles",
    "thread_balance": "thread_balance",
    "tile_balance": "tile_balance",
    "active_tile_balance": "active_tile_balance",
    "data_in": "data_in",
    "data_out": "data_out",
    "data_balance": "data_balance",
    **{
        f"{span}_cycles_{end}_{stat}": f"cycles_base + {span}_cycles_{end}_{stat}"
        for span in ("all", "active")
        for end in ("from", "to")
        for stat in ("min", "max", "avg")
    },
}

#: Columns of steps that `step_column` reads whole.
_STEP_COLUMNS = frozenset({"type", "program", "name", "compute_set"})


class ExecutionQueries:
    """Questions about what ran (a mixin of ProfileReader; uses `self.file`)."""

    file: Any

    # -- runs -------------------------------------------------------------------------------

    def runs(self) -> list[tuple]:
        """(id, name, first and last microsecond, first step, number of steps) of every run, by id."""
        return self.file.query(
            "SELECT id, name, microseconds_start, microseconds_end, first_step, num_steps FROM runs ORDER BY id"
        )

    def run_cycles_by_ipu(self, run: int) -> list[tuple[Any, Any]]:
        """(start, end) of each IPU's cycle counter over a run, by IPU."""
        return self.file.query('SELECT start, "end" FROM run_cycles_by_ipu WHERE run = ? ORDER BY ipu', (run,))

    def run_parameters(self, run: int) -> list[tuple[Any, Any]]:
        """(name, value) of the options of a run, by name."""
        return self.file.query("SELECT name, value FROM run_parameters WHERE run = ? ORDER BY name", (run,))

    def cycle_totals(self, run: int | None = None) -> tuple:
        """Cycles summed over tiles, IPUs and replicas of one run or all, by CYCLE_ACTIVITIES (None when no rows)."""
        sums = ", ".join(f"sum({a})" for a in CYCLE_ACTIVITIES)
        if run is None:
            return self.file.query_one(f"SELECT {sums} FROM cycle_totals")
        return self.file.query_one(f"SELECT {sums} FROM cycle_totals WHERE run = ?", (run,))

    def blocks_of_tile(self, tile: int) -> list[tuple]:
        """(id, tile, program, first cycle, last cycle, stream copy, common, overflow) of a tile's blocks, in time order."""
        return self.file.query(
            "SELECT id, tile, program, cycles_from, cycles_to, is_stream_copy, is_common, is_overflow FROM blocks "
            "WHERE tile = ? ORDER BY cycles_from, id",
            (tile,),
        )

    # -- steps ------------------------------------------------------------------------------

    def step_count(self) -> tuple[int, Any, Any]:
        """(steps, lowest step id, highest step id); three queries, each on one of SQLite's fast paths."""
        (count,) = self.file.query_one("SELECT count(*) FROM steps")
        (low,) = self.file.query_one("SELECT min(id) FROM steps")
        (high,) = self.file.query_one("SELECT max(id) FROM steps")
        return count, low, high

    def step_column(self, column: str) -> list:
        """One column of steps ("type", "program", "name" or "compute_set") for every step, by id."""
        if column not in _STEP_COLUMNS:
            raise ValueError(f"steps has no column {column!r} to read whole; expected one of {sorted(_STEP_COLUMNS)}")
        (text,) = self.file.query_one(
            f"SELECT json_group_array({column}) FROM (SELECT {column} FROM steps ORDER BY id)"
        )
        return json.loads(text)

    def step_compute_set(self, step: int) -> Any:
        """The compute set a step executes as recorded in steps, or None."""
        row = self.file.query_one("SELECT compute_set FROM steps WHERE id = ?", (step,))
        return None if row is None else row[0]

    def step_compute_sets(self, step: int) -> list[tuple[Any, Any]]:
        """(compute set, row of its per-tile cycles) of each compute set a step executes, in order."""
        return self.file.query(
            "SELECT compute_set, cycles_row FROM step_compute_sets WHERE step_id = ? ORDER BY position", (step,)
        )

    def step_vertex_instances(self, step: int, compute_set: int) -> list[tuple]:
        """(vertex type, count, cycles, estimated cycles, count-by-tile row) executed in a step's compute set."""
        return self.file.query(
            "SELECT v.vertex_type, v.count, v.cycles, "
            "(SELECT c.estimated_cycles FROM compute_set_vertices c WHERE c.compute_set = v.compute_set "
            " AND c.vertex_type = v.vertex_type ORDER BY c.id LIMIT 1), "
            "(SELECT c.count_by_tile_row FROM compute_set_vertices c WHERE c.compute_set = v.compute_set "
            " AND c.vertex_type = v.vertex_type ORDER BY c.id LIMIT 1) "
            "FROM step_vertex_cycles v WHERE v.step_id = ? AND v.compute_set = ? ORDER BY v.vertex_type",
            (step, compute_set),
        )

    # -- per-IPU figures of steps -----------------------------------------------------------

    def step_ipu_figure(
        self, ipu: int, figure: str, *, step_types: Collection[str] | None = None, real: bool = False
    ) -> tuple[int, Any, Any, list]:
        """One STEP_IPU_FIGURES figure of an IPU for each step it has a row for, by step.

        Returns (rows, lowest step, highest step, values). Except for "profiled", steps not
        profiled read 0 (0.0 when `real`), and so do steps whose type is not in `step_types`.
        """
        expression = STEP_IPU_FIGURES[figure]
        params: list[Any] = []
        if figure != "profiled":
            condition = "profiled != 0"
            if step_types is not None:
                types = sorted(step_types)
                condition += f" AND step_id IN (SELECT id FROM steps WHERE type IN ({', '.join('?' * len(types))}))"
                params.extend(types)
            expression = f"CASE WHEN {condition} THEN {expression} ELSE {'0.0' if real else '0'} END"
        count, low, high, text = self.file.query_one(
            "SELECT count(*), min(step_id), max(step_id), json_group_array(v) FROM "
            f"(SELECT step_id, {expression} AS v FROM steps_by_ipu WHERE ipu = ? ORDER BY step_id)",
            (*params, ipu),
        )
        return count, low, high, json.loads(text)

    def step_ids_of_ipu(self, ipu: int) -> list:
        """The steps an IPU has a row of steps_by_ipu for, ascending."""
        (text,) = self.file.query_one(
            "SELECT json_group_array(step_id) FROM (SELECT step_id FROM steps_by_ipu WHERE ipu = ? ORDER BY step_id)",
            (ipu,),
        )
        return json.loads(text)

    def step_ipu_outside(self, num_ipus: int) -> tuple[Any, Any] | None:
        """(step, IPU) of a row of steps_by_ipu for an IPU outside 0..num_ipus-1, or None."""
        return self.file.query_one(
            "SELECT step_id, ipu FROM steps_by_ipu WHERE ipu < 0 OR ipu >= ? LIMIT 1", (num_ipus,)
        )
