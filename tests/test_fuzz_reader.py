"""Fuzzing the report reader: byte-level and structural mutations of valid reports, with a fixed budget.

Hypothesis generates the mutations (derandomized: the same examples every run, so CI is
reproducible; set PVA_FUZZ_READER_EXAMPLES for a longer, randomised campaign). Each mutated report
goes through opening and walking the object model, decoding every matrix chunk, and `pva check`,
in a worker process limited in address space, with an alarm per operation and a hard timeout per
example. Every operation must succeed or raise a pva.PvaError; a crash, a hang, a memory blow-up
or any other exception fails the test and names the example.

Mutations: bit flips, overwritten runs, zeroed, copied and swapped pages, truncations, insertions
and deletions, and rewritten header fields (page size and count, schema cookie, text encoding,
application id, format version); through SQL, wrongly typed, out-of-range, NULL and huge values
in any column of any table, deleted and duplicated rows, dropped tables and indexes, tables
replaced by views, and damaged Arrow chunks; and damaged debug.cbor files.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import pathlib
import resource
import select
import shutil
import sqlite3
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formats.pop.schema import profile_schema

WORKER = pathlib.Path(__file__).parent / "support" / "fuzz_reader_worker.py"
#: Examples per fuzz test (three tests). PVA_FUZZ_READER_EXAMPLES=5000 runs a long, randomised campaign.
EXAMPLES = int(os.environ.get("PVA_FUZZ_READER_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize="PVA_FUZZ_READER_EXAMPLES" not in os.environ,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
#: Address space of the worker; numpy and pyarrow reserve a lot of virtual memory up front.
MEMORY_LIMIT = 3 << 30
SECONDS_PER_OPERATION = 20
SECONDS_PER_EXAMPLE = 90
PAGE = 4096


class Worker:
    """A reader process fed one mutated report at a time; restarted when it dies or hangs."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.stats: collections.Counter = collections.Counter()
        self.examples = 0

    def _start(self) -> None:
        def limit():
            resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(SECONDS_PER_OPERATION)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=limit,
        )

    def read(self, path: pathlib.Path, debug: pathlib.Path | None = None, ops: list[str] | None = None) -> list[dict]:
        if self.proc is None or self.proc.poll() is not None:
            self.stop()
            self._start()
        self.examples += 1
        self.proc.stdin.write(
            json.dumps({"path": str(path), "debug": str(debug) if debug else None, "ops": ops}) + "\n"
        )
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], SECONDS_PER_EXAMPLE)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            hung = self.proc.poll() is None
            self.stop()
            outcome = {
                "op": "all",
                "outcome": "hang" if hung else "crash",
                "detail": "no answer" if hung else f"worker died: {self._stderr[-1500:]}",
            }
            self.stats[outcome["outcome"]] += 1
            return [outcome]
        outcomes = json.loads(line)
        for o in outcomes:
            self.stats[o["outcome"]] += 1
        return outcomes

    _stderr = ""

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._stderr = self.proc.stderr.read() if self.proc.stderr else ""
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.close()
        self.proc = None


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.stop()
    print(f"\nreader fuzzing: {w.examples} examples, operations: {dict(w.stats)}")


def _assert_handled(outcomes: list[dict], what: str) -> None:
    bad = [o for o in outcomes if o["outcome"] not in ("ok", "pva_error")]
    assert not bad, f"{what}: " + "\n".join(f"{o['op']}: {o['outcome']}\n{o['detail']}" for o in bad)


# -- byte-level mutations --------------------------------------------------------------------------------------

#: Header fields (offset, size) worth rewriting: page size, write/read versions, reserved bytes, change
#: counter, page count, freelist, schema cookie and format, cache size, text encoding, user version,
#: application id, version-valid-for.
HEADER_FIELDS = [
    (16, 2),
    (18, 1),
    (19, 1),
    (20, 1),
    (24, 4),
    (28, 4),
    (32, 4),
    (36, 4),
    (40, 4),
    (44, 4),
    (48, 4),
    (56, 4),
    (60, 4),
    (68, 4),
    (92, 4),
]
BYTE_VALUES = [0x00, 0xFF, 0x7F, 0x80, 0x01, 0x0D, 0x05, 0x02, 0x0A]


@st.composite
def byte_mutations(draw, size: int):
    """A list of (kind, arguments) edits of a file of `size` bytes (4096-byte pages)."""
    pages = size // PAGE
    edits = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(
            st.sampled_from(
                [
                    "flip",
                    "flip",
                    "byte",
                    "run",
                    "page-header",
                    "header",
                    "zero-page",
                    "copy-page",
                    "swap-pages",
                    "truncate",
                    "insert",
                    "delete",
                ]
            )
        )
        page = draw(st.integers(0, pages - 1))
        if kind == "flip":
            edits.append((kind, draw(st.integers(0, size - 1)), draw(st.integers(0, 7))))
        elif kind == "byte":
            edits.append((kind, draw(st.integers(0, size - 1)), draw(st.sampled_from(BYTE_VALUES))))
        elif kind == "run":
            edits.append((kind, draw(st.integers(0, size - 1)), draw(st.binary(min_size=1, max_size=64))))
        elif kind == "page-header":  # the b-tree page header and the first cell pointers
            base = 100 if page == 0 else 0
            edits.append(("byte", page * PAGE + base + draw(st.integers(0, 15)), draw(st.sampled_from(BYTE_VALUES))))
        elif kind == "header":
            offset, width = draw(st.sampled_from(HEADER_FIELDS))
            edits.append(("run", offset, draw(st.binary(min_size=width, max_size=width))))
        elif kind in ("zero-page", "copy-page", "swap-pages"):
            edits.append((kind, page, draw(st.integers(0, pages - 1))))
        elif kind == "truncate":
            edits.append((kind, draw(st.integers(0, size - 1))))
        elif kind == "insert":
            edits.append((kind, draw(st.integers(0, size - 1)), draw(st.binary(min_size=1, max_size=PAGE))))
        else:
            edits.append((kind, draw(st.integers(0, size - 1)), draw(st.integers(1, PAGE))))
    return edits


def apply_bytes(data: bytes, edits) -> bytes:
    out = bytearray(data)
    for kind, *args in edits:
        if not out:
            break
        if kind == "flip":
            offset, bit = args
            if offset < len(out):
                out[offset] ^= 1 << bit
        elif kind == "byte":
            offset, value = args
            if offset < len(out):
                out[offset] = value
        elif kind == "run":
            offset, run = args
            out[offset : offset + len(run)] = run[: max(0, len(out) - offset)]
        elif kind in ("zero-page", "copy-page", "swap-pages"):
            a, b = (p * PAGE for p in args)
            if max(a, b) + PAGE > len(out):
                continue
            if kind == "zero-page":
                out[a : a + PAGE] = bytes(PAGE)
            elif kind == "copy-page":
                out[b : b + PAGE] = out[a : a + PAGE]
            else:
                out[a : a + PAGE], out[b : b + PAGE] = out[b : b + PAGE], out[a : a + PAGE]
        elif kind == "truncate":
            del out[args[0] :]
        elif kind == "insert":
            out[args[0] : args[0]] = args[1]
        else:
            del out[args[0] : args[0] + args[1]]
    return bytes(out)


def test_byte_level_mutations_of_a_report(worker, sample, tmp_path):
    base = pathlib.Path(sample.path).read_bytes()
    assert len(base) % PAGE == 0
    target = tmp_path / "fuzzed.pop"
    seen = collections.Counter()

    @FUZZ
    @given(edits=byte_mutations(len(base)))
    def run(edits):
        target.write_bytes(apply_bytes(base, edits))
        outcomes = worker.read(target)
        _assert_handled(outcomes, f"edits {edits!r}")
        seen.update(o["outcome"] for o in outcomes)

    run()
    assert seen["pva_error"] > 0 and seen["ok"] > 0, seen


# -- structural mutations through SQL -----------------------------------------------------------------------------

NASTY = [
    None,
    -1,
    0,
    1,
    7,
    2**31,
    2**32 + 1,
    2**63 - 1,
    -(2**63),
    1e308,
    -0.5,
    3.5,
    "",
    "x",
    "-1",
    "1e999",
    "NaN",
    "Sequence",
    "OnTileExecute",
    "\u0000",
    "\U0001f4a5" * 3,
    "a" * 100_000,
    b"",
    b"\x00\xff\x10",
    b"\x80" * 64,
]
COLUMNS = [(table, column) for table, spec in profile_schema().tables.items() for column in spec.column_names]
TABLES = sorted(profile_schema().tables)


@st.composite
def sql_mutations(draw):
    """A list of structural edits of a report, applied through SQLite."""
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(
            st.sampled_from(
                [
                    "set",
                    "set",
                    "set",
                    "set-all",
                    "delete",
                    "delete-all",
                    "duplicate",
                    "drop",
                    "view",
                    "drop-index",
                    "chunk",
                    "chunk",
                    "matrix",
                ]
            )
        )
        if kind in ("set", "set-all"):
            table, column = draw(st.sampled_from(COLUMNS))
            edits.append((kind, table, column, draw(st.sampled_from(NASTY)), draw(st.integers(0, 50))))
        elif kind in ("delete", "delete-all", "duplicate", "drop", "view"):
            edits.append((kind, draw(st.sampled_from(TABLES)), draw(st.integers(0, 50))))
        elif kind == "drop-index":
            edits.append((kind, draw(st.integers(0, 30))))
        elif kind == "chunk":  # damage the compressed Arrow stream of one chunk
            edits.append(
                (
                    kind,
                    draw(st.integers(0, 200)),
                    draw(st.integers(0, 10_000)),
                    draw(st.integers(0, 255)),
                    draw(st.sampled_from(["flip", "cut", "raw_size", "codec"])),
                )
            )
        else:  # a matrix's declared shape
            edits.append(
                (
                    kind,
                    draw(st.integers(0, 20)),
                    draw(st.sampled_from(["num_rows", "num_cols", "rows_per_chunk"])),
                    draw(st.sampled_from([0, 1, -1, 2**31, 2**62, None, "x"])),
                )
            )
    return edits


def _key(conn, table: str) -> str:
    """How to name one row of a table: its rowid, or its primary key in a WITHOUT ROWID table."""
    try:
        conn.execute(f'SELECT rowid FROM "{table}" LIMIT 0')
        return "rowid"
    except sqlite3.OperationalError:
        keys = [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")') if row[5]]
        return "(" + ", ".join(f'"{k}"' for k in keys) + ")"


def apply_sql(path: pathlib.Path, edits) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for kind, *args in edits:
            # An edit SQLite refuses (a constraint, a table already dropped) is skipped.
            with contextlib.suppress(sqlite3.Error):
                _apply_one(conn, kind, args)
    finally:
        conn.close()


def _apply_one(conn, kind: str, args) -> None:
    if kind in ("set", "set-all"):
        table, column, value, row = args
        where = ""
        if kind == "set":
            key = _key(conn, table)
            where = f' WHERE {key} IN (SELECT {key} FROM "{table}" LIMIT 1 OFFSET {row})'
        conn.execute(f'UPDATE "{table}" SET "{column}" = ?{where}', (value,))
    elif kind == "delete":
        table, row = args
        key = _key(conn, table)
        conn.execute(f'DELETE FROM "{table}" WHERE {key} IN (SELECT {key} FROM "{table}" LIMIT 1 OFFSET {row})')
    elif kind == "delete-all":
        conn.execute(f'DELETE FROM "{args[0]}"')
    elif kind == "duplicate":
        table, row = args
        for (index,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", (table,)
        ).fetchall():
            conn.execute(f'DROP INDEX "{index}"')
        conn.execute(f'INSERT INTO "{table}" SELECT * FROM "{table}" LIMIT 1 OFFSET {row}')
    elif kind == "drop":
        conn.execute(f'DROP TABLE "{args[0]}"')
    elif kind == "view":
        table = args[0]
        conn.execute(f'ALTER TABLE "{table}" RENAME TO "{table}_real"')
        conn.execute(f'CREATE VIEW "{table}" AS SELECT * FROM "{table}_real"')
    elif kind == "drop-index":
        indexes = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name"
            )
        ]
        if indexes:
            conn.execute(f'DROP INDEX "{indexes[args[0] % len(indexes)]}"')
    elif kind == "chunk":
        which, offset, value, how = args
        rows = conn.execute("SELECT rowid, data, raw_size FROM matrix_chunks ORDER BY rowid").fetchall()
        if not rows:
            return
        rowid, data, raw_size = rows[which % len(rows)]
        data = bytearray(data)
        if how == "flip" and data:
            data[offset % len(data)] ^= value or 1
        elif how == "cut":
            del data[offset % (len(data) + 1) :]
        elif how == "raw_size":
            raw_size = [0, -1, 1, raw_size - 1, raw_size + 1, 2**40, 2**63 - 1][value % 7]
        else:
            conn.execute(
                "UPDATE matrix_chunks SET codec = ? WHERE rowid = ?",
                (["none", "lz4", "zstd", "gzip", ""][value % 5], rowid),
            )
        conn.execute("UPDATE matrix_chunks SET data = ?, raw_size = ? WHERE rowid = ?", (bytes(data), raw_size, rowid))
    elif kind == "matrix":
        which, column, value = args
        names = [r[0] for r in conn.execute("SELECT name FROM matrices ORDER BY name")]
        if names:
            conn.execute(f'UPDATE matrices SET "{column}" = ? WHERE name = ?', (value, names[which % len(names)]))


def test_structural_mutations_of_a_report(worker, sample, tmp_path):
    target = tmp_path / "fuzzed.pop"
    seen = collections.Counter()

    @FUZZ
    @given(edits=sql_mutations())
    def run(edits):
        shutil.copyfile(sample.path, target)
        apply_sql(target, edits)
        outcomes = worker.read(target)
        _assert_handled(outcomes, f"edits {edits!r}")
        seen.update(o["outcome"] for o in outcomes)

    run()
    assert seen["pva_error"] > 0 and seen["ok"] > 0, seen


# -- debug information ----------------------------------------------------------------------------------------


@st.composite
def cbor_mutations(draw, size: int):
    edits = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "byte", "byte", "run", "truncate", "insert", "delete"]))
        offset = draw(st.integers(0, size - 1))
        if kind == "flip":
            edits.append((kind, offset, draw(st.integers(0, 7))))
        elif kind == "byte":  # CBOR initial bytes: huge lengths, indefinite items, tags, break
            edits.append(
                (
                    kind,
                    offset,
                    draw(
                        st.sampled_from(
                            [0x1B, 0x5B, 0x7B, 0x9B, 0xBB, 0x9F, 0xBF, 0xFF, 0xC0, 0xD8, 0xF9, 0xFB, 0x00, 0x80, 0xA0]
                        )
                    ),
                )
            )
        elif kind == "run":
            edits.append((kind, offset, draw(st.binary(min_size=1, max_size=16))))
        elif kind == "truncate":
            edits.append((kind, offset))
        elif kind == "insert":
            edits.append((kind, offset, draw(st.binary(min_size=1, max_size=32))))
        else:
            edits.append((kind, offset, draw(st.integers(1, 64))))
    return edits


def test_mutations_of_debug_information(worker, simulated, tmp_path):
    report = simulated / "profile.pop"
    base = (simulated / "debug.cbor").read_bytes()
    target = tmp_path / "debug.cbor"
    seen = collections.Counter()

    @FUZZ
    @given(edits=cbor_mutations(len(base)))
    def run(edits):
        target.write_bytes(apply_bytes(base, edits))
        outcomes = worker.read(report, target, ["open+walk"])
        _assert_handled(outcomes, f"edits {edits!r}")
        seen.update(o["outcome"] for o in outcomes)

    run()
    assert seen["pva_error"] > 0 and seen["ok"] > 0, seen


# -- what fuzzing found, kept as fixed cases -------------------------------------------------------------------


FOUND = [
    pytest.param("bytes", [("run", 16, b"\x00\x00")], id="page-size-0"),
    pytest.param("sql", [("matrix", 3, "num_rows", 2**31)], id="matrix-rows-beyond-its-chunks"),
    pytest.param("sql", [("set", "always_live_vars", "var", None, 0)], id="always-live-variable-null"),
    pytest.param("sql", [("set", "vars_info", "tile", 3.5, 0)], id="lowered-variable-tile-real"),
    pytest.param("sql", [("set", "vars_info", "tile", "x", 0)], id="lowered-variable-tile-text"),
    pytest.param("sql", [("set", "liveness_tiles", "tile", "x", 0)], id="liveness-tile-text"),
    pytest.param("cbor", [("delete", 42, 1)], id="debug-context-key-not-text"),
    pytest.param("chunk-name", [], id="arrow-field-name-not-utf8"),
]


@pytest.mark.parametrize("kind, edits", FOUND)
def test_cases_fuzzing_found(worker, sample, simulated, tmp_path, kind, edits):
    debug = None
    if kind == "bytes":
        target = tmp_path / "fuzzed.pop"
        target.write_bytes(apply_bytes(pathlib.Path(sample.path).read_bytes(), edits))
    elif kind == "sql":
        target = tmp_path / "fuzzed.pop"
        shutil.copyfile(sample.path, target)
        apply_sql(target, edits)
    elif kind == "cbor":
        target, debug = simulated / "profile.pop", tmp_path / "debug.cbor"
        debug.write_bytes(apply_bytes((simulated / "debug.cbor").read_bytes(), edits))
    else:  # a matrix chunk whose Arrow field name is not UTF-8
        target = tmp_path / "fuzzed.pop"
        shutil.copyfile(sample.path, target)
        conn = sqlite3.connect(target)
        try:
            rowid, codec, data, raw_size = conn.execute(
                "SELECT rowid, codec, data, raw_size FROM matrix_chunks ORDER BY rowid LIMIT 1"
            ).fetchone()
            import pyarrow as pa

            raw = bytearray(
                pa.Codec(codec).decompress(data, decompressed_size=raw_size).to_pybytes() if codec != "none" else data
            )
            raw[raw.find(b"values") + 1] ^= 0x80
            conn.execute(
                "UPDATE matrix_chunks SET codec = 'none', data = ?, raw_size = ? WHERE rowid = ?",
                (bytes(raw), len(raw), rowid),
            )
            conn.commit()
        finally:
            conn.close()
    outcomes = worker.read(target, debug, ["open+walk"] if debug else None)
    _assert_handled(outcomes, f"{kind} {edits!r}")
    assert any(o["outcome"] == "pva_error" for o in outcomes), outcomes
