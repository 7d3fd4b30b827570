"""`pva check`: complete validation with every problem located."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from formats.pop.check import check_report
from pva.cli import main


def _copy(sample, tmp_path):
    path = tmp_path / "profile.pop"
    shutil.copyfile(sample.path, path)
    return path


def _modify(path, *statements):
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


def test_sample_report_problems_are_exactly_its_inconsistent_cycle_totals(sample):
    problems = check_report(sample.path)
    assert [(p.check, p.location) for p in problems] == [
        ("execution", "run 0 IPU 0"),
        ("execution", "run 0 IPU 1"),
        ("execution", "run 1 IPU 0"),
        ("execution", "run 1 IPU 1"),
    ]
    assert "cycle_totals.total is 124, the steps' cycles add up to" in problems[0].message


def test_consistent_report_is_ok(sample, tmp_path, capsys):
    path = _copy(sample, tmp_path)
    _modify(
        path,
        "UPDATE cycle_totals SET total = (SELECT sum(b.cycles) FROM steps_by_ipu b JOIN steps s "
        "ON s.id = b.step_id WHERE s.run = cycle_totals.run AND b.ipu = cycle_totals.ipu)",
    )
    assert check_report(path) == []
    assert main(["check", str(path)]) == 0
    assert capsys.readouterr().out.strip().endswith(": ok")


@pytest.mark.parametrize(
    "statements, check, fragment",
    [
        (["UPDATE steps SET program = 999 WHERE id = 3"], "references", "refers to programs 999"),
        (["UPDATE compute_set_vertices SET vertex_type = 42 WHERE id = 0"], "references", "vertex_types 42"),
        (["INSERT INTO program_children VALUES (7, 5, 6)"], "programs", "programs contain themselves: 6 -> 7 -> 6"),
        (["UPDATE memory_by_tile SET total = total + 1 WHERE tile = 2"], "memory", "categories add up to"),
        (["UPDATE memory_by_tile SET total_including_gaps = 0 WHERE tile = 1"], "memory", "below without-gaps"),
        (["UPDATE memory_by_tile SET total_including_gaps = 700000 WHERE tile = 3"], "memory", "0 bytes overflowed"),
        (
            ["UPDATE steps_by_ipu SET cycles = cycles + 5 WHERE step_id = 2 AND ipu = 1"],
            "execution",
            "its tiles' cycles add up to",
        ),
        (['UPDATE run_cycles_by_ipu SET "end" = "end" + 10 WHERE run = 1 AND ipu = 0'], "execution", "the run lasts"),
        (["UPDATE matrix_chunks SET data = zeroblob(40) WHERE matrix = 'vertex_count_by_tile'"], "matrices", "Arrow"),
        (
            ["UPDATE compute_sets SET estimated_cycles_row = 30 WHERE compute_set = 1"],
            "references",
            "row 30 of matrix compute_set_estimated_cycles_by_tile, which has 3 rows",
        ),
        (
            ["UPDATE programs SET name = 5 WHERE id = 1", "UPDATE programs SET compute_set = 'x' WHERE id = 2"],
            "schema",
            "column compute_set has 1 non-integer value(s)",
        ),
        (["DROP INDEX steps_by_run"], "schema", "is missing"),
        (["UPDATE vars_info SET tile = 50 WHERE id = 0"], "references", "tile 50 is outside 0..7"),
        (["INSERT INTO programs (id, type) VALUES (40, 'Sync')"], "programs", "1 program(s) are not reachable"),
    ],
)
def test_each_kind_of_problem_is_found_and_located(sample, tmp_path, statements, check, fragment):
    path = _copy(sample, tmp_path)
    _modify(path, *statements)
    problems = [p for p in check_report(path) if not p.message.startswith("cycle_totals.total")]
    assert any(p.check == check and fragment in p.message + p.location for p in problems), problems


def test_json_output_and_exit_status(sample, capsys):
    assert main(["check", sample.path, "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and len(data["problems"]) == 4


def test_unopenable_files(tmp_path, capsys):
    bad = tmp_path / "bad.pop"
    bad.write_text("not a report")
    assert main(["check", str(bad)]) == 2
    assert "expected a profile report" in capsys.readouterr().err
    assert main(["check", str(tmp_path / "missing.pop")]) == 2
    assert "no such file" in capsys.readouterr().err
