"""`pva check`: cross-table counts, --quick, a progress bar, exit 2 for non-reports, WAL-mode reports."""

from __future__ import annotations

import io
import os
import pathlib
import shutil
import sqlite3
import time

import pytest
from large_report import write_long_report

from formats.pop.check import check_report
from formats.progress import Progress
from pva.cli import main


def _copy(sample, tmp_path, name="r.pop"):
    path = tmp_path / name
    shutil.copyfile(sample.path, path)
    return path


def _sql(path, *statements):
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


def test_stored_counts_are_compared_with_the_rows_they_count(sample, tmp_path):
    path = _copy(sample, tmp_path)
    _sql(
        path,
        "UPDATE runs SET num_steps = num_steps + 5 WHERE id = 0",
        "UPDATE matrix_chunks SET num_rows = num_rows + 1 WHERE matrix = 'vertex_count_by_tile'",
    )
    problems = [str(p) for p in check_report(path)]
    assert any("runs.num_steps: add up to 16, table steps has 11 rows [counts]" in p for p in problems), problems
    assert any("matrix vertex_count_by_tile: declares 4 rows, its 1 chunk(s) hold 5 [counts]" in p for p in problems), (
        problems
    )


@pytest.mark.parametrize("quick", [False, True])
def test_graph_counts_of_2_63_are_found(sample, tmp_path, quick, capsys):
    path = _copy(sample, tmp_path)
    top = (1 << 63) - 1
    _sql(path, f"UPDATE graph SET num_compute_sets = {top}, num_vertices = {top}, num_edges = {top}, num_vars = {top}")
    assert main(["check", str(path)] + (["--quick"] if quick else [])) == 1
    out = capsys.readouterr().out
    assert f"graph.num_compute_sets is {top}, table compute_sets has 3 rows" in out


def test_problems_name_the_path_once(sample, tmp_path, capsys):
    path = tmp_path / "trunc.pop"
    path.write_bytes(pathlib.Path(sample.path).read_bytes()[:5000])
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.count(str(path)) == 2  # the heading and the problem's location, not again in its message
    assert f"{path}: truncated" in out


def test_a_file_that_is_not_a_report_exits_2(tmp_path, capsys):
    path = tmp_path / "notes.pop"
    path.write_text("hello")
    assert main(["check", str(path)]) == 2
    assert "expected a profile report" in capsys.readouterr().err


def test_the_progress_bar_is_drawn_on_a_terminal(sample):
    stream = io.StringIO()
    bar = Progress(stream, enabled=True, interval=0.0)
    check_report(sample.path, bar)
    text = stream.getvalue()
    assert "checking" in text and "[" in text and text.endswith("\r")


@pytest.mark.slow
def test_quick_checks_a_large_report_in_seconds(tmp_path, capsys):
    path = tmp_path / "long.pop"
    write_long_report(path, num_steps=7000)
    assert path.stat().st_size > 100 << 20
    start = time.perf_counter()
    assert main(["check", "--quick", str(path)]) == 0
    quick = time.perf_counter() - start
    assert "ok (structure and counts" in capsys.readouterr().out
    print(f"\npva check --quick on a {path.stat().st_size / 2**20:.0f} MB report: {quick:.2f} s")
    assert quick < 5


def test_a_wal_mode_report_is_read_without_writing_beside_it(sample, tmp_path, capsys):
    path = _copy(sample, tmp_path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    conn.close()
    assert sorted(os.listdir(tmp_path)) == ["r.pop"]
    import pva

    with pva.openReport(path) as report:
        assert report.compilation.target.numTiles > 0
    assert main(["check", str(path)]) in (0, 1)
    assert "journal mode: wal" in capsys.readouterr().out
    assert sorted(os.listdir(tmp_path)) == ["r.pop"]


def test_a_wal_mode_report_with_pending_changes_is_refused(sample, tmp_path):
    path = _copy(sample, tmp_path)
    writer = sqlite3.connect(path)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("UPDATE runs SET name = 'changed'")
    writer.commit()
    try:
        assert os.path.getsize(str(path) + "-wal") > 0
        import pva

        with pytest.raises(pva.PvaError, match="left in WAL mode"):
            pva.openReport(path)
    finally:
        writer.close()
