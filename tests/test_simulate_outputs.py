"""`pva simulate -o DIR` lists the reports it wrote, and replaces only its own previous host trace."""

from __future__ import annotations

import json

from pva.cli import main


def _simulate(directory, timestamp, capsys) -> dict:
    capsys.readouterr()
    code = main(["simulate", "--preset", "tutorial1", "--timestamp", timestamp, "-o", str(directory), "--json"])
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_only_the_reports_written_are_listed_and_the_old_trace_goes(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / ".git").mkdir()
    (tmp_path / "Mon_Jan_01_00-00-00_2024_1.pvti").write_text("not a trace")
    first = _simulate(tmp_path, "2024-01-01T00:00:00Z", capsys)
    (old_trace,) = [name for name in first["files"] if name.endswith(".pvti")]
    assert sorted(first["files"]) == sorted(["profile.pop", "debug.cbor", old_trace])
    second = _simulate(tmp_path, "2024-01-02T00:00:00Z", capsys)
    (new_trace,) = [name for name in second["files"] if name.endswith(".pvti")]
    assert new_trace != old_trace and not (tmp_path / old_trace).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".git", "notes.txt", "Mon_Jan_01_00-00-00_2024_1.pvti", "profile.pop", "debug.cbor", new_trace]
    )


def test_a_trace_the_report_did_not_write_is_kept(tmp_path, capsys):
    first = _simulate(tmp_path, "2024-01-01T00:00:00Z", capsys)
    (old_trace,) = [name for name in first["files"] if name.endswith(".pvti")]
    kept = tmp_path / "keep"
    kept.mkdir()
    (tmp_path / old_trace).rename(kept / old_trace)
    # a trace of another time, copied in by the user, is not the report's own
    other = old_trace.replace("2024", "2023")
    (kept / old_trace).rename(tmp_path / other)
    _simulate(tmp_path, "2024-01-02T00:00:00Z", capsys)
    assert (tmp_path / other).exists()


def test_the_text_output_names_only_the_reports(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["simulate", "--preset", "tutorial1", "-o", str(tmp_path)]) == 0
    line = [line for line in capsys.readouterr().out.splitlines() if line.startswith("reports in")][0]
    assert "notes.txt" not in line and "profile.pop" in line and "debug.cbor" in line


def test_list_says_when_a_knob_has_no_default(capsys):
    assert main(["simulate", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not [line for line in lines if line.rstrip().endswith("default")]
    padding = next(line for line in lines if line.strip().startswith("--padding-lower"))
    assert padding.endswith("; no default (unset)")
    assert any(line.strip().startswith("--m ") and line.endswith("; default 1024") for line in lines)
