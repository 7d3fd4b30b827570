"""`pva diff`: side-by-side comparison with regression flags and exit status."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from formats.pop.reader import ProfileReader
from pva.analysis.compare import Difference, compare
from pva.cli import main


@pytest.fixture()
def changed(sample, tmp_path):
    path = tmp_path / "b.pop"
    shutil.copyfile(sample.path, path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE memory_by_tile SET total_including_gaps = total_including_gaps * 2 WHERE tile = 3")
    conn.execute("UPDATE compute_sets SET estimated_cycles_max = estimated_cycles_max - 10 WHERE compute_set = 0")
    conn.execute("UPDATE compute_sets SET estimated_cycles_max = estimated_cycles_max + 1 WHERE compute_set = 2")
    conn.execute("UPDATE target SET clock_frequency = 1.85e9")
    conn.commit()
    conn.close()
    return path


def test_identical_reports_have_no_changes(sample, capsys):
    assert main(["diff", sample.path, sample.path]) == 0
    assert "no differences" in capsys.readouterr().out


def test_changes_are_found_sorted_and_flagged(sample, changed):
    a, b = ProfileReader(sample.path), ProfileReader(changed)
    diffs = compare(a, b)
    a.close()
    b.close()
    by_item = {(d.section, d.item): d for d in diffs}
    tile3 = [row for row in sample.rows("memory_by_tile") if row[0] == 3][0][2]
    grew = by_item[("memory", "total including gaps")]
    assert grew.change == tile3 and grew.is_regression(0.05)
    assert by_item[("target", "clock_frequency")].b == 1.85e9
    assert not by_item[("target", "clock_frequency")].is_regression(0.0)
    shrank = by_item[("compute set cycles", "init/copy (estimated)")]
    assert shrank.change == -10 and not shrank.is_regression(0.0)
    small = by_item[("compute set cycles", "layer1/bwd (estimated)")]
    assert small.change == 1 and not small.is_regression(0.05) and small.is_regression(0.0001)
    section = [d for d in diffs if d.section == "compute set cycles"]
    assert [abs(d.change) for d in section] == sorted((abs(d.change) for d in section), reverse=True)


def test_exit_status_and_threshold(sample, changed, capsys):
    assert main(["diff", sample.path, str(changed)]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION" in out and "regression(s) above 5%" in out
    assert main(["diff", str(changed), sample.path]) == 0  # the reverse only shrinks (clock is not a regression)
    capsys.readouterr()
    assert main(["diff", sample.path, str(changed), "--json", "--threshold", "50"]) == 1
    data = json.loads(capsys.readouterr().out)
    flagged = [d["item"] for d in data["differences"] if d["regression"]]
    assert flagged == ["largest tile including gaps"]


def test_a_figure_appearing_from_zero_is_a_regression():
    assert Difference("memory", "tiles out of memory", 0, 2).is_regression(0.05)
    assert not Difference("memory", "tiles out of memory", 2, 0).is_regression(0.05)


def test_poplar_version_and_instrumentation_differences_are_shown(sample, tmp_path, capsys):
    path = tmp_path / "b.pop"
    shutil.copyfile(sample.path, path)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT OR REPLACE INTO metadata VALUES ('poplar_version', '3.4.0 (b7b3c4e8c2)')")
        conn.execute("INSERT OR REPLACE INTO metadata VALUES ('instrumentation_external_exchange', 'Tile')")
    conn.close()
    a, b = ProfileReader(sample.path), ProfileReader(str(path))
    before = dict(a.metadata)
    diffs = [d for d in compare(a, b) if d.section == "report"]
    a.close()
    b.close()
    assert before["instrumentation_external_exchange"] != "Tile"
    assert [(d.item, d.a, d.b) for d in diffs] == [
        ("Poplar version", before["poplar_version"], "3.4.0 (b7b3c4e8c2)"),
        ("instrumentation of external exchange", before["instrumentation_external_exchange"], "Tile"),
    ]
    assert main(["diff", sample.path, str(path)]) == 0
    out = capsys.readouterr().out
    assert "report:" in out and "3.4.0 (b7b3c4e8c2)" in out and "no differences" not in out


def test_a_compute_set_measured_as_estimated_is_one_row(simulated):
    reader = ProfileReader(str(simulated / "profile.pop"))
    diffs = [d for d in compare(reader, reader) if d.section == "compute set cycles"]
    reader.close()
    values = {d.item: (d.a, d.b) for d in diffs}
    assert any(item.endswith(" (estimated = measured)") for item in values)
    for item, figures in values.items():
        if item.endswith(" (estimated)"):
            assert values.get(item.replace(" (estimated)", " (measured)"), figures) != figures, item
