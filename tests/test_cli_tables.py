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
    assert rows["programs"]["description"] == " ".join(text)
