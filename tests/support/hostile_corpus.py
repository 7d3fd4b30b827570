"""A corpus of damaged reports generated from a valid one: truncations, flipped bytes, dropped
tables, wrong types, NULLs, absurd counts, duplicate ids, reference cycles and very long names."""

from __future__ import annotations

import os
import pathlib
import shutil
import sqlite3

import numpy as np

#: Integer columns set to absurd values, with the values tried.
_ABSURD = [
    ("target", "num_tiles", None, [-5, 1 << 62]),
    ("target", "tiles_per_ipu", None, [0, 1 << 40]),
    ("target", "bytes_per_tile", None, [-1]),
    ("graph", "num_compute_sets", None, [-1, 1 << 62]),
    ("matrices", "num_rows", "name = 'step_cycles_by_tile'", [1 << 40, -1]),
    ("matrices", "rows_per_chunk", "name = 'compute_set_estimated_cycles_by_tile'", [0, -7, 1 << 40]),
    ("matrix_chunks", "raw_size", "first_row = 0", [-1, 1 << 50]),
    ("matrix_chunks", "num_rows", "first_row = 0", [1 << 30]),
    ("programs", "repeat_count", "type = 'Repeat'", [1 << 62, -3]),
    ("programs", "compute_set", "type = 'OnTileExecute'", [1 << 40, -1]),
    ("programs", "call_target", "type = 'Call'", [12345678]),
    ("runs", "num_steps", None, [1 << 40]),
    ("runs", "first_step", None, [-3]),
    ("compute_set_vertices", "count", None, [1 << 62]),
    ("compute_sets", "estimated_cycles_row", None, [1 << 40]),
    ("steps_by_ipu", "cycles", None, [-1, 1 << 63 - 1]),
    ("steps", "program", None, [999999]),
    ("memory_by_tile", "total", None, [(1 << 63) - 1]),
    ("memory_by_tile", "tile", None, [-1]),
    ("liveness_steps", "depth", None, [10**9]),
    ("liveness_steps", "parent", None, [-2]),
    ("vars_info", "size_bytes", None, [-10]),
    ("vars_info", "equivalence_class", None, [1 << 50]),
    ("equivalence_class_steps", "end", None, [1 << 62]),
    ("program_children", "child", None, [1 << 40]),
    ("program_vectors", "row", None, [1 << 40]),
    ("tiles", "ipu", None, [1 << 40]),
    ("blocks", "tile", None, [1 << 40]),
]

#: (table, column, wrong value) for wrongly typed values.
_WRONG_TYPES = [
    ("programs", "compute_set", "'not a number'"),
    ("programs", "type", "42"),
    ("compute_sets", "name", "x'00ff'"),
    ("steps_by_ipu", "cycles", "1.5"),
    ("target", "clock_frequency", "'fast'"),
    ("target", "num_ipus", "'two'"),
    ("memory_by_tile", "total", "'lots'"),
    ("metadata", "value", "x'deadbeef'"),
    ("matrix_chunks", "data", "'text instead of a blob'"),
    ("matrix_chunks", "codec", "'brotli'"),
    ("vars_info", "name", "3.25"),
    ("run_cycles_by_ipu", "start", "'early'"),
]


def _copy(source: pathlib.Path, directory: pathlib.Path, name: str) -> pathlib.Path:
    path = directory / f"{name}.pop"
    shutil.copyfile(source, path)
    return path


def _sql(path: pathlib.Path, *statements: str, writable_schema: bool = False) -> None:
    conn = sqlite3.connect(path)
    try:
        if writable_schema:
            conn.execute("PRAGMA writable_schema = ON")
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


def _without_constraints(path: pathlib.Path, table: str) -> None:
    """Recreate a table with the same columns but no constraints (so NULLs and duplicates fit)."""
    _sql(
        path,
        f'CREATE TABLE "tmp_{table}" AS SELECT * FROM "{table}"',
        f'DROP TABLE "{table}"',
        f'ALTER TABLE "tmp_{table}" RENAME TO "{table}"',
    )


def make_cases(
    source: str | os.PathLike[str],
    directory: str | os.PathLike[str],
    seed: int = 1,
    debug: str | os.PathLike[str] | None = None,
) -> list[dict]:
    """Write damaged copies of the report `source` into `directory`; returns the cases."""
    source = pathlib.Path(source)
    out = pathlib.Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    data = source.read_bytes()
    cases: list[dict] = []

    def add(name: str, path: pathlib.Path, debug_path=None) -> None:
        case = {"name": name, "path": str(path)}
        if debug_path is not None:
            case["debug"] = str(debug_path)
        cases.append(case)

    # truncations
    offsets = sorted(
        {
            0,
            1,
            99,
            100,
            101,
            4095,
            4096,
            4097,
            8192,
            *(int(len(data) * f) for f in np.linspace(0.05, 0.98, 12)),
            len(data) - 1,
        }
    )
    for offset in offsets:
        path = out / f"truncated-{offset}.pop"
        path.write_bytes(data[:offset])
        add(f"truncated at {offset}", path)

    # flipped bytes in the root page of every table and index, and in random pages
    conn = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    roots = conn.execute("SELECT name, rootpage FROM sqlite_master WHERE rootpage > 0 ORDER BY name").fetchall()
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    chunks = conn.execute("SELECT matrix, first_row FROM matrix_chunks WHERE first_row = 0 ORDER BY matrix").fetchall()
    tables = [
        name
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]
    conn.close()
    for name, root in roots:
        flipped = bytearray(data)
        base = (root - 1) * page_size
        for position in rng.integers(0, page_size, 24):
            if base + position < len(flipped) and base + position >= 100:
                flipped[base + position] ^= int(rng.integers(1, 256))
        path = out / f"flipped-{name}.pop"
        path.write_bytes(bytes(flipped))
        add(f"flipped bytes in the root page of {name}", path)
    pages = len(data) // page_size
    for k in range(6):
        flipped = bytearray(data)
        page = int(rng.integers(1, max(2, pages)))
        for position in rng.integers(0, page_size, 64):
            if page * page_size + position < len(flipped):
                flipped[page * page_size + position] ^= 0xFF
        path = out / f"flipped-page-{page}-{k}.pop"
        path.write_bytes(bytes(flipped))
        add(f"flipped bytes in page {page}", path)

    # flipped bytes inside Arrow chunks (the SQLite file stays valid)
    for matrix, first in chunks:
        path = _copy(source, out, f"chunk-{matrix}")
        conn = sqlite3.connect(path)
        (blob,) = conn.execute(
            "SELECT data FROM matrix_chunks WHERE matrix = ? AND first_row = ?", (matrix, first)
        ).fetchone()
        damaged = bytearray(blob)
        for position in rng.integers(0, len(damaged), max(1, len(damaged) // 50)):
            damaged[position] ^= int(rng.integers(1, 256))
        conn.execute(
            "UPDATE matrix_chunks SET data = ? WHERE matrix = ? AND first_row = ?", (bytes(damaged), matrix, first)
        )
        conn.commit()
        conn.close()
        add(f"flipped bytes in an Arrow chunk of {matrix}", path)

    # dropped tables
    for table in tables:
        path = _copy(source, out, f"dropped-{table}")
        _sql(path, f'DROP TABLE "{table}"')
        add(f"table {table} dropped", path)

    # wrongly typed values
    for table, column, value in _WRONG_TYPES:
        path = _copy(source, out, f"type-{table}-{column}")
        _sql(path, f'UPDATE "{table}" SET "{column}" = {value}')
        add(f"{table}.{column} set to {value}", path)

    # NULLs in NOT NULL columns
    for table, column in (
        ("programs", "type"),
        ("target", "num_tiles"),
        ("steps", "type"),
        ("runs", "first_step"),
        ("metadata", "value"),
        ("memory_by_tile", "total"),
        ("liveness_steps", "program"),
        ("vertex_types", "name"),
        ("tiles", "ipu"),
    ):
        path = _copy(source, out, f"null-{table}-{column}")
        _without_constraints(path, table)
        _sql(path, f'UPDATE "{table}" SET "{column}" = NULL')
        add(f"{table}.{column} set to NULL", path)

    # absurd counts and references
    for table, column, where, values in _ABSURD:
        for value in values:
            path = _copy(source, out, f"absurd-{table}-{column}-{value}")
            condition = f" WHERE {where}" if where else ""
            _sql(path, f'UPDATE OR IGNORE "{table}" SET "{column}" = {value}{condition}')
            add(f"{table}.{column} = {value}", path)

    # duplicate ids
    for table, key in (
        ("programs", "id"),
        ("compute_sets", "compute_set"),
        ("steps", "id"),
        ("vertex_types", "id"),
        ("runs", "id"),
        ("tiles", "id"),
    ):
        path = _copy(source, out, f"duplicate-{table}")
        _without_constraints(path, table)
        _sql(path, f'INSERT INTO "{table}" SELECT * FROM "{table}" WHERE "{key}" < 3')
        add(f"duplicate ids in {table}", path)

    # reference cycles among programs
    path = _copy(source, out, "cycle-programs")
    _sql(
        path,
        "INSERT OR REPLACE INTO program_children (parent, position, child) "
        "SELECT child, 99, parent FROM program_children LIMIT 1",
    )
    add("a program that contains itself", path)
    path = _copy(source, out, "cycle-call")
    _sql(path, "UPDATE programs SET call_target = id WHERE type = 'Call'")
    add("a Call that calls itself", path)
    path = _copy(source, out, "cycle-liveness")
    _sql(path, "UPDATE liveness_steps SET parent = id")
    add("liveness steps that are their own parents", path)

    # very long names
    for table, column in (
        ("programs", "name"),
        ("compute_sets", "name"),
        ("vertex_types", "name"),
        ("variables", "name"),
        ("runs", "name"),
    ):
        path = _copy(source, out, f"long-{table}")
        _sql(
            path,
            f"UPDATE \"{table}\" SET \"{column}\" = printf('%.*c', 5000000, 'x') "
            f'WHERE rowid IN (SELECT rowid FROM "{table}" LIMIT 3)',
        )
        add(f"5,000,000-character {table}.{column}", path)

    # bombs: small files that would make a decoder allocate without bound (issue 17)
    cases.extend(make_bombs(source, out / "bombs"))

    if debug is not None:
        cases.extend(_debug_cases(source, pathlib.Path(debug), out))
    return cases


def _debug_cases(source: pathlib.Path, debug: pathlib.Path, out: pathlib.Path) -> list[dict]:
    """Damaged debug.cbor files beside an intact report."""
    import cbor2

    cases = []
    raw = debug.read_bytes()
    for name, content in (
        ("truncated debug.cbor", raw[: len(raw) // 2]),
        ("empty debug.cbor", b""),
        ("debug.cbor of random bytes", bytes(np.random.default_rng(3).integers(0, 256, 2000, dtype=np.uint8))),
        ("debug.cbor that is a number", cbor2.dumps(42)),
    ):
        path = out / (name.replace(" ", "-").replace(".", "_") + ".cbor")
        path.write_bytes(content)
        cases.append({"name": name, "path": str(source), "debug": str(path)})
    try:
        document = cbor2.loads(raw)
    except Exception:
        return cases
    contexts = _find_context_list(document)
    if contexts and len(contexts) >= 2 and isinstance(contexts[0], dict) and "parents" in contexts[0]:
        first, second = contexts[0], contexts[1]
        first["parents"] = [second.get("id")]
        second["parents"] = [first.get("id")]
        path = out / "debug-cycle.cbor"
        path.write_bytes(cbor2.dumps(document))
        cases.append({"name": "debug contexts that are each other's parents", "path": str(source), "debug": str(path)})
        contexts[0]["name"] = "y" * 2_000_000
        path = out / "debug-long-name.cbor"
        path.write_bytes(cbor2.dumps(document))
        cases.append({"name": "a 2,000,000-character debug context name", "path": str(source), "debug": str(path)})
    return cases


def _find_context_list(document):
    if isinstance(document, list):
        return document
    if isinstance(document, dict):
        for value in document.values():
            if isinstance(value, list) and value and isinstance(value[0], dict):
                return value
    return None


# -- bombs: small files that would make a decoder allocate without bound -----------------------------------------


def _zeros_stream(schema, rows_per_batch: int, batches: int, make_batch, compression: str | None) -> bytes:
    """An Arrow IPC stream of `batches` batches of zeros (IPC body compression as given)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, schema, options=options) as writer:
        batch = make_batch(rows_per_batch)
        for _ in range(batches):
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _matrix_shape(path: pathlib.Path, matrix: str) -> tuple[int, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT num_rows, num_cols FROM matrices WHERE name = ?", (matrix,)).fetchone()
    finally:
        conn.close()


def ipc_compression_bomb(
    source, out, *, batch_bytes: int = 512 << 20, batches: int = 3, matrix: str = "step_cycles_by_tile"
) -> pathlib.Path:
    """Issue 17 item 2: a chunk stored with codec `none` that holds an IPC stream with IPC-level zstd
    body compression, `batches` batches of `batch_bytes` zeros each (a few hundred kB on disk)."""
    import pyarrow as pa

    source, out = pathlib.Path(source), pathlib.Path(out)
    _num_rows, num_cols = _matrix_shape(source, matrix)
    rows = max(1, batch_bytes // (8 * num_cols))
    values_type = pa.list_(pa.uint64(), num_cols)
    schema = pa.schema([pa.field("values", values_type, nullable=False)])

    def make(n):
        flat = pa.array(np.zeros(n * num_cols, dtype=np.uint64))
        return pa.record_batch([pa.FixedSizeListArray.from_arrays(flat, num_cols)], schema=schema)

    blob = _zeros_stream(schema, rows, batches, make, "zstd")
    path = out / "bomb-ipc-compression.pop"
    shutil.copyfile(source, path)
    _sql(
        path,
        f"UPDATE matrix_chunks SET codec = 'none', raw_size = {len(blob)}, data = x'{blob.hex()}' "
        f"WHERE matrix = '{matrix}' AND first_row = 0",
    )
    return path


def declared_rows_bomb(source, out, *, rows: int = 2_000_000, matrix: str = "step_cycles_by_tile") -> pathlib.Path:
    """Issue 17 item 3: a matrix whose index and one chunk declare `rows` rows (the report has far fewer)."""
    from formats.pop.arrow_chunks import encode_chunk

    source, out = pathlib.Path(source), pathlib.Path(out)
    _num_rows, num_cols = _matrix_shape(source, matrix)
    codec, raw_size, blob = encode_chunk(matrix, 0, np.zeros((rows, num_cols), dtype=np.uint8), "zstd")
    path = out / "bomb-declared-rows.pop"
    shutil.copyfile(source, path)
    conn = sqlite3.connect(path)
    try:
        conn.execute("DELETE FROM matrix_chunks WHERE matrix = ?", (matrix,))
        conn.execute(
            "INSERT INTO matrix_chunks (matrix, first_row, num_rows, codec, raw_size, data) VALUES (?, 0, ?, ?, ?, ?)",
            (matrix, rows, codec, raw_size, blob),
        )
        conn.execute("UPDATE matrices SET num_rows = ?, rows_per_chunk = ? WHERE name = ?", (rows, rows, matrix))
        conn.commit()
    finally:
        conn.close()
    return path


def trace_compression_bomb(source, out, *, batch_rows: int = 20_000_000, batches: int = 3) -> pathlib.Path:
    """Issue 17 item 2 in a .pvti: thread_event_columns streams with IPC body compression, of far more
    rows than the thread has events."""
    import pyarrow as pa

    from formats.trace.writer import thread_columns_schema

    schema = thread_columns_schema()

    def make(n):
        zeros = pa.array(np.zeros(n, dtype=np.int64))
        labels = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array(["x"]))
        columns = [labels if field.name == "label" else zeros.cast(field.type) for field in schema]
        return pa.record_batch(columns, schema=schema)

    blob = _zeros_stream(schema, batch_rows, batches, make, "zstd")
    path = pathlib.Path(out) / "bomb-ipc-compression.pvti"
    shutil.copyfile(source, path)
    _sql(path, "UPDATE thread_event_columns SET data = ?".replace("?", f"x'{blob.hex()}'"))
    return path


def debug_sharing_bomb(levels: int = 25) -> bytes:
    """Issue 17 item 4: a debug.cbor of about 250 bytes whose CBOR value sharing (tags 28/29) makes a
    context's data a tree of 2^levels leaves."""
    import cbor2

    def uint(n: int) -> bytes:
        return bytes([n]) if n < 24 else bytes([0x18, n])

    dag = bytearray(b"\x98" + bytes([levels + 1]))  # an array of the levels, each shareable
    dag += b"\xd8\x1c\x80"  # 28([])
    for k in range(levels):
        dag += b"\xd8\x1c\x82\xd8\x1d" + uint(k) + b"\xd8\x1d" + uint(k)  # 28([29(k), 29(k)])
    context = bytearray(b"\xa5")  # a map of five pairs
    for key, value in (("id", 1), ("layer", "poplar"), ("name", "bomb"), ("parentIds", [])):
        context += cbor2.dumps(key) + cbor2.dumps(value)
    context += cbor2.dumps("shared") + bytes(dag)
    return (
        b"\xa2"
        + cbor2.dumps("pva_debug_info")
        + cbor2.dumps("1.0")
        + cbor2.dumps("contexts")
        + b"\x81"
        + bytes(context)
    )


def graph_count_bomb(source, out) -> pathlib.Path:
    """Issue 17 item 6: every graph count set to 2^63-1."""
    path = pathlib.Path(out) / "bomb-graph-counts.pop"
    shutil.copyfile(source, path)
    top = (1 << 63) - 1
    _sql(path, f"UPDATE graph SET num_compute_sets = {top}, num_edges = {top}, num_vars = {top}, num_vertices = {top}")
    return path


def make_bombs(report, out, *, trace=None) -> list[dict]:
    """Every bomb as hostile cases (small sizes, so the whole corpus stays quick)."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cases = [
        {"name": "IPC body-compression bomb", "path": str(ipc_compression_bomb(report, out, batch_bytes=64 << 20))},
        {"name": "declared-rows bomb", "path": str(declared_rows_bomb(report, out, rows=200_000))},
        {"name": "graph counts of 2^63-1", "path": str(graph_count_bomb(report, out))},
    ]
    debug = out / "bomb-sharing.cbor"
    debug.write_bytes(debug_sharing_bomb())
    cases.append({"name": "debug.cbor value-sharing bomb", "path": str(report), "debug": str(debug)})
    return cases


def tiny_debug_contexts(path, count: int) -> pathlib.Path:
    """A debug.cbor of `count` tiny contexts, as the writer lays it out (an indefinite array): context
    n (from 1) is ``{"id": n, "parentIds": [n // 2]}``, context 1 has no parent."""
    import cbor2

    path = pathlib.Path(path)
    with open(path, "wb") as handle:
        handle.write(b"\xa2" + cbor2.dumps("pva_debug_info") + cbor2.dumps("1.0") + cbor2.dumps("contexts") + b"\x9f")
        handle.write(cbor2.dumps({"id": 1}))
        chunk = bytearray()
        for n in range(2, count + 1):
            chunk += b"\xa2\x62id\x1a" + n.to_bytes(4, "big") + b"\x69parentIds\x81\x1a" + (n // 2).to_bytes(4, "big")
            if len(chunk) > 1 << 20:
                handle.write(chunk)
                chunk.clear()
        handle.write(chunk + b"\xff")
    return path
