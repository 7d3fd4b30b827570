"""Queries of the compilation report: target, graph, programs, variables, memory, liveness, debug."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

#: Columns of vars_info in the order of every lowered-variable row the queries return.
LOWERED_VARIABLE_COLUMNS = (
    "id",
    "tile",
    "name",
    "size_bytes",
    "alignment",
    "offset",
    "category",
    "allocated",
    "constant",
    "always_live",
    "executable",
    "vertex_code",
    "lowest_256k",
    "start_section",
    "in_interleaved_mem",
    "accessed_in_vertex",
    "equivalence_class",
    "unlowered_var",
)
_LOWERED = f"SELECT {', '.join(LOWERED_VARIABLE_COLUMNS)} FROM vars_info"

#: Columns of programs beyond id, type and name, in the order `program_details` returns them.
PROGRAM_DETAIL_COLUMNS = ("compute_set", "repeat_count", "sync_type", "stream_copy_type", "call_target", "num_tiles")

#: A lowered variable (alias v) that is allocated, not always live, and live in step ?1.
_LIVE = (
    "v.allocated = 1 AND v.always_live = 0 AND v.equivalence_class IN "
    '(SELECT class FROM equivalence_class_steps WHERE start <= ?1 AND "end" > ?1)'
)

#: Ids of more than this many lowered variables are asked for in several queries.
_IDS_PER_QUERY = 500


class CompilationQueries:
    """Questions about what was compiled (a mixin of ProfileReader; uses `self.file`)."""

    file: Any
    path: str
    _table_name: Callable[[str], str]  # from AnalysisQueries

    # -- the whole file ---------------------------------------------------------------------

    def row_count(self, table: str) -> int:
        """How many rows a table of the report has."""
        return self.file.query_one(f'SELECT count(*) FROM "{self._table_name(table)}"')[0]

    def matrix_storage(self) -> list[tuple]:
        """(name, rows, columns, chunks, bytes stored) of every per-tile matrix, by name."""
        return self.file.query(
            "SELECT m.name, m.num_rows, m.num_cols, count(c.first_row), coalesce(sum(length(c.data)), 0) "
            "FROM matrices m LEFT JOIN matrix_chunks c ON c.matrix = m.name GROUP BY m.name ORDER BY m.name"
        )

    # -- graph, target and hardware ---------------------------------------------------------

    def optimisation_metrics(self) -> list[tuple[str, Any]]:
        """(name, value) of every graph optimisation metric."""
        return self.file.query("SELECT name, value FROM optimisation_metrics")

    def compilation_parameters(self) -> list[tuple[str, Any]]:
        """(name, value) of every compilation option, by name."""
        return self.file.query("SELECT name, value FROM compilation_parameters ORDER BY name")

    def target_parameters(self) -> list[tuple[str, Any]]:
        """(name, value) of every target parameter, by name."""
        return self.file.query("SELECT name, value FROM target_parameters ORDER BY name")

    def ipu_architectures(self) -> list[tuple[Any, Any]]:
        """(IPU id, architecture name) of every IPU the ipus table lists."""
        return self.file.query("SELECT id, architecture FROM ipus")

    def tile_clocks(self) -> list[tuple[Any, Any, Any]]:
        """(tile, relative sync delay, clock frequency) of every tile the tiles table lists."""
        return self.file.query("SELECT id, relative_sync_delay, clock_frequency FROM tiles")

    # -- memory -----------------------------------------------------------------------------

    def memory_by_tile_extent(self) -> tuple[int, Any, Any]:
        """(rows, lowest tile, highest tile) of memory_by_tile."""
        return self.file.query_one("SELECT count(*), min(tile), max(tile) FROM memory_by_tile")

    def memory_by_tile_columns(self, columns: Sequence[str], *, with_tile: bool = False) -> list[tuple]:
        """Rows of the given memory_by_tile columns: by tile, or (with `with_tile`) in any order led by the tile."""
        known = self.file.tables["memory_by_tile"]
        unknown = [c for c in columns if c not in known]
        if unknown or not columns:
            raise ValueError(f"memory_by_tile has no column(s) {unknown or columns!r}")
        listed = ", ".join(columns)
        if with_tile:
            return self.file.query(f"SELECT tile, {listed} FROM memory_by_tile")
        return self.file.query(f"SELECT {listed} FROM memory_by_tile ORDER BY tile")

    def vertex_memory_of_tile(self, tile: int) -> list[tuple]:
        """(vertex type, code, copy pointer, descriptor, edge pointer, padding, vertex data bytes) on a tile."""
        return self.file.query(
            "SELECT vertex_type, code_bytes, copy_ptr_bytes, descriptor_bytes, edge_ptr_bytes, padding_bytes, "
            "vertex_data_bytes FROM vertex_memory WHERE tile = ? ORDER BY vertex_type",
            (tile,),
        )

    def category_rows(self) -> list[tuple[Any, Any, Any]]:
        """(id, name, description) of every variable category."""
        return self.file.query("SELECT id, name, description FROM var_categories")

    def category_names(self) -> list:
        """Variable category names, by id."""
        return self.file.column("SELECT name FROM var_categories ORDER BY id")

    # -- compute sets and vertices ----------------------------------------------------------

    def compute_sets(self) -> list[tuple[Any, Any, Any]]:
        """(compute set id, name, row of its estimated cycles) of every compute set, by id."""
        return self.file.query("SELECT compute_set, name, estimated_cycles_row FROM compute_sets ORDER BY compute_set")

    def compute_set_vertices(self, compute_set: int) -> list[tuple[int, int, int, int | None]]:
        """(vertex type, count, estimated cycles, count-by-tile row) of a compute set's vertex types."""
        return self.file.query(
            "SELECT vertex_type, count, estimated_cycles, count_by_tile_row FROM compute_set_vertices "
            "WHERE compute_set = ? ORDER BY id",
            (compute_set,),
        )

    def vertex_count_rows(self) -> list:
        """Every row of vertex_count_by_tile that compute_set_vertices refers to."""
        return self.file.column(
            "SELECT count_by_tile_row FROM compute_set_vertices WHERE count_by_tile_row IS NOT NULL"
        )

    def vertex_types(self) -> list[tuple[Any, Any, Any, Any]]:
        """(id, name, size, source) of every vertex type."""
        return self.file.query("SELECT id, name, size, source FROM vertex_types")

    def compute_set_variable_ids(self, compute_set: int) -> list:
        """Ids of the lowered variables a compute set uses, ascending."""
        return self.file.column("SELECT var FROM compute_set_vars WHERE compute_set = ? ORDER BY var", (compute_set,))

    def lowered_variables_of_compute_set(self, compute_set: int) -> list[tuple]:
        """Lowered-variable rows (LOWERED_VARIABLE_COLUMNS) of the variables a compute set uses, by id."""
        return self.file.query(
            f"{_LOWERED} WHERE id IN (SELECT var FROM compute_set_vars WHERE compute_set = ?) ORDER BY id",
            (compute_set,),
        )

    # -- programs ---------------------------------------------------------------------------

    def program_id_range(self) -> tuple[int, Any, Any, bool]:
        """(programs, lowest id, highest id, whether ids are unique integers), each on a fast path of SQLite."""
        (count,) = self.file.query_one("SELECT count(*) FROM programs")
        (low,) = self.file.query_one("SELECT min(id) FROM programs")
        (high,) = self.file.query_one("SELECT max(id) FROM programs")
        keys = self.file.query("SELECT name, upper(type) FROM pragma_table_info('programs') WHERE pk > 0")
        return count, low, high, keys == [("id", "INTEGER")]

    def program_types(self, count: int) -> list:
        """The type name of every one of the `count` programs, by id ("" where it is not text), read as one
        string and split; where a name holds the separator (no program type does) the split gives another
        count, and the names are read as a JSON array instead."""
        (text,) = self.file.query_one(
            "SELECT group_concat(CASE WHEN typeof(type) = 'text' THEN type ELSE '' END, char(31)) "
            "FROM (SELECT type FROM programs ORDER BY id)"
        )
        names = text.split("\x1f") if text is not None else []
        if len(names) == count:
            return names
        (text,) = self.file.query_one(
            "SELECT json_group_array(CASE WHEN typeof(type) = 'text' THEN type ELSE '' END) "
            "FROM (SELECT type FROM programs ORDER BY id)"
        )
        return json.loads(text)

    def program_kinds(self) -> list[tuple[Any, Any]]:
        """(id, type name) of every program, by id."""
        return self.file.query("SELECT id, type FROM programs ORDER BY id")

    def program_names(self) -> list:
        """The name of every program, by id."""
        return self.file.column("SELECT name FROM programs ORDER BY id")

    def program_details(self) -> list[tuple]:
        """PROGRAM_DETAIL_COLUMNS of every program, by id."""
        return self.file.query(f"SELECT {', '.join(PROGRAM_DETAIL_COLUMNS)} FROM programs ORDER BY id")

    def program_children(self) -> Iterator[tuple[Any, Any]]:
        """(parent, child) of every program edge, by parent then position."""
        return self.file.iterate("SELECT parent, child FROM program_children ORDER BY parent, position")

    def program_vector_row(self, program: int, kind: str) -> Any:
        """The matrix row of one per-tile vector of a program, or None when not recorded."""
        row = self.file.query_one("SELECT row FROM program_vectors WHERE program = ? AND kind = ?", (program, kind))
        return None if row is None else row[0]

    def program_vector_rows(self) -> Iterator[tuple[Any, Any, Any]]:
        """(program, kind, matrix row) of every per-tile vector of a program."""
        return self.file.iterate("SELECT program, kind, row FROM program_vectors")

    def control_program_ids(self) -> list:
        """Ids of the control programs, in order."""
        return self.file.column("SELECT program FROM control_programs ORDER BY position")

    def function_program_ids(self) -> list:
        """Ids of the functions (programs that Call programs call), in order."""
        return self.file.column("SELECT program FROM function_programs ORDER BY position")

    def lowered_variables_of_program(self, program: int) -> list[tuple]:
        """Lowered-variable rows (LOWERED_VARIABLE_COLUMNS) of the variables a program uses, by id."""
        return self.file.query(
            f"{_LOWERED} WHERE id IN (SELECT var FROM program_vars WHERE program = ?) ORDER BY id", (program,)
        )

    # -- variables --------------------------------------------------------------------------

    def variables(self) -> list[tuple[Any, Any]]:
        """(id, name) of every unlowered variable, by id."""
        return self.file.query("SELECT id, name FROM variables ORDER BY id")

    def variable_name(self, var_id: int) -> Any:
        """The name of an unlowered variable, or None when there is no such variable."""
        row = self.file.query_one("SELECT name FROM variables WHERE id = ?", (var_id,))
        return None if row is None else row[0]

    def artificial_variable_names(self) -> list:
        """Distinct names of the lowered variables without an unlowered variable, sorted."""
        return self.file.column("SELECT DISTINCT name FROM vars_info WHERE unlowered_var IS NULL ORDER BY name")

    def lowered_variable_count(self) -> int:
        """How many lowered variables the report has."""
        return self.file.query_one("SELECT count(*) FROM vars_info")[0]

    def lowered_variable(self, var_id: int) -> tuple | None:
        """The row (LOWERED_VARIABLE_COLUMNS) of one lowered variable, or None."""
        return self.file.query_one(f"{_LOWERED} WHERE id = ?", (var_id,))

    def lowered_variables_by_id(self, ids: Sequence[int]) -> Iterator[tuple]:
        """Rows (LOWERED_VARIABLE_COLUMNS) of the lowered variables with the given ids, in any order."""
        for start in range(0, len(ids), _IDS_PER_QUERY):
            chunk = list(ids[start : start + _IDS_PER_QUERY])
            yield from self.file.query(f"{_LOWERED} WHERE id IN ({', '.join('?' * len(chunk))})", chunk)

    def lowered_variables_on_tile(self, tile: int) -> list[tuple]:
        """Rows (LOWERED_VARIABLE_COLUMNS) of the lowered variables on a tile, in allocation order."""
        return self.file.query(f"{_LOWERED} WHERE tile = ? ORDER BY alloc_order, id", (tile,))

    def lowered_variable_briefs_on_tile(self, tile: int) -> list[tuple]:
        """(id, tile, bytes) of the lowered variables on a tile, in allocation order."""
        return self.file.query(
            "SELECT id, tile, size_bytes FROM vars_info WHERE tile = ? ORDER BY alloc_order, id", (tile,)
        )

    def lowered_variables_of_variable(self, var_id: int) -> list[tuple]:
        """Rows (LOWERED_VARIABLE_COLUMNS) of the lowered pieces of an unlowered variable, by id."""
        return self.file.query(f"{_LOWERED} WHERE unlowered_var = ? ORDER BY id", (var_id,))

    def lowered_variables_named(self, name: str) -> list[tuple]:
        """Rows (LOWERED_VARIABLE_COLUMNS) of the lowered variables called `name` that have no unlowered variable."""
        return self.file.query(f"{_LOWERED} WHERE unlowered_var IS NULL AND name = ? ORDER BY id", (name,))

    def lowered_variable_briefs(self) -> Iterator[tuple[Any, Any, Any, Any]]:
        """(id, bytes, tile, equivalence class) of every lowered variable, by id."""
        return self.file.iterate("SELECT id, size_bytes, tile, equivalence_class FROM vars_info ORDER BY id")

    def lowered_variable_constraints(self, var_id: int, kind: str) -> list:
        """Ids of the lowered variables that may not share a memory `kind` ("element" or "region") with one."""
        return self.file.column(
            "SELECT other FROM lowered_var_constraints WHERE var = ? AND kind = ? ORDER BY other", (var_id, kind)
        )

    def equivalence_class_steps_of(self, classes: Sequence[int]) -> list[tuple[Any, Any, Any]]:
        """(class, first step, step after the last) of the live intervals of some classes (given in
        ascending order), by class then start."""
        found: list[tuple[Any, Any, Any]] = []
        for start in range(0, len(classes), _IDS_PER_QUERY):
            chunk = list(classes[start : start + _IDS_PER_QUERY])
            marks = ", ".join("?" * len(chunk))
            found += self.file.query(
                f'SELECT class, start, "end" FROM equivalence_class_steps WHERE class IN ({marks}) ORDER BY class, start',
                chunk,
            )
        return found

    def equivalence_class_steps(self) -> Iterator[tuple[Any, Any, Any]]:
        """(class, first step, step after the last) of every live interval, by class then start."""
        return self.file.iterate('SELECT class, start, "end" FROM equivalence_class_steps ORDER BY class, start')

    def allocation_order(self) -> Iterator[tuple[Any, Any]]:
        """(tile, lowered variable id) of every lowered variable, by tile in allocation order."""
        return self.file.iterate("SELECT tile, id FROM vars_info ORDER BY tile, alloc_order, id")

    # -- liveness ---------------------------------------------------------------------------

    def always_live_bytes_by_variable(self) -> list[tuple[Any, Any]]:
        """(variable id or None, bytes summed over the tiles of a replica) of every always-live variable."""
        return self.file.query("SELECT var, sum(bytes) FROM always_live_vars GROUP BY var")

    def always_live_variables_on_tile(self, tile: int) -> list[tuple[Any, Any]]:
        """(variable id or None, bytes) of the always-live variables on a tile."""
        return self.file.query("SELECT var, bytes FROM always_live_vars WHERE tile = ?", (tile,))

    def always_live_variables_by_tile(self) -> Iterator[tuple[Any, Any, Any]]:
        """(tile, variable id or None, bytes) of every always-live variable, in table order."""
        return self.file.iterate("SELECT tile, var, bytes FROM always_live_vars")

    def liveness_steps(self) -> list[tuple[Any, Any, Any]]:
        """(step, program, not-always-live bytes) of every liveness program step, by step."""
        return self.file.query("SELECT id, program, not_always_live_bytes FROM liveness_steps ORDER BY id")

    def liveness_step_count(self) -> int:
        """The number of liveness program steps."""
        row = self.file.query_one("SELECT count(*) FROM liveness_steps")
        return int(row[0]) if row else 0

    def liveness_tiles(self) -> list:
        """The tiles with per-tile liveness information."""
        return self.file.column("SELECT tile FROM liveness_tiles")

    def liveness_bytes_of_ipu(self, step: int, ipu: int) -> Any:
        """Not-always-live bytes of a step on an IPU as recorded, or None when not recorded."""
        row = self.file.query_one("SELECT bytes FROM liveness_step_ipus WHERE step = ? AND ipu = ?", (step, ipu))
        return None if row is None else row[0]

    def not_always_live_bytes(self, step: int, *, tiles: tuple[int, int] | None = None) -> Any:
        """Bytes of the lowered variables live but not always live in a step, on tiles lo..hi-1 or all."""
        params: tuple[int, ...]
        if tiles is None:
            where, params = "", (step,)
        elif tiles[1] == tiles[0] + 1:
            where, params = "v.tile = ?2 AND ", (step, tiles[0])
        else:
            where, params = "v.tile >= ?2 AND v.tile < ?3 AND ", (step, *tiles)
        return self.file.query_one(
            f"SELECT coalesce(sum(v.size_bytes), 0) FROM vars_info v WHERE {where}{_LIVE}", params
        )[0]

    def not_always_live_bytes_of_variable(self, step: int, var_id: int) -> Any:
        """Bytes of an unlowered variable live but not always live in a step."""
        return self.file.query_one(
            f"SELECT coalesce(sum(v.size_bytes), 0) FROM vars_info v WHERE v.unlowered_var = ?2 AND {_LIVE}",
            (step, var_id),
        )[0]

    def not_always_live_bytes_named(self, step: int, name: str) -> Any:
        """Bytes of the lowered variables called `name` without an unlowered variable, live but not always live."""
        return self.file.query_one(
            f"SELECT coalesce(sum(v.size_bytes), 0) FROM vars_info v WHERE v.unlowered_var IS NULL AND v.name = ?2 "
            f"AND {_LIVE}",
            (step, name),
        )[0]

    def not_always_live_pieces(
        self, *, tile: int | None = None, var_id: int | None = None, name: str | None = None
    ) -> list[tuple[Any, Any, Any, Any]]:
        """(bytes, equivalence class, unlowered id or None, name) of the allocated lowered variables that are
        not always live: those on a tile, those of an unlowered variable, or those called `name` without one."""
        params: tuple[Any, ...]
        if tile is not None:
            where, params = "tile = ?", (tile,)
        elif var_id is not None:
            where, params = "unlowered_var = ?", (var_id,)
        elif name is not None:
            where, params = "unlowered_var IS NULL AND name = ?", (name,)
        else:
            raise TypeError("not_always_live_pieces needs a tile, var_id or name")
        return self.file.query(
            f"SELECT size_bytes, equivalence_class, unlowered_var, name FROM vars_info "
            f"WHERE {where} AND allocated = 1 AND always_live = 0",
            params,
        )

    def every_not_always_live_piece(self) -> Iterator[tuple[Any, Any, Any]]:
        """(tile, equivalence class, bytes) of every allocated lowered variable that is not always live."""
        return self.file.iterate(
            "SELECT tile, equivalence_class, size_bytes FROM vars_info WHERE allocated = 1 AND always_live = 0"
        )

    def every_liveness_ipu_bytes(self) -> Iterator[tuple[Any, Any, Any]]:
        """(step, IPU, not-always-live bytes) of every step and IPU recorded."""
        return self.file.iterate("SELECT step, ipu, bytes FROM liveness_step_ipus")

    def liveness_ipu_bytes(self, step: int) -> list[tuple[Any, Any]]:
        """(IPU, not-always-live bytes) of a step on each IPU recorded."""
        return self.file.query("SELECT ipu, bytes FROM liveness_step_ipus WHERE step = ?", (step,))

    def not_always_live_variables(self, step: int, *, tiles: tuple[int, int] | None = None) -> list[tuple]:
        """(unlowered id or None, lowered name, bytes) live but not always live in a step, on tiles lo..hi-1 or all.

        Pieces of one unlowered variable are summed; pieces without one are summed by name.
        """
        params: tuple[int, ...]
        if tiles is None:
            where, params = "", (step,)
        elif tiles[1] == tiles[0] + 1:
            where, params = " AND v.tile = ?2", (step, tiles[0])
        else:
            where, params = " AND v.tile >= ?2 AND v.tile < ?3", (step, *tiles)
        return self.file.query(
            f"SELECT v.unlowered_var, v.name, sum(v.size_bytes) FROM vars_info v WHERE {_LIVE}{where} "
            "GROUP BY v.unlowered_var, CASE WHEN v.unlowered_var IS NULL THEN v.name END",
            params,
        )

    # -- debug information ------------------------------------------------------------------

    def debug_context_refs(self) -> Iterator[tuple[Any, Any, Any]]:
        """(kind, object id, debug context id) of every reference, by kind, object and context."""
        return self.file.iterate(
            "SELECT kind, object, debug_context FROM debug_context_refs ORDER BY kind, object, debug_context"
        )
