"""Full validation of a profile.pop file: storage, schema, Arrow chunks and cross-table invariants."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Collection, Iterator

import numpy as np

from ..atomic import stale_temporaries
from ..errors import (
    NotAFileError,
    NotAReportError,
    PvaError,
    ReportNotFoundError,
    ReportPermissionError,
    UnsupportedVersionError,
)
from ..progress import Progress
from .arrow_chunks import decode_chunk
from .reader import ProfileReader
from .schema import profile_matrices, profile_schema

#: Largest number of problems of one kind listed before they are summarised.
MAX_PER_CHECK = 20


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong with a report: which check found it, where, and what."""

    check: str
    location: str
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.message} [{self.check}]"


class _Collector:
    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self._counts: dict[str, int] = {}

    def add(self, check: str, location: str, message: str) -> None:
        count = self._counts.get(check, 0) + 1
        self._counts[check] = count
        if count <= MAX_PER_CHECK:
            self.problems.append(Problem(check, location, message))
        elif count == MAX_PER_CHECK + 1:
            self.problems.append(Problem(check, "...", "more problems of this kind are not listed"))


def check_report(
    path: str | os.PathLike[str],
    progress: Progress | Callable[[str], None] | None = None,
    *,
    quick: bool = False,
    only: Collection[str] | None = None,
) -> list[Problem]:
    """Every problem found in the report at `path`; an empty list means it is valid.

    A file that is a damaged report gives a single problem with the open error's message; a path
    that does not exist, is a directory, cannot be read, is not a report or is of a newer format
    raises that error instead. With `quick`, only the structure and the counts are checked (every
    table and column present, every stored count against the rows it counts, every matrix's
    declared shape against its table and its chunk index): seconds, whatever the report's size.
    `only` names the checks to run instead (STRUCTURE_CHECKS: the storage is sound, with SQLite's
    quick_check in place of the full integrity check). `progress` is a `Progress` bar (advanced by the bytes of the chunks decoded) or a callable
    given each check's name.
    """
    out = _Collector()
    try:
        reader = ProfileReader(path)
    except (ReportNotFoundError, NotAFileError, ReportPermissionError, NotAReportError, UnsupportedVersionError):
        raise
    except PvaError as exc:
        return [Problem("open", os.fspath(path), _without_path(str(exc), os.fspath(path)))]
    bar = progress if isinstance(progress, Progress) else None
    if bar is not None:
        bar.start("checking", reader.file.file_size)
    try:
        if only is not None:
            checks = [c for c in _ALL_CHECKS if c[0] in only]
        else:
            checks = _QUICK_CHECKS if quick else _CHECKS
        if only is None or "planted" in only:
            generated = _planted(reader, out)
            if generated:  # SQLite's integrity checks compute every generated column: never run them here
                checks = [c for c in checks if c[0] not in ("integrity", "quick-integrity")]
                out.add(
                    "planted",
                    "sqlite",
                    f"integrity check not run: it would evaluate the generated column(s) {', '.join(generated[:5])}",
                )
        for name, check in checks:
            if callable(progress) and bar is None:
                progress(name)
            if bar is not None:
                bar.label = f"checking {name}"
            try:
                if name == "matrices":
                    check(reader, out, bar)
                else:
                    check(reader, out)
            except PvaError as exc:
                out.add(name, reader.path, _without_path(str(exc), reader.path))
            if name == "schema" and any(p.check in ("integrity", "schema") for p in out.problems):
                out.add("schema", reader.path, "the checks that rely on the schema were skipped")
                break
    finally:
        if bar is not None:
            bar.finish()
        reader.close()
    return out.problems


def check_notes(path: str | os.PathLike[str]) -> list[str]:
    """What `pva check` mentions beside problems: the journal mode, temporaries left by killed writers."""
    path = os.fspath(path)
    notes: list[str] = []
    try:
        with open(path, "rb") as handle:
            head = handle.read(100)
    except OSError:
        return notes
    if len(head) == 100 and (head[18] == 2 or head[19] == 2):
        notes.append("journal mode: wal (pva reads it without writing -wal or -shm files beside it)")
    for left in stale_temporaries(path):
        notes.append(
            f"{os.path.basename(left)}: a temporary left by a writer that was killed; the next write "
            f"to {os.path.basename(path)} removes it"
        )
    return notes


def _without_path(message: str, path: str) -> str:
    """A message without its leading quoted path (the problem's location names it already)."""
    prefix = f"{path!r}: "
    return message.removeprefix(prefix)


#: The storage classes (SQLite typeof) each declared column type may hold.
_STORED_TYPES = {"INTEGER": ("integer",), "REAL": ("real", "integer"), "TEXT": ("text",), "BLOB": ("blob",)}


def _planted(reader: ProfileReader, out: _Collector) -> list[str]:
    """Flag what no pva writer makes and no pva reader runs: generated columns, views and triggers.

    Returns the generated columns (table.column). Only the schema is read: nothing planted is evaluated.
    """
    generated = []
    for kind, name, table in reader.query("SELECT type, name, tbl_name FROM sqlite_master ORDER BY rowid"):
        if kind in ("view", "trigger"):
            where = f" on table {table}" if kind == "trigger" else ""
            out.add("planted", f"{kind} {name}{where}", "is not part of the format; pva never runs it")
        elif kind == "table":
            for column, hidden in reader.query(
                "SELECT name, hidden FROM pragma_table_xinfo(?) WHERE hidden IN (2, 3)", (name,)
            ):
                generated.append(f"{name}.{column}")
                out.add(
                    "planted",
                    f"table {name}",
                    f"column {column} is a generated ({'VIRTUAL' if hidden == 2 else 'STORED'}) column, not part "
                    f"of the format; pva never reads it",
                )
    return generated


def _integrity(reader: ProfileReader, out: _Collector) -> None:
    rows = reader.column("PRAGMA integrity_check(100)")
    if rows != ["ok"]:
        for row in rows:
            out.add("integrity", "sqlite", str(row))


def _quick_integrity(reader: ProfileReader, out: _Collector) -> None:
    rows = reader.column("PRAGMA quick_check(100)")
    if rows != ["ok"]:
        for row in rows:
            out.add("integrity", "sqlite", str(row))


def _schema(reader: ProfileReader, out: _Collector) -> None:
    schema = profile_schema()
    for name, spec in schema.tables.items():
        info = {row[1]: row for row in reader.query(f'PRAGMA table_info("{name}")')}
        for column in spec.columns:
            row = info.get(column.name)
            if row is None:
                out.add("schema", f"table {name}", f"column {column.name} is missing")
            elif row[2].upper() != column.type:
                out.add("schema", f"table {name}", f"column {column.name} is {row[2]}, expected {column.type}")
        for column in spec.columns:
            if column.not_null and column.name in info:
                nulls = reader.query_row(f'SELECT count(*) FROM "{name}" WHERE "{column.name}" IS NULL')[0]
                if nulls:
                    out.add("schema", f"table {name}", f"column {column.name} has {nulls} NULL value(s)")
            stored = _STORED_TYPES.get(column.type)
            if stored is not None and column.name in info:
                allowed = ", ".join(f"'{t}'" for t in stored)
                bad = reader.query_row(
                    f'SELECT count(*) FROM "{name}" WHERE "{column.name}" IS NOT NULL '
                    f'AND typeof("{column.name}") NOT IN ({allowed})'
                )[0]
                if bad:
                    out.add("schema", f"table {name}", f"column {column.name} has {bad} non-{stored[0]} value(s)")
    for index in schema.indexes:
        if reader.query_one("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (index,)) is None:
            out.add("schema", f"index {index}", "is missing")


def _matrices(reader: ProfileReader, out: _Collector, bar: Progress | None = None) -> None:
    declared = profile_matrices()["matrices"]
    for name, num_rows, num_cols, rows_per_chunk in reader.query(
        "SELECT name, num_rows, num_cols, rows_per_chunk FROM matrices ORDER BY name"
    ):
        where = f"matrix {name}"
        if name not in declared:
            out.add("matrices", where, "is not declared in profile_matrices.json (newer minor version?)")
            continue
        try:
            matrix = reader.matrix(name)
        except PvaError as exc:
            out.add("matrices", where, str(exc))
            continue
        if matrix is None:
            continue
        expected_first = 0
        for first, count, codec, raw_size, data in _chunks(reader, name):
            if first != expected_first or count != min(rows_per_chunk, num_rows - expected_first):
                out.add(
                    "matrices",
                    f"{where} chunk at row {first}",
                    f"expected {min(rows_per_chunk, num_rows - expected_first)} rows at row {expected_first}, "
                    f"found {count}",
                )
                expected_first = first
            if bar is not None and isinstance(data, bytes):
                bar.advance(len(data))
            try:
                decode_chunk(
                    data,
                    codec=codec,
                    raw_size=raw_size,
                    matrix=name,
                    first_row=first,
                    num_rows=count,
                    num_cols=num_cols,
                    path=reader.path,
                )
            except PvaError as exc:
                out.add("matrices", f"{where} chunk at row {first}", str(exc).split(": ", 1)[-1])
            expected_first += count
        if expected_first != num_rows:
            out.add("matrices", where, f"declares {num_rows} rows, its chunks hold {expected_first}")


def _chunks(reader: ProfileReader, name: str) -> Iterator[tuple[int, int, str, int, bytes]]:
    firsts = reader.column("SELECT first_row FROM matrix_chunks WHERE matrix = ? ORDER BY first_row", (name,))
    for first in firsts:
        row = reader.query_row(
            "SELECT first_row, num_rows, codec, raw_size, data FROM matrix_chunks WHERE matrix = ? AND first_row = ?",
            (name, first),
        )
        yield row


#: (table, column, referenced table, referenced column, condition) pairs that must resolve.
_REFERENCES = [
    ("compute_set_vertices", "compute_set", "compute_sets", "compute_set", ""),
    ("compute_set_vertices", "vertex_type", "vertex_types", "id", ""),
    ("compute_set_vars", "compute_set", "compute_sets", "compute_set", ""),
    ("compute_set_vars", "var", "vars_info", "id", ""),
    ("programs", "compute_set", "compute_sets", "compute_set", ""),
    ("programs", "call_target", "programs", "id", ""),
    ("program_children", "parent", "programs", "id", ""),
    ("program_children", "child", "programs", "id", ""),
    ("control_programs", "program", "programs", "id", ""),
    ("function_programs", "program", "programs", "id", ""),
    ("program_vectors", "program", "programs", "id", ""),
    ("program_vars", "program", "programs", "id", ""),
    ("program_vars", "var", "vars_info", "id", ""),
    ("vars_info", "category", "var_categories", "id", ""),
    ("vars_info", "unlowered_var", "variables", "id", ""),
    ("lowered_var_constraints", "var", "vars_info", "id", ""),
    ("lowered_var_constraints", "other", "vars_info", "id", ""),
    ("memory_by_category", "category", "var_categories", "id", ""),
    ("vertex_memory", "vertex_type", "vertex_types", "id", ""),
    ("liveness_steps", "program", "programs", "id", ""),
    ("liveness_steps", "parent", "liveness_steps", "id", ""),
    ("liveness_step_ipus", "step", "liveness_steps", "id", ""),
    ("always_live_vars", "var", "variables", "id", ""),
    ("steps", "run", "runs", "id", ""),
    ("steps", "program", "programs", "id", ""),
    ("steps", "compute_set", "compute_sets", "compute_set", ""),
    ("steps_by_ipu", "step_id", "steps", "id", ""),
    ("steps_by_ipu", "ipu", "ipus", "id", ""),
    ("step_compute_sets", "step_id", "steps", "id", ""),
    ("step_compute_sets", "compute_set", "compute_sets", "compute_set", ""),
    ("step_vertex_cycles", "step_id", "steps", "id", ""),
    ("step_vertex_cycles", "vertex_type", "vertex_types", "id", ""),
    ("run_cycles_by_ipu", "run", "runs", "id", ""),
    ("run_cycles_by_ipu", "ipu", "ipus", "id", ""),
    ("cycle_totals", "run", "runs", "id", ""),
    ("cycle_totals", "ipu", "ipus", "id", ""),
    ("blocks", "program", "programs", "id", ""),
    ("ipus", "replica", "replicas", "id", ""),
    ("tiles", "ipu", "ipus", "id", ""),
    ("compute_set_memory", "compute_set", "compute_sets", "compute_set", ""),
    ("vertex_cycles", "compute_set", "compute_sets", "compute_set", ""),
    ("vertex_cycles", "vertex_type", "vertex_types", "id", ""),
    ("compile_estimates", "compute_set", "compute_sets", "compute_set", ""),
]

#: (table, row column, matrix) triples: row numbers that must exist in the matrix.
_ROW_REFERENCES = [
    ("compute_sets", "estimated_cycles_row", "compute_set_estimated_cycles_by_tile", ""),
    ("compute_sets", "active_cycles_row", "compute_set_active_cycles_by_tile", ""),
    ("compute_set_vertices", "count_by_tile_row", "vertex_count_by_tile", ""),
    ("step_compute_sets", "cycles_row", "step_compute_set_cycles_by_tile", ""),
]
#: Kinds of per-program vectors, each a matrix program_<kind>_by_tile.
_VECTOR_KINDS = (
    "control_code",
    "bytes_received",
    "bytes_sent",
    "estimated_cycles",
    "exchange_cycles",
    "sync_cycles",
    "code_bytes",
)


def _references(reader: ProfileReader, out: _Collector) -> None:
    for table, column, target, target_column, _ in _REFERENCES:
        rows = reader.query(
            f'SELECT DISTINCT t."{column}" FROM "{table}" t WHERE t."{column}" IS NOT NULL AND NOT EXISTS '
            f'(SELECT 1 FROM "{target}" r WHERE r."{target_column}" = t."{column}") LIMIT {MAX_PER_CHECK + 1}'
        )
        for (value,) in rows:
            out.add("references", f"table {table}.{column}", f"refers to {target} {value!r}, which does not exist")
    tiles_per_replica = reader.target["tiles_per_replica"]
    for table, column, limit in (
        ("memory_by_tile", "tile", tiles_per_replica),
        ("vars_info", "tile", tiles_per_replica),
        ("vertex_memory", "tile", tiles_per_replica),
        ("always_live_vars", "tile", tiles_per_replica),
        ("liveness_tiles", "tile", tiles_per_replica),
        ("blocks", "tile", reader.target["num_tiles"]),
        ("compute_set_memory", "tile", tiles_per_replica),
    ):
        bad = reader.query(
            f'SELECT DISTINCT "{column}" FROM "{table}" WHERE "{column}" < 0 OR "{column}" >= ? LIMIT 5', (limit,)
        )
        for (value,) in bad:
            out.add("references", f"table {table}.{column}", f"tile {value} is outside 0..{limit - 1}")
    sizes = dict(reader.query("SELECT name, num_rows FROM matrices"))
    for table, column, matrix, _ in _ROW_REFERENCES:
        _check_rows(reader, out, table, column, matrix, sizes, "")
    for kind in _VECTOR_KINDS:
        _check_rows(reader, out, "program_vectors", "row", f"program_{kind}_by_tile", sizes, f"kind = '{kind}'")
        _check_rows(reader, out, "exchanges", "row", f"program_{kind}_by_tile", sizes, f"kind = '{kind}'")
    num_steps = reader.query_row("SELECT count(*) FROM steps")[0]
    if "step_cycles_by_tile" in sizes and sizes["step_cycles_by_tile"] != num_steps:
        out.add(
            "references",
            "matrix step_cycles_by_tile",
            f"has {sizes['step_cycles_by_tile']} rows; expected one per step ({num_steps})",
        )


def _check_rows(reader, out, table, column, matrix, sizes, condition) -> None:
    where = f" AND {condition}" if condition else ""
    top = reader.query_one(
        f'SELECT max("{column}"), min("{column}") FROM "{table}" WHERE "{column}" IS NOT NULL{where}'
    )
    if top is None or top[0] is None:
        return
    size = sizes.get(matrix)
    if size is None:
        out.add("references", f"table {table}.{column}", f"refers to matrix {matrix}, which the report lacks")
    elif top[0] >= size or top[1] < 0:
        out.add(
            "references",
            f"table {table}.{column}",
            f"refers to row {top[0] if top[0] >= size else top[1]} of matrix {matrix}, which has {size} rows",
        )


def _program_graph(reader: ProfileReader, out: _Collector) -> None:
    children: dict[int, list[int]] = {}
    for parent, child in reader.query("SELECT parent, child FROM program_children ORDER BY parent, position"):
        children.setdefault(parent, []).append(child)
    for parent, target in reader.query("SELECT id, call_target FROM programs WHERE call_target IS NOT NULL"):
        children.setdefault(parent, []).append(target)
    cycle = _find_cycle(children)
    if cycle:
        out.add("programs", "program_children", "programs contain themselves: " + " -> ".join(map(str, cycle)))
    roots = reader.column("SELECT program FROM control_programs") + reader.column(
        "SELECT program FROM function_programs"
    )
    reachable: set[int] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node in reachable:
            continue
        reachable.add(node)
        stack.extend(children.get(node, ()))
    if roots:
        unreachable = reader.query_row("SELECT count(*) FROM programs")[0] - len(
            reachable & set(reader.column("SELECT id FROM programs"))
        )
        if unreachable:
            out.add(
                "programs",
                "programs",
                f"{unreachable} program(s) are not reachable from a control program or a function",
            )
    bad = reader.query("SELECT id FROM programs WHERE type = 'OnTileExecute' AND compute_set IS NULL LIMIT 5")
    for (program,) in bad:
        out.add("programs", f"program {program}", "is an OnTileExecute without a compute set")
    bad = reader.query("SELECT id FROM steps WHERE type = 'OnTileExecute' AND compute_set IS NULL LIMIT 5")
    for (step,) in bad:
        out.add("programs", f"step {step}", "is an OnTileExecute step without a compute set")


def _find_cycle(children: dict[int, list[int]]) -> list[int] | None:
    state: dict[int, int] = {}
    for start in children:
        if state.get(start):
            continue
        stack = [(start, iter(children.get(start, ())))]
        path = [start]
        state[start] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
                continue
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append((nxt, iter(children.get(nxt, ()))))
    return None


def _memory(reader: ProfileReader, out: _Collector) -> None:
    bytes_per_tile = reader.target["bytes_per_tile"]
    for tile, excl, incl, _overflow in reader.query(
        "SELECT tile, total, total_including_gaps, overflowed_including_gaps FROM memory_by_tile "
        "WHERE total_including_gaps < total OR interleaved_including_gaps < interleaved "
        "OR non_interleaved_including_gaps < non_interleaved OR overflowed_including_gaps < overflowed LIMIT 21"
    ):
        out.add("memory", f"tile {tile}", f"with-gaps memory {incl} is below without-gaps {excl}")
    for tile, incl, overflow in reader.query(
        "SELECT tile, total_including_gaps, overflowed_including_gaps FROM memory_by_tile "
        "WHERE (total_including_gaps > ?) != (overflowed_including_gaps > 0) LIMIT 21",
        (bytes_per_tile,),
    ):
        out.add(
            "memory", f"tile {tile}", f"uses {incl} bytes of {bytes_per_tile} but reports {overflow} bytes overflowed"
        )
    totals = {
        tile: (total, inter, non, over)
        for tile, total, inter, non, over in reader.query(
            "SELECT tile, total, interleaved, non_interleaved, overflowed FROM memory_by_tile"
        )
    }
    for tile, (total, inter, non, over) in totals.items():
        if inter + non + over != total:
            out.add("memory", f"tile {tile}", f"regions add up to {inter + non + over}, total is {total}")
    matrix = reader.matrix("memory_category_by_tile")
    if matrix is None or not totals:
        return
    per_tile = matrix.rows()
    regions = [per_tile[:, k::6] for k in range(6)]
    sums = {
        "interleaved": (regions[0] + regions[1]).sum(axis=1),
        "non_interleaved": (regions[2] + regions[3]).sum(axis=1),
        "overflowed": (regions[4] + regions[5]).sum(axis=1),
    }
    everything = sums["interleaved"] + sums["non_interleaved"] + sums["overflowed"]
    for tile, (total, _inter, _non, _over) in totals.items():
        if tile >= per_tile.shape[0]:
            continue
        if int(everything[tile]) != total:
            out.add("memory", f"tile {tile}", f"categories add up to {int(everything[tile])} bytes, total is {total}")
    category_totals = np.asarray(per_tile.sum(axis=0), dtype=np.uint64)
    names = reader.query("SELECT id, name FROM var_categories ORDER BY id")
    region_names = ("interleaved", "nonInterleaved", "overflowed")
    for category, region, overlapped, total in reader.query(
        "SELECT category, region, overlapped, total FROM memory_by_category"
    ):
        index = [i for i, (cid, _name) in enumerate(names) if cid == category]
        if not index or region not in region_names:
            continue
        column = 6 * index[0] + 2 * region_names.index(region) + int(bool(overlapped))
        if int(category_totals[column]) != total:
            out.add(
                "memory",
                f"memory_by_category {names[index[0]][1]}/{region}/{overlapped}",
                f"total {total} disagrees with the per-tile matrix ({int(category_totals[column])})",
            )


def _execution(reader: ProfileReader, out: _Collector) -> None:
    runs = reader.query("SELECT id, first_step, num_steps FROM runs ORDER BY id")
    expected_first = 0
    for run, first, count in runs:
        if first != expected_first:
            out.add("execution", f"run {run}", f"starts at step {first}, expected {expected_first}")
        bad = reader.query_row(
            "SELECT count(*) FROM steps WHERE id >= ? AND id < ? AND run != ?", (first, first + count, run)
        )[0]
        if bad:
            out.add("execution", f"run {run}", f"{bad} of its steps name another run")
        expected_first = first + count
    num_steps = reader.query_row("SELECT count(*) FROM steps")[0]
    if runs and expected_first != num_steps:
        out.add("execution", "runs", f"cover {expected_first} steps, the report has {num_steps}")
    for run, ipu, start, end in reader.query('SELECT run, ipu, start, "end" FROM run_cycles_by_ipu'):
        row = reader.query_row(
            "SELECT min(b.cycles_base), max(b.cycles_base), max(b.all_cycles_to_max), min(b.all_cycles_from_min), "
            "sum(b.profiled) FROM steps_by_ipu b JOIN steps s ON s.id = b.step_id WHERE s.run = ? AND b.ipu = ?",
            (run, ipu),
        )
        base_min, base_max, last, first, profiled = row
        if base_min is None or not profiled:
            continue
        if base_min != start or base_max != start:
            out.add(
                "execution", f"run {run} IPU {ipu}", f"steps count cycles from {base_min}, the run starts at {start}"
            )
        if last != end - start:
            out.add(
                "execution",
                f"run {run} IPU {ipu}",
                f"steps end {last} cycles into the run, the run lasts {end - start} cycles",
            )
    for run, ipu, total in reader.query("SELECT run, ipu, total FROM cycle_totals"):
        steps_total = reader.query_row(
            "SELECT sum(b.cycles) FROM steps_by_ipu b JOIN steps s ON s.id = b.step_id WHERE s.run = ? AND b.ipu = ?",
            (run, ipu),
        )[0]
        if steps_total is not None and steps_total != total:
            out.add(
                "execution",
                f"run {run} IPU {ipu}",
                f"cycle_totals.total is {total}, the steps' cycles add up to {steps_total}",
            )
    matrix = reader.matrix("step_cycles_by_tile")
    if matrix is None or matrix.num_rows != num_steps or num_steps == 0:
        return
    tiles_per_ipu = reader.target["tiles_per_ipu"]
    num_ipus = reader.target["num_ipus"]
    step_cycles = np.zeros((num_steps, num_ipus), dtype=np.uint64)
    for first, block in matrix.iter_chunks():
        step_cycles[first : first + block.shape[0]] = block.reshape(block.shape[0], num_ipus, tiles_per_ipu).sum(
            axis=2, dtype=np.uint64
        )
    mismatches = 0
    for step, ipu, cycles, profiled in reader.query("SELECT step_id, ipu, cycles, profiled FROM steps_by_ipu"):
        if 0 <= step < num_steps and 0 <= ipu < num_ipus and profiled and int(step_cycles[step, ipu]) != cycles:
            mismatches += 1
            if mismatches <= 5:
                out.add(
                    "execution",
                    f"step {step} IPU {ipu}",
                    f"steps_by_ipu.cycles is {cycles}, its tiles' cycles add up to {int(step_cycles[step, ipu])}",
                )


def _counts(reader: ProfileReader, out: _Collector) -> None:
    """Every stored count against the rows it counts; every matrix's declared shape against its table."""
    (sets,) = reader.query_row("SELECT count(*) FROM compute_sets")
    if sets and reader.graph["num_compute_sets"] != sets:
        out.add(
            "counts",
            "graph.num_compute_sets",
            f"is {reader.graph['num_compute_sets']}, table compute_sets has {sets} rows",
        )
    (declared_steps, steps) = reader.query_row(
        "SELECT (SELECT coalesce(sum(num_steps), 0) FROM runs), (SELECT count(*) FROM steps)"
    )
    if declared_steps != steps:
        out.add("counts", "runs.num_steps", f"add up to {declared_steps}, table steps has {steps} rows")
    for name, num_rows, _num_cols, _rows_per_chunk in reader.query(
        "SELECT name, num_rows, num_cols, rows_per_chunk FROM matrices ORDER BY name"
    ):
        if name not in profile_matrices()["matrices"]:
            continue
        try:
            bound = reader._row_bound(name)
        except PvaError as exc:
            out.add("counts", f"matrix {name}", _without_path(str(exc), reader.path))
            continue
        if isinstance(num_rows, int) and num_rows > bound:
            out.add("counts", f"matrix {name}", f"declares {num_rows} rows, its table has {bound}")
        if name == "step_cycles_by_tile" and num_rows != steps:
            out.add("counts", f"matrix {name}", f"declares {num_rows} rows, one per step expected ({steps})")
        (chunks, chunk_rows) = reader.query_row(
            "SELECT count(*), coalesce(sum(num_rows), 0) FROM matrix_chunks WHERE matrix = ?", (name,)
        )
        if chunk_rows != num_rows:
            out.add("counts", f"matrix {name}", f"declares {num_rows} rows, its {chunks} chunk(s) hold {chunk_rows}")


def _structure(reader: ProfileReader, out: _Collector) -> None:
    """Every table and column of the schema present, with its declared type, and every index (no scans)."""
    schema = profile_schema()
    for name, spec in schema.tables.items():
        info = {row[1]: row for row in reader.query(f'PRAGMA table_info("{name}")')}
        for column in spec.columns:
            row = info.get(column.name)
            if row is None:
                out.add("schema", f"table {name}", f"column {column.name} is missing")
            elif row[2].upper() != column.type:
                out.add("schema", f"table {name}", f"column {column.name} is {row[2]}, expected {column.type}")
    for index in schema.indexes:
        if reader.query_one("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (index,)) is None:
            out.add("schema", f"index {index}", "is missing")


_QUICK_CHECKS: list[tuple[str, Callable[..., None]]] = [
    ("structure", _structure),
    ("counts", _counts),
]

_CHECKS: list[tuple[str, Callable[..., None]]] = [
    ("integrity", _integrity),
    ("schema", _schema),
    ("counts", _counts),
    ("matrices", _matrices),
    ("references", _references),
    ("programs", _program_graph),
    ("memory", _memory),
    ("execution", _execution),
]
#: Every check by name, with a faster integrity check (pages and records, not index consistency).
_ALL_CHECKS: list[tuple[str, Callable[..., None]]] = [*_CHECKS, ("quick-integrity", _quick_integrity)]
#: The checks that the file is sound storage (SQLite pages, schema, matrix chunks, nothing planted), not
#: that its figures agree.
STRUCTURE_CHECKS = ("planted", "quick-integrity", "schema", "matrices")
