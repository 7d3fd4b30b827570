"""Writing a report: formats.ProfileWriter against raw sqlite3.executemany plus pyarrow, same content.

The content of a report (every row of every table, every per-tile matrix as a numpy array) is
read into memory first; then each side writes it from memory, alternately, so only writing is
timed:

* ours: ProfileWriter (set_target, set_graph, insert per table, matrix(name).append, close: the
  indexes, ANALYZE, an fsync and the atomic rename included);
* baseline: sqlite3 with the same CREATE TABLE statements, the same settings as our writer (no
  journal, no sync while loading), one executemany per table in one transaction, then the same
  indexes and ANALYZE and an fsync; plus every matrix written by pyarrow as an Arrow IPC file with
  the same codec and batches as large as our chunks, each file fsynced. Both sides do the same work.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import statistics
import time

import numpy as np
import pyarrow as pa

from formats.pop.reader import ProfileReader
from formats.pop.schema import profile_schema, split_ddl
from formats.pop.writer import ProfileWriter

#: Tables ProfileWriter fills itself (set_target, set_graph, matrices, close).
_WRITER_TABLES = {"metadata", "target", "replicas", "ipus", "tiles", "graph", "matrices", "matrix_chunks"}
#: Target columns set_target derives from the others.
_DERIVED = {"num_tiles", "bytes_per_ipu", "total_memory", "ipus_per_replica", "tiles_per_replica", "memory_per_replica"}


@dataclasses.dataclass
class Content:
    """A report's content in memory."""

    tables: dict[str, tuple[tuple[str, ...], list[tuple]]]
    matrices: dict[str, tuple[np.ndarray, int]]  # name -> (values in their stored type, rows per chunk)
    metadata: dict[str, str]
    codec: str

    @property
    def rows(self) -> int:
        return sum(len(rows) for _columns, rows in self.tables.values())

    @property
    def matrix_bytes(self) -> int:
        return sum(values.nbytes for values, _per in self.matrices.values())


def load_content(path: str) -> Content:
    """Every row and matrix of a report."""
    reader = ProfileReader(path)
    try:
        tables = {}
        for name in profile_schema().tables:
            if name == "matrix_chunks":
                continue
            columns = reader.file.tables[name]
            quoted = ", ".join(f'"{c}"' for c in columns)
            tables[name] = (columns, reader.query(f'SELECT {quoted} FROM "{name}"'))
        matrices = {}
        for name, _rows, _cols, per_chunk in reader.query(
            "SELECT name, num_rows, num_cols, rows_per_chunk FROM matrices ORDER BY rowid"
        ):
            matrix = reader.matrix(name)
            blocks = [block for _first, block in matrix.iter_chunks()]
            dtype = np.result_type(*[b.dtype for b in blocks]) if blocks else np.uint8
            values = (
                np.concatenate([b.astype(dtype, copy=False) for b in blocks])
                if blocks
                else np.zeros((0, matrix.num_cols), dtype=dtype)
            )
            matrices[name] = (values, per_chunk)
        codecs = reader.column("SELECT DISTINCT codec FROM matrix_chunks")
        return Content(tables, matrices, dict(reader.metadata), codecs[0] if len(codecs) == 1 else "zstd")
    finally:
        reader.close()


def write_ours(content: Content, path: str) -> None:
    """Write the content through formats.pop.writer."""
    meta = content.metadata
    target_columns, (target_row,) = content.tables["target"]
    target = dict(zip(target_columns, target_row))
    tile_columns, tile_rows = content.tables["tiles"]
    delay = tile_columns.index("relative_sync_delay")
    tiles_per_ipu = target["tiles_per_ipu"]
    with ProfileWriter(
        path,
        producer=meta.get("producer", "pva"),
        producer_version=meta.get("producer_version", ""),
        poplar_version=meta.get("poplar_version", ""),
    ) as w:
        w.set_metadata(**{k: v for k, v in meta.items() if k not in ("format_version", "producer", "producer_version")})
        w.set_target(
            relative_sync_delay_by_tile=[row[delay] for row in sorted(tile_rows)[:tiles_per_ipu]],
            **{k: v for k, v in target.items() if k not in _DERIVED},
        )
        graph_columns, (graph_row,) = content.tables["graph"]
        w.set_graph(**dict(zip(graph_columns, graph_row)))
        for name, (columns, rows) in content.tables.items():
            if name not in _WRITER_TABLES and rows:
                w.insert(name, columns, rows)
        for name, (values, _per_chunk) in content.matrices.items():
            w.matrix(name).append(values)


def write_baseline(content: Content, path: str, arrow_directory: str) -> None:
    """Write the same rows with raw sqlite3.executemany and the same matrices with pyarrow."""
    tables_ddl, indexes_ddl = split_ddl(profile_schema().ddl)
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        conn.executescript(tables_ddl)
        with conn:
            for name, (columns, rows) in content.tables.items():
                if rows:
                    marks = ", ".join("?" * len(columns))
                    conn.executemany(f'INSERT INTO "{name}" VALUES ({marks})', rows)
        conn.executescript(indexes_ddl)
        conn.execute("PRAGMA analysis_limit=1000")
        conn.execute("ANALYZE")
        conn.commit()
    finally:
        conn.close()
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())
    options = pa.ipc.IpcWriteOptions(compression=None if content.codec == "none" else content.codec)
    for name, (values, per_chunk) in content.matrices.items():
        arrow_type = pa.from_numpy_dtype(values.dtype)
        schema = pa.schema([pa.field("values", pa.list_(arrow_type, values.shape[1]), nullable=False)])
        target = os.path.join(arrow_directory, f"{name}.arrow")
        with pa.OSFile(target, "wb") as sink, pa.ipc.new_file(sink, schema, options=options) as writer:
            for first in range(0, values.shape[0], per_chunk):
                block = values[first : first + per_chunk]
                column = pa.FixedSizeListArray.from_arrays(
                    pa.array(block.reshape(-1), type=arrow_type), values.shape[1]
                )
                writer.write_batch(pa.record_batch([column], schema=schema))
        with open(target, "rb") as handle:
            os.fsync(handle.fileno())


def _remove(*paths: str) -> None:
    for path in paths:
        if os.path.isdir(path):
            for name in os.listdir(path):
                os.unlink(os.path.join(path, name))
        elif os.path.exists(path):
            os.unlink(path)


def measure_writes(content: Content, scratch: str, repeat: int) -> dict:
    """Alternate both writers `repeat` times; median seconds and the sizes written."""
    ours_path = os.path.join(scratch, "ours.pop")
    base_path = os.path.join(scratch, "baseline.sqlite")
    arrow_dir = os.path.join(scratch, "baseline-arrow")
    os.makedirs(arrow_dir, exist_ok=True)
    times: dict[str, list[float]] = {"ours": [], "baseline": []}
    sizes: dict[str, int] = {}
    sides = {
        "ours": lambda: write_ours(content, ours_path),
        "baseline": lambda: write_baseline(content, base_path, arrow_dir),
    }
    for round_ in range(repeat):
        for name in ("ours", "baseline") if round_ % 2 == 0 else ("baseline", "ours"):
            _remove(ours_path, base_path, arrow_dir)
            started = time.perf_counter()
            sides[name]()
            times[name].append(time.perf_counter() - started)
            if name == "ours":
                sizes["ours"] = os.path.getsize(ours_path)
            else:
                sizes["baseline"] = os.path.getsize(base_path) + sum(
                    os.path.getsize(os.path.join(arrow_dir, f)) for f in os.listdir(arrow_dir)
                )
    _remove(ours_path, base_path, arrow_dir)
    os.rmdir(arrow_dir)
    return {
        "seconds": statistics.median(times["ours"]),
        "baseline_seconds": statistics.median(times["baseline"]),
        "times": times,
        "bytes": sizes["ours"],
        "baseline_bytes": sizes["baseline"],
        "rows": content.rows,
        "matrix_bytes": content.matrix_bytes,
    }
