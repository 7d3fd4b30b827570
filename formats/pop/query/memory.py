"""Memory and liveness aggregates: per tile, per category, per IPU, always-live and live variables."""

from __future__ import annotations

from collections.abc import Sequence

from .checks import typed

#: A program's label: its name, else its compute set's name, else "".
_PROGRAM_LABEL = "coalesce(nullif(p.name, ''), cs.name, '')"


def _tile_filter(tiles: Sequence[int] | None, column: str = "tile") -> tuple[str, tuple[int, ...]]:
    """A WHERE clause restricting `column` to the given tiles (none for all tiles), and its parameters."""
    if tiles is None:
        return "", ()
    return f" WHERE {column} IN ({','.join('?' * len(tiles))})", tuple(int(t) for t in tiles)


def _name(column: str, max_chars: int | None) -> str:
    """A text column, cut to `max_chars` characters when given."""
    return column if max_chars is None else f"substr({column}, 1, {int(max_chars)})"


class MemoryQueries:
    """Memory by tile, category and IPU, and variable liveness (a mixin of ProfileReader; uses `self.file`)."""

    # -- per tile -------------------------------------------------------------------------------

    def tile_memory(self) -> list[tuple]:
        """(tile, total, total_including_gaps, interleaved, non_interleaved, overflowed, always_live_bytes) by tile."""
        columns = (
            "tile",
            "total",
            "total_including_gaps",
            "interleaved",
            "non_interleaved",
            "overflowed",
            "always_live_bytes",
        )
        rows = self.file.query(f"SELECT {', '.join(columns)} FROM memory_by_tile ORDER BY tile")  # type: ignore[attr-defined]
        return typed(self.file.path, rows, *(f"memory_by_tile.{c}" for c in columns))  # type: ignore[attr-defined]

    def memory_totals(self) -> tuple:
        """(bytes including gaps, bytes excluding gaps, largest tile including gaps) over all tiles."""
        return self.file.query_one(  # type: ignore[attr-defined]
            "SELECT coalesce(sum(total_including_gaps), 0), coalesce(sum(total), 0), "
            "coalesce(max(total_including_gaps), 0) FROM memory_by_tile"
        )

    def always_live_bytes(self) -> int:
        """Always-live bytes summed over all tiles."""
        return self.file.query_one(  # type: ignore[attr-defined]
            "SELECT coalesce(sum(always_live_bytes), 0) FROM memory_by_tile"
        )[0]

    def tiles_over(self, limit: int) -> int:
        """Number of tiles whose memory including gaps exceeds `limit` bytes."""
        return self.file.query_one(  # type: ignore[attr-defined]
            "SELECT count(*) FROM memory_by_tile WHERE total_including_gaps > ?", (limit,)
        )[0]

    def memory_by_ipu(self, tiles_per_ipu: int) -> list[tuple]:
        """(IPU, bytes including gaps) for each IPU with tiles."""
        return self.file.query(  # type: ignore[attr-defined]
            "SELECT tile / ?, sum(total_including_gaps) FROM memory_by_tile GROUP BY tile / ?",
            (tiles_per_ipu, tiles_per_ipu),
        )

    # -- by category ----------------------------------------------------------------------------

    def category_id_names(self, max_chars: int | None = None) -> list[tuple[int, str]]:
        """(id, name) of every storage category, by id."""
        rows = self.file.query(  # type: ignore[attr-defined]
            f"SELECT id, {_name('name', max_chars)} FROM var_categories ORDER BY id"
        )
        return typed(self.file.path, rows, "var_categories.id", "var_categories.name")  # type: ignore[attr-defined]

    def memory_by_category_and_overlap(self) -> list[tuple]:
        """(category id, overlapped, bytes) summed over tiles."""
        return self.file.query(  # type: ignore[attr-defined]
            "SELECT category, overlapped, sum(total) FROM memory_by_category GROUP BY category, overlapped"
        )

    def memory_by_category_name(self) -> list[tuple[str, int]]:
        """(category name, bytes) summed over tiles and overlap."""
        return self.file.query(  # type: ignore[attr-defined]
            "SELECT c.name, sum(m.total) FROM memory_by_category m JOIN var_categories c ON c.id = m.category "
            "GROUP BY c.name"
        )

    # -- vertex memory --------------------------------------------------------------------------

    def vertex_memory_totals(self, tiles: Sequence[int] | None = None) -> tuple:
        """(vertex data, edge pointers, copy pointers, padding, descriptors) bytes, over the given tiles or all."""
        where, params = _tile_filter(tiles)
        return self.file.query_one(  # type: ignore[attr-defined]
            "SELECT coalesce(sum(vertex_data_bytes), 0), coalesce(sum(edge_ptr_bytes), 0), "
            "coalesce(sum(copy_ptr_bytes), 0), coalesce(sum(padding_bytes), 0), coalesce(sum(descriptor_bytes), 0) "
            f"FROM vertex_memory{where}",
            params,
        )

    def vertex_memory_by_type(
        self, tiles: Sequence[int] | None = None, max_chars: int | None = None
    ) -> list[tuple[str, int]]:
        """(vertex type name, code and data bytes), largest first, over the given tiles or all."""
        where, params = _tile_filter(tiles, "m.tile")
        rows = self.file.query(  # type: ignore[attr-defined]
            f"SELECT {_name('t.name', max_chars)}, sum(m.code_bytes + m.vertex_data_bytes + m.edge_ptr_bytes + "
            "m.copy_ptr_bytes + m.padding_bytes + m.descriptor_bytes) AS b FROM vertex_memory m JOIN vertex_types t "
            f"ON t.id = m.vertex_type{where} GROUP BY t.id ORDER BY b DESC, t.id",
            params,
        )
        return typed(self.file.path, rows, "vertex_types.name", None)  # type: ignore[attr-defined]

    # -- liveness -------------------------------------------------------------------------------

    def peak_not_always_live_bytes(self) -> int:
        """The largest not-always-live bytes of any liveness step (0 without steps)."""
        return self.file.query_one(  # type: ignore[attr-defined]
            "SELECT coalesce(max(not_always_live_bytes), 0) FROM liveness_steps"
        )[0]

    def always_live_variables(self, max_chars: int | None = None) -> list[tuple[str, int]]:
        """(variable name, always-live bytes over all tiles), by name."""
        rows = self.file.query(  # type: ignore[attr-defined]
            f"SELECT {_name('v.name', max_chars)} AS n, sum(a.b) FROM (SELECT var, sum(bytes) AS b "
            "FROM always_live_vars GROUP BY var) a JOIN variables v ON v.id = a.var GROUP BY n ORDER BY n"
        )
        return typed(self.file.path, rows, "variables.name", None)  # type: ignore[attr-defined]

    def liveness_step_summaries(self) -> list[tuple]:
        """(step id, program id or -1, depth, not-always-live bytes) of every liveness step, by id."""
        return self.file.query(  # type: ignore[attr-defined]
            "SELECT id, coalesce(program, -1), depth, not_always_live_bytes FROM liveness_steps ORDER BY id"
        )

    def liveness_step_ids(self) -> list[int]:
        """Ids of the liveness steps, in order."""
        return self.file.column("SELECT id FROM liveness_steps ORDER BY id")  # type: ignore[attr-defined]

    def liveness_steps_labelled(self, max_chars: int | None = None) -> list[tuple]:
        """(step id, depth, not-always-live bytes, program type, program or compute set name) by step id."""
        return self.file.query(  # type: ignore[attr-defined]
            "SELECT l.id, l.depth, l.not_always_live_bytes, p.type, "
            f"{_name(_PROGRAM_LABEL, max_chars)} "
            "FROM liveness_steps l LEFT JOIN programs p ON p.id = l.program "
            "LEFT JOIN compute_sets cs ON cs.compute_set = p.compute_set ORDER BY l.id"
        )

    def not_always_live_bytes_by_class(self, max_chars: int | None = None) -> list[tuple[int, str, int]]:
        """(equivalence class, variable name, bytes) of the variables that are not always live.

        Lowered variables are named after their unlowered variable when they have one.
        """
        lowered = _name("name", max_chars)
        return self.file.query(  # type: ignore[attr-defined]
            f"SELECT g.cls, {_name('coalesce(v.name, g.lname)', max_chars)} AS n, sum(g.b) FROM "
            "(SELECT equivalence_class AS cls, unlowered_var AS uv, CASE WHEN unlowered_var IS NULL THEN "
            f"{lowered} END AS lname, sum(size_bytes) AS b FROM vars_info WHERE always_live = 0 "
            "GROUP BY cls, uv, lname) g LEFT JOIN variables v ON v.id = g.uv GROUP BY g.cls, n"
        )

    def equivalence_class_intervals(self) -> list[tuple[int, int, int]]:
        """(class, first step, end step) of every interval in which an equivalence class is live, by start."""
        return self.file.query(  # type: ignore[attr-defined]
            'SELECT class, start, "end" FROM equivalence_class_steps ORDER BY start'
        )

    def live_variables_at_step(self, step: int, limit: int) -> list[tuple[str, int]]:
        """The `limit` largest not-always-live variables live in a liveness step: (name, bytes over all tiles)."""
        return self.file.query(  # type: ignore[attr-defined]
            "SELECT coalesce(v.name, l.name) AS n, sum(l.size_bytes) AS b FROM vars_info l "
            "LEFT JOIN variables v ON v.id = l.unlowered_var WHERE l.always_live = 0 AND l.equivalence_class IN "
            '(SELECT class FROM equivalence_class_steps WHERE start <= ? AND "end" > ?) '
            "GROUP BY n ORDER BY b DESC, n LIMIT ?",
            (int(step), int(step), int(limit)),
        )
