"""The profile.pop reader: rows and Arrow-backed per-tile matrices for `pva` to build on."""

from __future__ import annotations

import math
import os
from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..errors import InconsistentReportError
from ..lazy_import import lazy_module
from .arrow_chunks import decode_chunk
from .categories import CATEGORIES, MAX_CATEGORIES
from .query import ReportQueries
from .schema import (
    PROFILE_APPLICATION_ID,
    PROFILE_FORMAT,
    TRACE_APPLICATION_ID,
    profile_matrices,
    profile_schema,
)
from .sqlite_reader import SqliteFile

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
else:
    np = lazy_module("numpy")
    pa = lazy_module("pyarrow")

#: Bytes of a file SQLite may memory-map: none. A mapped file that shrinks while it is read (another
#: process truncates or rewrites it in place) kills the reader with SIGBUS; read() sees a short read,
#: which SQLite reports and the reader turns into a CorruptReportError (exit 2). Reading matrix chunks
#: through read() costs about a third more time than through a map, with the pages in the page cache.
MMAP_BYTES = 0


#: Largest graph count believed (2^48: far beyond the memory of any machine's graph).
_MAX_GRAPH_COUNT = 1 << 48

_PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {"INTEGER": int, "REAL": (int, float), "TEXT": str, "BLOB": bytes}


class MatrixReader:
    """Read access to one per-tile matrix: single rows, row ranges, or chunk by chunk."""

    def __init__(self, source: ProfileReader, name: str, num_rows: int, num_cols: int, rows_per_chunk: int):
        self._source = source
        self.name = name
        self.num_rows = num_rows
        self.num_cols = num_cols
        self.rows_per_chunk = rows_per_chunk
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._index_checked = False

    def __repr__(self) -> str:
        return f"<Matrix {self.name!r} {self.num_rows}x{self.num_cols}>"

    @property
    def shape(self) -> tuple[int, int]:
        return self.num_rows, self.num_cols

    def _check_index(self) -> None:
        if self._index_checked:
            return
        rows = self._source.file.query(
            "SELECT first_row, num_rows FROM matrix_chunks WHERE matrix = ? ORDER BY first_row", (self.name,)
        )
        expected_first = 0
        for first, count in rows:
            expected_count = min(self.rows_per_chunk, self.num_rows - expected_first)
            if first != expected_first or count != expected_count:
                raise InconsistentReportError(
                    f"{self._source.path!r}: matrix {self.name!r}: expected a chunk of {expected_count} rows at "
                    f"row {expected_first}, found {count} rows at row {first}",
                    self._source.path,
                )
            expected_first += count
        if expected_first != self.num_rows:
            raise InconsistentReportError(
                f"{self._source.path!r}: matrix {self.name!r} declares {self.num_rows} rows, its chunks hold "
                f"{expected_first}",
                self._source.path,
            )
        self._index_checked = True

    def _chunk(self, index: int) -> np.ndarray:
        cached = self._cache.get(index)
        if cached is not None:
            self._cache.move_to_end(index)
            return cached
        self._check_index()
        first = index * self.rows_per_chunk
        count = min(self.rows_per_chunk, self.num_rows - first)
        array = self._read_chunk(first, count)
        self._cache[index] = array
        if len(self._cache) > 4:
            self._cache.popitem(last=False)
        return array

    def _read_chunk(self, first: int, count: int) -> np.ndarray:
        row = self._source.file.query_one(
            "SELECT codec, raw_size, data FROM matrix_chunks WHERE matrix = ? AND first_row = ?", (self.name, first)
        )
        if row is None:
            raise InconsistentReportError(
                f"{self._source.path!r}: matrix {self.name!r}: chunk at row {first} is missing", self._source.path
            )
        codec, raw_size, data = row
        return decode_chunk(
            data,
            codec=codec,
            raw_size=raw_size,
            matrix=self.name,
            first_row=first,
            num_rows=count,
            num_cols=self.num_cols,
            path=self._source.path,
        )

    def _check_row(self, row: int) -> int:
        if not isinstance(row, (int, np.integer)):
            raise TypeError(f"matrix row must be an integer, not {type(row).__name__}")
        if not 0 <= row < self.num_rows:
            raise InconsistentReportError(
                f"{self._source.path!r}: matrix {self.name!r} has {self.num_rows} rows; row {row} was referenced",
                self._source.path,
            )
        return int(row)

    def row(self, row: int) -> np.ndarray:
        """One row as a uint64 array."""
        row = self._check_row(row)
        chunk = self._chunk(row // self.rows_per_chunk)
        return chunk[row % self.rows_per_chunk].astype(np.uint64)

    def iter_chunks(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """Yield (first_row, rows) for the rows start..stop-1, one stored chunk at a time.

        The arrays keep their stored (narrow) integer type and are read-only views; nothing but
        the current chunk is held in memory.
        """
        stop = self.num_rows if stop is None else min(stop, self.num_rows)
        start = max(0, start)
        if start >= stop:
            return
        self._check_index()
        first_chunk = start // self.rows_per_chunk
        last_chunk = (stop - 1) // self.rows_per_chunk
        for index in range(first_chunk, last_chunk + 1):
            first = index * self.rows_per_chunk
            count = min(self.rows_per_chunk, self.num_rows - first)
            cached = self._cache.get(index)
            if cached is None:
                cached = self._read_chunk(first, count)
            lo = max(start, first) - first
            hi = min(stop, first + count) - first
            yield first + lo, cached[lo:hi]

    def rows(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Rows start..stop-1 as one (rows, num_cols) uint64 array."""
        stop = self.num_rows if stop is None else min(stop, self.num_rows)
        start = max(0, start)
        if start < stop:
            self._check_index()  # the declared row count must match the chunks before it sizes an allocation
        out = np.zeros((max(0, stop - start), self.num_cols), dtype=np.uint64)
        for first, block in self.iter_chunks(start, stop):
            out[first - start : first - start + block.shape[0]] = block
        return out

    def take(self, rows: np.ndarray | list[int]) -> np.ndarray:
        """The given rows (any order) as one (len(rows), num_cols) uint64 array."""
        wanted = np.asarray(rows, dtype=np.int64)
        out = np.zeros((wanted.size, self.num_cols), dtype=np.uint64)
        if wanted.size == 0:
            return out
        if int(wanted.min()) < 0 or int(wanted.max()) >= self.num_rows:
            bad = int(wanted.max()) if int(wanted.max()) >= self.num_rows else int(wanted.min())
            self._check_row(bad)
        order = np.argsort(wanted, kind="stable")
        chunk_of = wanted[order] // self.rows_per_chunk
        boundaries = np.flatnonzero(np.diff(chunk_of)) + 1
        for group in np.split(order, boundaries):
            chunk = self._chunk(int(wanted[group[0]] // self.rows_per_chunk))
            out[group] = chunk[wanted[group] % self.rows_per_chunk]
        return out

    def sum_rows(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Column totals over rows start..stop-1 (per-tile totals), streamed chunk by chunk."""
        total = np.zeros(self.num_cols, dtype=np.uint64)
        for _first, block in self.iter_chunks(start, stop):
            total += block.sum(axis=0, dtype=np.uint64)
        return total

    def to_arrow(self, start: int = 0, stop: int | None = None) -> pa.Table:
        """Rows start..stop-1 as an Arrow table: `row`, and `values` as a fixed-size list per row."""
        block = self.rows(start, stop)
        values = pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), self.num_cols)
        rows = pa.array(np.arange(start, start + block.shape[0], dtype=np.int64))
        return pa.table({"row": rows, "values": values})


#: For each matrix, the SQL counting the rows of the table its rows belong to: a matrix may not
#: declare more rows than that (checked before any chunk is decoded).
_ROW_BOUNDS = {
    "step_cycles_by_tile": "SELECT count(*) FROM steps",
    "step_compute_set_cycles_by_tile": "SELECT count(*) FROM step_compute_sets",
    "compute_set_estimated_cycles_by_tile": "SELECT count(*) FROM compute_sets",
    "compute_set_active_cycles_by_tile": "SELECT count(*) FROM compute_sets",
    "compute_set_cycles_by_tile": "SELECT count(*) FROM compute_sets",
    "vertex_count_by_tile": "SELECT count(*) FROM compute_set_vertices",
}
_PROGRAM_VECTOR_BOUND = (
    "SELECT (SELECT count(*) FROM program_vectors WHERE kind = ?) + (SELECT count(*) FROM exchanges WHERE kind = ?)"
)


class ProfileReader(ReportQueries):
    """A profile.pop file opened read-only: its metadata, the query layer, and per-tile matrices."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.file = SqliteFile(
            path,
            what="profile report",
            application_id=PROFILE_APPLICATION_ID,
            supported_major=PROFILE_FORMAT[0],
            schema=profile_schema(),
            other_kinds={TRACE_APPLICATION_ID: "a pva trace file; open it with pva.openTrace"},
        )
        self.file.conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")  # no map: see MMAP_BYTES
        self.path = self.file.path
        self.metadata = self.file.metadata
        self.version = self.file.version
        target = self.file.query(f"SELECT {', '.join(self.file.tables['target'])} FROM target")
        if len(target) != 1:
            raise InconsistentReportError(
                f"{self.path!r}: expected exactly one row in table target, found {len(target)}", self.path
            )
        self.target = dict(zip(self.file.tables["target"], target[0]))
        self._check_types("target", self.target)
        self._check_target()
        graph = self.file.query("SELECT num_compute_sets, num_edges, num_vars, num_vertices FROM graph")
        if len(graph) != 1:
            raise InconsistentReportError(
                f"{self.path!r}: expected exactly one row in table graph, found {len(graph)}", self.path
            )
        self.graph = dict(zip(("num_compute_sets", "num_edges", "num_vars", "num_vertices"), graph[0]))
        self._check_types("graph", self.graph)
        for key, value in self.graph.items():
            if value < 0:
                raise InconsistentReportError(f"{self.path!r}: graph.{key} is negative ({value})", self.path)
        self._check_graph_counts()
        self._check_category_count()
        self._matrices: dict[str, MatrixReader] | None = None
        self._bounded: set[str] = set()

    def _check_category_count(self) -> None:
        """Refuse more memory categories than the format allows (each is 6 columns of a per-tile matrix);
        reads at most that many rows, whatever the table holds."""
        beyond = self.file.query_one("SELECT 1 FROM var_categories LIMIT 1 OFFSET ?", (MAX_CATEGORIES,))
        if beyond is not None:
            self._num_categories()

    def _check_graph_counts(self) -> None:
        """The graph's counts must agree with the rows they count (a count is shown to users as is)."""
        (sets,) = self.query_row("SELECT count(*) FROM compute_sets")
        graph = self.graph
        if sets and graph["num_compute_sets"] != sets:
            raise InconsistentReportError(
                f"{self.path!r}: graph.num_compute_sets is {graph['num_compute_sets']}, table compute_sets has "
                f"{sets} rows",
                self.path,
            )
        for key in ("num_compute_sets", "num_vertices", "num_vars", "num_edges"):
            if graph[key] > _MAX_GRAPH_COUNT:
                raise InconsistentReportError(
                    f"{self.path!r}: graph.{key} is {graph[key]}, more than any graph can hold ({_MAX_GRAPH_COUNT})",
                    self.path,
                )

    def _check_types(self, table: str, row: dict) -> None:
        """Every value of a one-row table must have its declared type."""
        for column in profile_schema().tables[table].columns:
            if column.name not in row:
                continue
            value = row[column.name]
            if value is None and not column.not_null:
                continue
            expected = _PYTHON_TYPES[column.type]
            if isinstance(value, bool) or not isinstance(value, expected):
                raise InconsistentReportError(
                    f"{self.path!r}: {table}.{column.name} should be {column.type}, found "
                    f"{type(value).__name__} {value!r:.60}",
                    self.path,
                )
            if isinstance(value, float) and not math.isfinite(value):
                raise InconsistentReportError(
                    f"{self.path!r}: {table}.{column.name} should be a finite number, found {value!r}", self.path
                )

    def _check_target(self) -> None:
        t = self.target
        if not t.get("clock_frequency", 0.0) >= 0:  # 0: not recorded
            raise InconsistentReportError(
                f"{self.path!r}: target.clock_frequency should be a frequency [Hz] (0 when not recorded), found "
                f"{t['clock_frequency']!r}",
                self.path,
            )
        for key in ("num_ipus", "tiles_per_ipu", "num_tiles", "num_replicas", "ipus_per_replica", "tiles_per_replica"):
            value = t.get(key)
            if not isinstance(value, int) or value < 1 or value > 1 << 24:
                raise InconsistentReportError(
                    f"{self.path!r}: target.{key} must be a positive integer of reasonable size, found {value!r}",
                    self.path,
                )
        if t["num_tiles"] != t["num_ipus"] * t["tiles_per_ipu"]:
            raise InconsistentReportError(
                f"{self.path!r}: target.num_tiles is {t['num_tiles']} but num_ipus * tiles_per_ipu is "
                f"{t['num_ipus'] * t['tiles_per_ipu']}",
                self.path,
            )
        (rows,) = self.query_row("SELECT count(*) FROM tiles")
        if rows != t["num_tiles"]:
            raise InconsistentReportError(
                f"{self.path!r}: target.num_tiles is {t['num_tiles']} but table tiles has {rows} rows",
                self.path,
            )
        if t["tiles_per_replica"] != t["ipus_per_replica"] * t["tiles_per_ipu"] or t["num_ipus"] != (
            t["ipus_per_replica"] * t["num_replicas"]
        ):
            raise InconsistentReportError(
                f"{self.path!r}: target replica sizes disagree: {t['num_replicas']} replicas of "
                f"{t['ipus_per_replica']} IPUs and {t['tiles_per_replica']} tiles on {t['num_ipus']} IPUs",
                self.path,
            )

    def close(self) -> None:
        """Close the file."""
        self.file.close()

    # -- rows -------------------------------------------------------------------------------

    def query(self, sql: str, params=()) -> list[tuple]:
        """All rows of a read-only query."""
        return self.file.query(sql, params)

    def query_one(self, sql: str, params=()) -> tuple | None:
        """The first row of a read-only query, or None."""
        return self.file.query_one(sql, params)

    def query_row(self, sql: str, params=()) -> tuple:
        """The one row of a read-only query that always returns one (an aggregate, or a row just listed)."""
        row = self.file.query_one(sql, params)
        assert row is not None, f"expected a row from {sql!r}"
        return row

    def column(self, sql: str, params=()) -> list:
        """The first column of a read-only query."""
        return self.file.column(sql, params)

    def has_column(self, table: str, column: str) -> bool:
        """Whether a table of this file has a column (newer minor versions may add some)."""
        return column in self.file.tables.get(table, ())

    # -- matrices ---------------------------------------------------------------------------

    def _load_matrices(self) -> dict[str, MatrixReader]:
        if self._matrices is None:
            declared = profile_matrices()["matrices"]
            found: dict[str, MatrixReader] = {}
            categories = None
            for name, num_rows, num_cols, rows_per_chunk in self.query(
                "SELECT name, num_rows, num_cols, rows_per_chunk FROM matrices"
            ):
                spec = declared.get(name)
                if spec is None:
                    continue  # a matrix of a newer minor version
                kind = spec["columns"]
                if kind == "num_tiles":
                    expected = self.target["num_tiles"]
                elif kind == "tiles_per_replica":
                    expected = self.target["tiles_per_replica"]
                else:
                    if categories is None:
                        categories = self._num_categories()
                    expected = 6 * categories
                if num_cols != expected:
                    raise InconsistentReportError(
                        f"{self.path!r}: matrix {name!r} has {num_cols} columns but the report has {expected} ({kind})",
                        self.path,
                    )
                if (
                    not isinstance(num_rows, int)
                    or num_rows < 0
                    or not isinstance(rows_per_chunk, int)
                    or rows_per_chunk < 1
                ):
                    raise InconsistentReportError(
                        f"{self.path!r}: matrix {name!r} has invalid sizes ({num_rows} rows, {rows_per_chunk} per chunk)",
                        self.path,
                    )
                found[name] = MatrixReader(self, name, num_rows, num_cols, rows_per_chunk)
            self._matrices = found
        return self._matrices

    def _num_categories(self) -> int:
        """The memory categories the report declares; refused beyond the format's bound (before any matrix is read)."""
        (count,) = self.query_row("SELECT count(*) FROM var_categories")
        if count > MAX_CATEGORIES:
            raise InconsistentReportError(
                f"{self.path!r}: table var_categories declares {count} memory categories; expected at most "
                f"{MAX_CATEGORIES} (Poplar's {len(CATEGORIES)} and those a later Poplar adds)",
                self.path,
            )
        return int(count)

    def _checked_matrix(self, name: str) -> MatrixReader | None:
        """A matrix whose declared rows were checked against the table they belong to (on first use:
        each check counts a table's rows)."""
        matrix = self._load_matrices().get(name)
        if matrix is not None and name not in self._bounded:
            bound = self._row_bound(name)
            if matrix.num_rows > bound:
                rows = profile_matrices()["matrices"][name]["rows"].split(":")[0]
                raise InconsistentReportError(
                    f"{self.path!r}: matrix {name!r} declares {matrix.num_rows} rows; expected at most {bound}, "
                    f"the rows of the table it belongs to ({rows})",
                    self.path,
                )
            self._bounded.add(name)
        return matrix

    def _row_bound(self, name: str) -> int:
        """The most rows matrix `name` may have: the rows of the table its rows belong to."""
        if name == "memory_category_by_tile":
            return max(self.target["tiles_per_replica"], self.target["num_tiles"])  # one row per tile
        if name.startswith("program_") and name.endswith("_by_tile"):
            kind = name[len("program_") : -len("_by_tile")]
            (rows,) = self.query_row(_PROGRAM_VECTOR_BOUND, (kind, kind))
            return int(rows)
        sql = _ROW_BOUNDS.get(name)
        if sql is None:
            return 1 << 62  # a matrix of a newer minor version: its chunks' sizes still bound what is decoded
        (rows,) = self.query_row(sql)
        return int(rows)

    def has_matrix(self, name: str) -> bool:
        """Whether the report stores the named matrix."""
        return name in self._load_matrices()

    def matrix(self, name: str) -> MatrixReader | None:
        """The named per-tile matrix, or None if the report has none."""
        return self._checked_matrix(name)

    def matrix_row(self, name: str, row: int | None) -> np.ndarray:
        """One matrix row as uint64, or an empty array when `row` is None or the matrix is absent."""
        if row is None:
            return np.zeros(0, dtype=np.uint64)
        matrix = self.matrix(name)
        if matrix is None:
            raise InconsistentReportError(
                f"{self.path!r}: row {row} of matrix {name!r} is referenced but the report has no such matrix",
                self.path,
            )
        return matrix.row(row)
