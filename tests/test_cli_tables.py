"""`pva tables`: descriptions wrapped to the terminal width, rows counted through the public API."""

from __future__ import annotations

import json

from pva.cli import main
from pva.cli.tables import wrap_last_column


def test_wrap_last_column_continues_on_rows_of_empty_cells():
    rows = [("table", "programs", 18, "one two three four five six seven eight nine ten")]
    header = ("kind", "name", "rows", "description")  # the first three columns take 7 + 10 + 6 = 23 characters
    wrapped = wrap_last_column(header, rows, 23 + 30)
    assert wrapped == [("table", "programs", 18, "one two three four five six"), ("", "", "", "seven eight nine ten")]
    narrow = wrap_last_column(header, rows, 30)  # never narrower than 24 characters
    assert [row[3] for row in narrow] == ["one two three four five", "six seven eight nine ten"]


def test_tables_fit_the_terminal(sample, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["tables", sample.path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    start = next(i for i, line in enumerate(lines) if line.split()[:3] == ["table", "programs", "18"])
    text = [lines[start].split(None, 3)[3]]
    for line in lines[start + 1 :]:
        if line[:10].strip():
            break
        text.append(line.strip())
    assert " ".join(text).startswith("Programs of every Program.Type")
    assert main(["tables", sample.path, "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["programs"]["description"].startswith(" ".join(text).removesuffix(" ..."))


def test_tables_at_80_columns_keep_names_whole_and_stay_short(sample, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["tables", sample.path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert main(["tables", sample.path, "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    words = {w.rstrip(".,;:") for e in entries for w in e["description"].split()} | {"..."} | {""}
    description_at = lines[0].index("description")
    for line in lines[2:-1]:
        # every word of a description line is a word of a description: no name is broken
        assert {w.rstrip(".,;:") for w in line[description_at:].split()} <= words, line
        # a line wider than the terminal holds one word longer than the description column
        if len(line) > 80:
            assert len(line[description_at:].split()) == 1, line
    assert "instrumentation_external_exch" not in "\n".join(lines)
    assert len(lines) <= 2 * len(entries) + 3
    assert lines[-1] == "(descriptions cut to their first clause; --format json gives them whole)"
