"""The query layer (formats/pop/query): it holds all SQL; its methods answer with the values written.

Also the life cycle of a report: a closed report and what was read from it raise
ClosedReportError, and nothing read from a report can be pickled.
"""

from __future__ import annotations

import ast
import pathlib
import pickle
import re

import pytest

import pva
from formats.errors import CorruptReportError
from formats.pop.reader import ProfileReader

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: What makes a string SQL: a SELECT, or a FROM clause (SQL keywords as the project writes them).
_SQL = re.compile(r"\bSELECT\b|\bFROM\s")
#: Keyword arguments whose strings are documentation (argparse help and examples), not queries.
_DOC_KEYWORDS = {"help", "description", "epilog", "usage"}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.add(id(first.value))
    return found


def sql_strings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string of `source` that is SQL (docstrings and help texts excepted)."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in _DOC_KEYWORDS:
            skip.update(id(n) for n in ast.walk(node.value))
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            skip.update(id(v) for v in node.values)
        else:
            continue
        if _SQL.search(text):
            found.append((node.lineno, text))
    return found


def test_sql_scanner_finds_queries_and_skips_documentation():
    source = '''
"""Module docstring: SELECT x FROM y is prose here."""
import argparse

def f(reader, table):
    """Docstring: SELECT name FROM programs."""
    argparse.ArgumentParser().add_argument("q", help="one SQL statement (SELECT ...)", epilog="SELECT a FROM b")
    reader.query("SELECT id FROM programs")
    reader.query(f'SELECT count(*) FROM "{table}"')
    return "select lower case is not flagged", "FROM t"
'''
    assert [line for line, _text in sql_strings(source)] == [8, 9, 10]


def test_no_sql_in_pva_outside_the_analyses():
    """All SQL of pva's object model and command line lives in formats/pop/query (issue 13)."""
    offenders = []
    for path in sorted((ROOT / "pva").rglob("*.py")):
        relative = path.relative_to(ROOT)
        if relative.parts[:2] == ("pva", "analysis"):
            continue
        for line, text in sql_strings(path.read_text(encoding="utf-8")):
            offenders.append(f"{relative}:{line}: {text[:80]!r}")
    assert not offenders, "SQL belongs in formats/pop/query:\n" + "\n".join(offenders)


# -- methods of the query layer, on the sample report ----------------------------------------


@pytest.fixture()
def reader(sample):
    opened = ProfileReader(sample.path)
    yield opened
    opened.close()


def test_programs_questions(reader, sample):
    kinds = reader.program_kinds()
    assert kinds[:5] == [
        (0, "Sequence"),
        (1, "StreamCopyBegin"),
        (2, "StreamCopyMid"),
        (3, "StreamCopyEnd"),
        (4, "DoExchange"),
    ]
    assert len(kinds) == reader.row_count("programs") == 18
    names = reader.program_names()
    assert names[4] == "layer1/fwd/ExchangePre" and names[5] == "" and names[17] == "whileish"
    details = reader.program_details()
    assert details[10] == (None, None, None, None, 11, None)  # Call: its target
    assert details[15] == (None, None, None, None, None, 8)  # Sans: its tiles
    assert details[2][3] == "Host" and details[13][2] == "GS1"
    assert list(reader.program_children())[:3] == [(0, 1), (0, 2), (0, 3)]
    assert reader.control_program_ids() == [0] and reader.function_program_ids() == [11]
    assert [row[0] for row in reader.lowered_variables_of_program(5)] == [0, 1]


def test_compute_set_and_memory_questions(reader, sample):
    assert reader.compute_sets() == [(0, "init/copy", 0), (1, "layer1/fwd", 1), (2, "layer1/bwd", 2)]
    written = [row for row in sample.rows("compute_set_vertices") if row[1] == 1]
    assert reader.compute_set_vertices(1) == [(row[2], row[3], row[4], row[5]) for row in written]
    assert [row[0] for row in reader.compute_set_vertices(1)] == [1, 2]
    assert reader.compute_set_variable_ids(1) == [1, 2]
    written = {row[0]: row for row in sample.rows("memory_by_tile")}
    assert reader.memory_by_tile_extent() == (8, 0, 7)
    assert reader.memory_by_tile_columns(["total", "always_live_bytes"]) == [
        (written[t][1], written[t][9]) for t in range(8)
    ]
    with pytest.raises(ValueError, match="no column"):
        reader.memory_by_tile_columns(["total; DROP TABLE x"])
    assert reader.vertex_memory_of_tile(3) == [(0, 103, 4, 8, 12, 2, 40), (1, 103, 4, 8, 13, 2, 41)]


def test_variable_and_liveness_questions(reader):
    on_tile = reader.lowered_variables_on_tile(1)
    assert [(row[0], row[1], row[2], row[3]) for row in on_tile] == [
        (4, 1, "var0/t1", 64),
        (5, 1, "var1/t1", 128),
        (6, 1, "var2/t1", 192),
        (7, 1, "controlCode", 512),
    ]
    assert sorted(row[0] for row in reader.lowered_variables_by_id([31, 0, 17])) == [0, 17, 31]
    assert reader.lowered_variable_constraints(0, "element") == [1]
    # classes 0 (steps 0..3), 1 (2..5) and 2 (3..4, 6..7) hold 64, 128 and 192 bytes on each of 8 tiles;
    # controlCode is always live and never counts
    assert reader.not_always_live_bytes(0) == 8 * 64
    assert reader.not_always_live_bytes(3) == 8 * (64 + 128 + 192)
    assert reader.not_always_live_bytes(3, tiles=(0, 1)) == 64 + 128 + 192
    assert reader.not_always_live_bytes(7, tiles=(0, 4)) == 4 * 192
    assert reader.not_always_live_bytes_of_variable(3, 1) == 8 * 128
    assert {(var, size) for var, _name, size in reader.not_always_live_variables(3, tiles=(2, 3))} == {
        (0, 64),
        (1, 128),
        (2, 192),
    }
    assert reader.liveness_bytes_of_ipu(3, 1) == 2048
    assert reader.liveness_bytes_of_ipu(30, 1) is None


def test_execution_questions(reader, sample):
    assert reader.step_count() == (11, 0, 10)
    assert reader.step_column("program") == [1, 2, 3, 4, 5, 8, 9, None, 8, 12, 13]
    with pytest.raises(ValueError, match="expected one of"):
        reader.step_column("id) FROM steps; --")
    assert reader.cycle_totals() == (40, 240, 20, 4, 28, 4, 80, 120, 496)
    assert reader.cycle_totals(1) == (20, 120, 10, 2, 14, 2, 40, 60, 248)
    by_ipu = [row for row in sample.rows("steps_by_ipu") if row[1] == 1]
    count, low, high, cycles = reader.step_ipu_figure(1, "cycles")
    assert (count, low, high, cycles) == (11, 0, 10, [row[3] for row in by_ipu])
    # data figures only for the step types asked: step 3 is the DoExchange, step 10 the GlobalExchange
    *_, data_in = reader.step_ipu_figure(1, "data_in", step_types={"DoExchange", "GlobalExchange"})
    assert data_in == [0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 16]
    *_, starts = reader.step_ipu_figure(0, "all_cycles_from_min")
    assert starts == [row[5] + row[6] for row in sample.rows("steps_by_ipu") if row[1] == 0]
    assert reader.step_compute_sets(9) == [(2, None), (1, 0)]
    assert reader.step_vertex_instances(5, 1) == [(1, 4, 400, 100, 1), (2, 2, 60, 200, 2)]
    assert reader.run_parameters(0) == [("debug.instrument", "true")]
    assert [row[0] for row in reader.blocks_of_tile(0)] == [0, 1]


# -- a closed report --------------------------------------------------------------------------


def test_closed_report_raises_closed_report_error_naming_the_path(sample):
    report = pva.openReport(sample.path)
    programs = report.compilation.programs
    steps = report.execution.steps
    assert not report.closed
    report.close()
    assert report.closed
    assert repr(report) == "<Report 'profile.pop' (closed)>"
    assert repr(report.compilation) == "<CompilationReport (closed)>"
    for use in (
        lambda: programs[0].children,
        lambda: programs[4].name,
        lambda: steps[3].ipus[0].cycles,
        lambda: report.compilation.tiles[0].memory.total,
        lambda: report.sql("SELECT 1"),
    ):
        with pytest.raises(pva.ClosedReportError) as caught:
            use()
        assert sample.path in str(caught.value) and "closed" in str(caught.value)
        assert caught.value.path == sample.path
        assert isinstance(caught.value, ValueError) and not isinstance(caught.value, CorruptReportError)
    report.close()  # closing twice is harmless


def test_closed_reader_raises_before_touching_the_connection(sample):
    reader = ProfileReader(sample.path)
    rows = reader.program_children()
    first = next(rows)
    reader.close()
    assert first == (0, 1)
    with pytest.raises(pva.ClosedReportError):
        list(rows)
    with pytest.raises(pva.ClosedReportError):
        reader.program_kinds()


def test_what_was_read_before_closing_stays_readable(sample):
    with pva.openReport(sample.path) as report:
        program = report.compilation.programs[4]
        assert program.name == "layer1/fwd/ExchangePre"
        num_tiles = report.compilation.target.numTiles
    assert program.name == "layer1/fwd/ExchangePre" and num_tiles == 8
    assert pva.ClosedReportError is pva.pva_core.ClosedReportError


# -- pickling ---------------------------------------------------------------------------------


def test_pickling_a_report_or_what_was_read_from_it_is_refused_with_the_reason(sample):
    with pva.openReport(sample.path) as report:
        compilation = report.compilation
        execution = report.execution
        for obj in (
            report,
            compilation,
            execution,
            compilation.programs[5],
            compilation.tiles[0],
            compilation.tiles[0].memory,
            compilation.graph,
            compilation.computeSets[1],
            compilation.loweredVariables,
            execution.steps[0],
            execution.steps[0].ipus[0],
            execution.runs[0],
        ):
            with pytest.raises(TypeError, match=r"cannot be pickled.*file handle.*openReport\(path\)"):
                pickle.dumps(obj)


def test_a_closed_trace_says_so_and_nothing_of_a_trace_pickles(tmp_path):
    from formats.trace import tracing

    path = tmp_path / "host.pvti"
    with tracing.Recorder(path, process_name="tool") as recorder, recorder.channel("io").event("read"):
        pass
    trace = pva.openTrace(path)
    (process,) = trace.processes
    (thread,) = process.threads
    (event,) = thread.events
    for obj in (trace, process, thread, event):
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(obj)
    other = pva.openTrace(path)
    (unread,) = other.processes[0].threads
    other.close()
    assert repr(other) == "<TraceReport 'host.pvti' (closed)>"
    with pytest.raises(pva.ClosedReportError, match="host.pvti.*closed"):
        _ = unread.events
    assert event.label == "read"  # what was read stays readable
    trace.close()
