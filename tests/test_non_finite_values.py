"""Non-finite values: an infinite or negative clock of the target is refused at open (exit 2), and JSON
output is always valid JSON (a non-finite number printed as null, with a note)."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from pva.cli import main
from pva.cli._common import print_json


@pytest.fixture(scope="module", params=["9e999", "-9e999", "-1.0"])
def bad_clock(request, sample, tmp_path_factory):
    path = tmp_path_factory.mktemp("clock") / "clock.pop"
    shutil.copyfile(sample.path, path)
    conn = sqlite3.connect(path)
    conn.execute(f"UPDATE target SET clock_frequency = {request.param}")
    conn.commit()
    conn.close()
    return str(path)


@pytest.mark.parametrize(
    "command",
    [
        ["info", "{r}", "--json"],
        ["summary", "{r}", "--json"],
        ["estimate", "{r}", "--json"],
        ["html", "{r}", "-o", "{d}/r.html"],
        ["export", "{r}", "--format", "legacy-json", "-o", "{d}/r.json"],
    ],
    ids=lambda c: c[0],
)
def test_a_clock_that_is_not_a_finite_frequency_is_refused(bad_clock, tmp_path, capsys, command):
    assert main([a.format(r=bad_clock, d=tmp_path) for a in command]) == 2
    captured = capsys.readouterr()
    assert "target.clock_frequency should be a" in captured.err
    assert "Infinity" not in captured.out


def test_json_output_prints_non_finite_numbers_as_null_with_a_note(capsys):
    print_json({"a": float("inf"), "b": [1.5, float("nan")], "c": "x"})
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"a": None, "b": [1.5, None], "c": "x"}
    assert "note: 2 value(s) that are not finite numbers (infinite or NaN) are printed as null" in captured.err
