"""`pva summary` and pva.printProfileSummary: layout, numbers, options and colour rules."""

from __future__ import annotations

import io
import json
import os
import pathlib

import numpy as np
import pytest

import pva
from formats.pop.reader import ProfileReader
from pva.analysis.summary import SummaryOptions, histogram_lines, printProfileSummary, summary_data, use_colour
from pva.cli import main

GOLDEN = pathlib.Path(__file__).parent / "golden"


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PVA_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"output differs from {path}; rerun with PVA_UPDATE_GOLDEN=1 if intended"


def test_golden_default_summary(sample, capsys):
    assert main(["summary", sample.path]) == 0
    _golden("summary_sample.txt", capsys.readouterr().out)


def test_golden_summary_with_every_option(sample, capsys):
    assert (
        main(
            [
                "summary",
                sample.path,
                "--show-var-storage",
                "--show-optimizations",
                "--show-execution-steps",
                "--show-per-ipu-memory",
                "--colours",
                "false",
            ]
        )
        == 0
    )
    _golden("summary_sample_all_options.txt", capsys.readouterr().out)


def test_summary_numbers(sample, capsys):
    assert main(["summary", sample.path]) == 0
    out = capsys.readouterr().out
    memory = sample.rows("memory_by_tile")
    including = sum(row[2] for row in memory)
    excluding = sum(row[1] for row in memory)
    assert f"    Including Gaps:    {including:>15,} B" in out
    assert f"      Total:             {excluding:>13,} B" in out
    assert "  Memory Per-Tile:        624.0 kB" in out
    assert "  Clock Speed (approx):   1,330.0 MHz" in out
    assert "  Number of compute sets:             3" in out
    best = max(memory, key=lambda row: row[2])
    assert f"    Maximum (Including Gaps): {best[2]:,} ({best[2] / 1024:,.1f} K) on tile {best[0]}" in out
    assert "    0 tile(s) out of memory" in out
    run_lengths = {}
    for run, _ipu, start, end in sample.rows("run_cycles_by_ipu"):
        run_lengths[run] = max(run_lengths.get(run, 0), end - start)
    total = sum(run_lengths.values())
    assert (
        f"  Total cycles:                                         {total:,} (approx {total / 1330:,.1f} microseconds)"
        in out
    )
    # Tile averages over the 8 tiles, as a share of the total cycles (the newer layout).
    assert f"  Tile average compute cycles (including idle threads): 30.0 ({100 * 30 / total:.1f}% of total)" in out
    assert "Total compute cycles" not in out
    assert main(["summary", sample.path, "--execution-totals"]) == 0
    older = capsys.readouterr().out
    assert (
        f"  Total cycles:                                  {total:,} (approx {total / 1330:,.1f} microseconds)" in older
    )
    assert "  Total compute cycles (including idle threads): 240" in older
    assert "  Total thread balance:                          16.7%" in older
    assert "Tile average" not in older


def test_python_entry_point_matches_cli(sample, capsys):
    report = pva.openReport(sample.path)
    buffer = io.StringIO()
    pva.printProfileSummary(report, buffer, {"showExecutionSteps": "true"})
    assert main(["summary", sample.path, "--show-execution-steps"]) == 0
    assert buffer.getvalue() == capsys.readouterr().out
    buffer2 = io.StringIO()
    printProfileSummary(sample.path, buffer2, showExecutionSteps=True)
    assert buffer2.getvalue() == buffer.getvalue()
    report.close()


def test_unknown_and_malformed_options_are_refused():
    with pytest.raises(ValueError, match="unknown profile summary option 'showColour'"):
        SummaryOptions.from_poplar({"showColour": "true"})
    with pytest.raises(ValueError, match="must be 'true' or 'false'"):
        SummaryOptions.from_poplar(showVarStorage="yes")


class _Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize(
    "requested, environ, tty, expected",
    [
        (None, {}, False, False),
        (None, {}, True, True),
        (True, {}, False, True),
        (False, {}, True, False),
        (True, {"CLICOLOR": "0"}, True, False),
        (None, {"NO_COLOR": "1"}, True, False),
        (False, {"CLICOLOR_FORCE": "1"}, False, True),
        (None, {"CLICOLOR_FORCE": "1", "NO_COLOR": "1", "CLICOLOR": "0"}, False, True),
        (None, {"CLICOLOR": "1"}, False, False),
    ],
)
def test_colour_rules(requested, environ, tty, expected):
    stream = _Tty() if tty else io.StringIO()
    assert use_colour(requested, stream, environ) is expected


def test_colour_escape_codes_only_when_enabled(sample, capsys, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("CLICOLOR_FORCE", "1")
    assert main(["summary", sample.path]) == 0
    assert "\x1b[1mTarget:\x1b[0m" in capsys.readouterr().out
    monkeypatch.delenv("CLICOLOR_FORCE")
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["summary", sample.path, "--colours", "true"]) == 0
    assert "\x1b[" not in capsys.readouterr().out


def test_histogram_layout_matches_poplar_samples():
    # the adder example of tests/data/samples: 1,215 tiles with 4 KB and one with 5 KB
    totals = np.array([4 * 1024 + 500] * 1215 + [5 * 1024 + 100])
    assert histogram_lines(totals) == [
        "         4 - 5 ****************************************  1,215",
        "         5 - 6 *                                             1",
    ]
    # the out-of-memory example: bins widen (powers of two) so that at most 128 are printed
    kb = 1024
    totals = np.array([4 * kb] * 20 + [12 * kb] * 1192 + [20 * kb] * 2 + [508 * kb, 814 * kb])
    lines = histogram_lines(totals)
    assert lines[:4] == [
        "       0 -   8 *                                            20",
        "       8 -  16 ****************************************  1,192",
        "      16 -  24 *                                             2",
        "      24 -  32                                               0",
    ]
    assert lines[63] == "     504 - 512 *                                             1"
    assert lines[-1] == "     808 - 816 *                                             1"
    assert len(lines) == 102 and all(len(line) == 62 for line in lines)


def test_json_summary(sample, capsys):
    assert main(["summary", sample.path, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    reader = ProfileReader(sample.path)
    assert data == json.loads(json.dumps(summary_data(reader)))
    reader.close()
    assert data["memory"]["excluding_gaps"] == sum(row[1] for row in sample.rows("memory_by_tile"))
    assert data["execution"]["tile_cycles"]["compute"] == 240
    assert data["execution"]["cycles_by_vertex_type"][0] == {
        "vertex_type": "popops::ScaledAddSupervisor<float,float,true>",
        "instances": 9,
        "cycles": 400,
    }


def test_compile_only_report_says_so(compile_only, capsys):
    assert main(["summary", compile_only.path]) == 0
    assert "No execution profile: the report holds compilation information only." in capsys.readouterr().out
