"""Reading never writes: every read-only command leaves a report, its debug.cbor and its trace byte-identical.

Each command runs on a simulated report directory (profile.pop, debug.cbor, a .pvti trace); afterwards
every file of that directory has the same SHA-256, size and modification time as before, and no file
appeared beside them (no SQLite journal, WAL or shared-memory file, no output written next to the
input). The package sources are also checked for the ways a reader could execute what a file holds:
pickle, marshal, eval and exec, extension loading.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import io
import os
import pathlib
import pickle
import shutil
import sqlite3

import pyarrow as pa
import pytest
from report_walk import walk

import pva
from formats.errors import PvaError
from formats.pop.arrow_chunks import decode_chunk
from formats.pop.reader import ProfileReader
from pva.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _snapshot(directory: pathlib.Path) -> dict[str, tuple[str, int, int]]:
    """(sha256, size, mtime) of every file of a directory, by name."""
    out = {}
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        stat = entry.stat()
        out[entry.name] = (
            hashlib.sha256(pathlib.Path(entry.path).read_bytes()).hexdigest(),
            stat.st_size,
            stat.st_mtime_ns,
        )
    return out


@pytest.fixture(scope="module")
def reports(simulated, sample, tmp_path_factory):
    """A copy of the simulated run (report, debug.cbor, trace) and of the sample report, with their snapshots."""
    root = tmp_path_factory.mktemp("readonly")
    run = root / "reports" / "run"
    shutil.copytree(simulated, run)
    other = root / "reports" / "other"
    other.mkdir()
    shutil.copyfile(sample.path, other / "profile.pop")
    (trace,) = run.glob("*.pvti")
    out = root / "out"
    out.mkdir()
    return {
        "run": run,
        "other": other,
        "trace": trace,
        "out": out,
        "root": root / "reports",
        "before": {run: _snapshot(run), other: _snapshot(other)},
    }


def _cli(*args: str) -> int:
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
        status = main([str(a) for a in args])
    assert out.getvalue() or err.getvalue(), f"pva {args[0]} printed nothing"
    return status


def _open_and_walk(report: str, debug: str) -> int:
    with pva.openReport(report, debug) as opened:
        assert walk(opened) > 100
        for program in opened.compilation.programs:
            program.accept(pva.ProgramVisitor())
        contexts = opened.compilation.debugContexts()
        assert len(contexts) > 10 and all(c.fullPath for c in contexts)  # reads debug.cbor
    return 0


def _read_trace(path: str) -> int:
    with pva.openTrace(path) as trace:
        assert sum(len(t.events) for p in trace.processes for t in p.threads) > 0
    return 0


#: (id, arguments with {report}, {debug}, {other}, {trace}, {root}, {out} placeholders, accepted exit statuses)
COMMANDS = [
    ("info", ["info", "{report}"], {0}),
    ("info-json", ["info", "{report}", "--json"], {0}),
    (
        "summary",
        [
            "summary",
            "{report}",
            "--show-var-storage",
            "--show-optimizations",
            "--show-execution-steps",
            "--show-per-ipu-memory",
        ],
        {0},
    ),
    ("summary-json", ["summary", "{report}", "--json"], {0}),
    ("sql", ["sql", "{report}", "SELECT type, count(*) FROM programs GROUP BY type"], {0}),
    ("sql-pragma", ["sql", "{report}", "PRAGMA integrity_check"], {0}),
    ("sql-refused-write", ["sql", "{report}", "DELETE FROM programs"], {2}),
    ("sql-refused-attach", ["sql", "{report}", "ATTACH DATABASE '{out}/x.db' AS x"], {2}),
    ("tables", ["tables", "{report}"], {0}),
    ("tables-columns", ["tables", "{report}", "--columns", "programs"], {0}),
    ("check", ["check", "{report}"], {0}),
    ("check-json", ["check", "{report}", "--json"], {0}),
    ("optime-total", ["optime", "{report}"], {0}),
    ("optime-each", ["optime", "{report}", "--mode", "each", "--debug", "{debug}"], {0}),
    ("estimate-json", ["estimate", "{report}", "--json"], {0}),
    ("estimate-file", ["estimate", "{report}", "-o", "{out}"], {0}),
    ("diff", ["diff", "{other}", "{report}"], {0, 1}),
    ("diff-json", ["diff", "{report}", "{report}", "--json"], {0}),
    ("query", ["query", "{root}", "SELECT report, count(*) FROM programs GROUP BY report"], {0}),
    ("export-parquet", ["export", "{report}", "--format", "parquet", "-o", "{out}/parquet"], {0}),
    ("export-csv", ["export", "{report}", "--format", "csv", "-o", "{out}/csv"], {0}),
    ("export-hdf5", ["export", "{report}", "--format", "hdf5", "-o", "{out}/matrices.h5"], {0}),
    ("export-chrome-trace", ["export", "{report}", "--format", "chrome-trace", "-o", "{out}/run.json"], {0}),
    ("export-trace-file", ["export", "{trace}", "--format", "chrome-trace", "-o", "{out}/host.json"], {0}),
    ("export-legacy-json", ["export", "{report}", "--format", "legacy-json", "-o", "{out}/legacy.json"], {0}),
    ("export-legacy-cbor", ["export", "{report}", "--format", "legacy-cbor", "-o", "{out}/legacy-cbor"], {0}),
    ("html", ["html", "{report}", "-o", "{out}/report.html"], {0}),
    ("html-compare", ["html", "--compare", "{other}", "{report}", "-o", "{out}/compare.html"], {0, 1}),
    *[
        (f"plot-{kind}", ["plot", "{report}", "--kind", kind, "-o", f"{{out}}/{kind}.png"], {0})
        for kind in ("memory", "liveness", "timeline", "vertex-types")
    ],
]


@pytest.mark.parametrize("args, statuses", [pytest.param(a, s, id=i) for i, a, s in COMMANDS])
def test_read_only_command_leaves_the_report_byte_identical(reports, args, statuses):
    if args[0] == "query":
        pytest.importorskip("duckdb")
    if args[0] == "plot":
        pytest.importorskip("matplotlib")
    run = reports["run"]
    places = {
        "report": run / "profile.pop",
        "debug": run / "debug.cbor",
        "other": reports["other"] / "profile.pop",
        "trace": reports["trace"],
        "root": reports["root"],
        "out": reports["out"],
    }
    argv = [a.format(**places) for a in args]
    assert _cli(*argv) in statuses
    for directory, before in reports["before"].items():
        assert _snapshot(directory) == before, f"pva {' '.join(args)} changed {directory}"


@pytest.mark.parametrize("reader", ["open+walk", "trace"])
def test_python_api_reads_leave_the_files_byte_identical(reports, reader):
    run = reports["run"]
    if reader == "open+walk":
        _open_and_walk(str(run / "profile.pop"), str(run / "debug.cbor"))
    else:
        _read_trace(str(reports["trace"]))
    assert _snapshot(run) == reports["before"][run]


def test_reading_a_report_whose_directory_and_file_are_read_only(reports, tmp_path):
    """Opening needs no write access and creates nothing (the reader never asks SQLite for a journal)."""
    copy = tmp_path / "ro"
    shutil.copytree(reports["run"], copy)
    before = _snapshot(copy)
    for entry in copy.iterdir():
        entry.chmod(0o444)
    copy.chmod(0o555)
    try:
        assert _open_and_walk(str(copy / "profile.pop"), str(copy / "debug.cbor")) == 0
        assert _cli("check", copy / "profile.pop") == 0
    finally:
        copy.chmod(0o755)
    assert _snapshot(copy) == before


# -- nothing a file holds is executed ---------------------------------------------------------------------

#: Modules that turn bytes into code or arbitrary objects.
FORBIDDEN_MODULES = {"pickle", "_pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle", "joblib", "copyreg"}
#: Built-ins that run text as code.
FORBIDDEN_BUILTINS = {"eval", "exec", "compile", "__import__", "execfile"}
#: Methods that load native code into SQLite or unpickle.
FORBIDDEN_METHODS = {"enable_load_extension", "load_extension", "read_pickle", "loads_pickle"}


def _package_sources() -> list[pathlib.Path]:
    files = [p for package in ("pva", "formats", "simulator", "schemas") for p in (ROOT / package).rglob("*.py")]
    assert len(files) > 50
    return files


def test_package_sources_never_unpickle_eval_or_load_extensions():
    found = []
    for path in _package_sources():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [
                    f"{where}:{node.lineno}: import {a.name}"
                    for a in node.names
                    if a.name.split(".")[0] in FORBIDDEN_MODULES
                ]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FORBIDDEN_MODULES:
                found.append(f"{where}:{node.lineno}: from {node.module} import")
            elif isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Name) and func.id in FORBIDDEN_BUILTINS:
                    found.append(f"{where}:{node.lineno}: {func.id}()")
                if isinstance(func, ast.Attribute) and func.attr in FORBIDDEN_METHODS:
                    found.append(f"{where}:{node.lineno}: .{func.attr}()")
                for keyword in node.keywords:
                    if keyword.arg == "allow_pickle" and not (
                        isinstance(keyword.value, ast.Constant) and keyword.value.value is False
                    ):
                        found.append(f"{where}:{node.lineno}: allow_pickle={ast.unparse(keyword.value)}")
            elif isinstance(node, ast.Name) and node.id in ("eval", "exec") and isinstance(node.ctx, ast.Load):
                found.append(f"{where}:{node.lineno}: reference to {node.id}")
    assert found == []


def test_the_scan_catches_what_it_looks_for(tmp_path):
    """The source scan is not vacuous: a module using each forbidden thing is reported."""
    bad = "import pickle\nfrom marshal import loads\nx = eval('1')\nc.enable_load_extension(True)\nnp.load(f, allow_pickle=True)\n"
    tree = ast.parse(bad)
    kinds = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            kinds |= {a.name for a in node.names if a.name in FORBIDDEN_MODULES}
        elif isinstance(node, ast.ImportFrom) and node.module in FORBIDDEN_MODULES:
            kinds.add(node.module)
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_BUILTINS:
                kinds.add(node.func.id)
            if isinstance(node.func, ast.Attribute) and node.func.attr in FORBIDDEN_METHODS:
                kinds.add(node.func.attr)
            kinds |= {k.arg for k in node.keywords if k.arg == "allow_pickle"}
    assert kinds == {"pickle", "marshal", "eval", "enable_load_extension", "allow_pickle"}


class _Planted:
    """Unpickling this object creates a file: the proof that a reader ran code from a file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def _planted_chunk(marker: pathlib.Path, rows: int, cols: int) -> bytes:
    """An Arrow IPC stream whose column claims to be a pickled Python extension type (CVE-2023-47248)."""
    storage = pa.FixedSizeListArray.from_arrays(pa.array([1] * (rows * cols), type=pa.uint32()), cols)
    field = pa.field(
        "values",
        storage.type,
        nullable=False,
        metadata={
            b"ARROW:extension:name": b"arrow.py_extension_type",
            b"ARROW:extension:metadata": pickle.dumps(_Planted(str(marker))),
        },
    )
    schema = pa.schema([field])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(pa.record_batch([storage], schema=schema))
    return sink.getvalue().to_pybytes()


def test_a_matrix_chunk_holding_a_pickle_is_never_unpickled(sample, tmp_path):
    marker = tmp_path / "executed"
    raw = _planted_chunk(marker, 2, 3)
    with contextlib.suppress(PvaError):
        decode_chunk(raw, codec="none", raw_size=len(raw), matrix="m", first_row=0, num_rows=2, num_cols=3, path="x")
    assert not marker.exists()
    # the same chunk planted in a report, read through the object model and pva check
    report = tmp_path / "profile.pop"
    shutil.copyfile(sample.path, report)
    conn = sqlite3.connect(report)
    try:
        name, first, rows = conn.execute(
            "SELECT c.matrix, c.first_row, c.num_rows FROM matrix_chunks c ORDER BY c.matrix, c.first_row LIMIT 1"
        ).fetchone()
        (cols,) = conn.execute("SELECT num_cols FROM matrices WHERE name = ?", (name,)).fetchone()
        planted = _planted_chunk(marker, rows, cols)
        conn.execute(
            "UPDATE matrix_chunks SET codec = 'none', raw_size = ?, data = ? WHERE matrix = ? AND first_row = ?",
            (len(planted), planted, name, first),
        )
        conn.commit()
    finally:
        conn.close()
    reader = ProfileReader(str(report))
    try:
        with contextlib.suppress(PvaError):
            list(reader.matrix(name).iter_chunks())
    finally:
        reader.close()
    with contextlib.suppress(PvaError), pva.openReport(str(report)) as opened:
        walk(opened)
    _cli("check", report)
    _cli("export", report, "--format", "hdf5", "-o", tmp_path / "m.h5")
    assert not marker.exists()
