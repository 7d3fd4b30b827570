"""printProfileSummary text: the real samples parse; a summary with a Target becomes a report."""

from __future__ import annotations

import json
import pathlib
import sqlite3

import pytest

import pva
from formats.convert import convert
from formats.errors import InvalidInputError, NotAReportError
from formats.legacy.text_summary import parse_profile_summary, parse_value, read_profile_summary, summary_target

#: Redistributable samples kept in the repository (see tests/data/samples/README.md).
KEPT = pathlib.Path(__file__).resolve().parent / "data" / "samples"


@pytest.mark.parametrize(
    "text, number, unit, note, size",
    [
        ("1,216", 1216, "", "", None),
        ("256.0 kB", 256.0, "kB", "", 262144),
        ("304.0 MB", 304.0, "MB", "", 318767104),
        ("1,600.0 MHz", 1600.0, "MHz", "", None),
        ("8,190,756 (approx 5,119.2 microseconds)", 8190756, "", "(approx 5,119.2 microseconds)", None),
        (
            "5,513,152 Estimated (must enable debug.instrumentCompute)",
            5513152,
            "Estimated",
            "(must enable debug.instrumentCompute)",
            None,
        ),
        ("Must enable debug.instrumentExternalExchange", None, "", "", None),
    ],
)
def test_values(text, number, unit, note, size):
    value = parse_value(text)
    assert (value.number, value.unit, value.note, value.bytes) == (number, unit, note, size)


def test_adder_example_graph_summary():
    (summary,) = read_profile_summary(KEPT / "graphcore_printProfileSummary_graph__tf-docs_adder-example_SDK0.9.txt")
    assert summary_target(summary) == {
        "num_ipus": 1,
        "tiles_per_ipu": 1216,
        "bytes_per_tile": 262144,
        "clock_frequency": 1.6e9,
    }
    assert summary.value("Graph", "Number of variables").number == 30562
    total = summary.sections["Memory Usage"]["Total"]
    assert total["Including Gaps"].bytes == 23878396
    assert total["Excluding Gaps"]["By Data Type"]["Stack"].number == 3852288
    rows = total["Excluding Gaps"]["Vertex Data (14,640B)"]["By Type"]["rows"]
    assert rows[0]["name"] == "poprand::SetSeedSupervisor" and rows[0]["size"].number == 34048
    by_tile = summary.sections["Memory Usage"]["By Tile (Excluding Gaps)"]
    assert by_tile["histogram"] == [{"from": 4, "to": 5, "count": 1215}, {"from": 5, "to": 6, "count": 1}]
    assert by_tile["Maximum (Excluding Gaps)"].number == 5780 and by_tile["notes"][-1] == "0 tile(s) out of memory"


def test_execution_summaries_of_both_wordings():
    (older,) = read_profile_summary(
        KEPT / "graphcore_printProfileSummary_execution__examples-tut7-matrix-vector_doc2020-04.txt"
    )
    assert older.value("Execution", "Total cycles").number == 8190756
    assert older.value("Execution", "Total global exchange cycles").number is None
    assert older.sections["Execution"]["Cycles by vertex type"]["rows"][0] == {
        "name": "DotProductVertex",
        "instances": 50000,
        "cycles": parse_value("5,250,000"),
    }
    runs = read_profile_summary(
        KEPT / "graphcore_printProfileSummary_execution__lbm-graphcore_halo-exchange-results.txt"
    )
    assert [r.name for r in runs] == [
        "explicitOneTensor",
        "explicitOneTensor2Wave",
        "explicitManyTensors",
        "explicitOneTensorGroupedDirs",
        "implicit",
    ]
    assert runs[1].value("Execution", "Total cycles").number == 147570
    assert runs[0].value("Execution", "Tile average sync cycles").note == "(99.9% of total)"
    labelled = read_profile_summary(
        KEPT / "graphcore_printProfileSummary_execution__lbm-graphcore_exchange-vs-compute.txt"
    )
    assert [(r.name, r.value("", "Total cycles").number) for r in labelled] == [
        ("float", 126351372),
        ("float2", 106179150),
        ("", 46188492),
    ]


def test_elided_out_of_memory_fragment():
    (summary,) = read_profile_summary(
        KEPT / "graphcore_printProfileSummary_graph__tf-docs_OOM-histogram-and-tile0_SDK0.9_ELIDED.txt"
    )
    by_tile = summary.sections[""]["By Tile (Excluding Gaps)"]
    assert by_tile["histogram"][1] == {"from": 8, "to": 16, "count": 1192}
    assert by_tile["notes"][-1] == "2 tile(s) out of memory"
    assert (
        summary.sections["Memory Usage"]["Total"]["Excluding Gaps"]["By Memory Region"]["Overflowed"].number == 580387
    )


def test_every_sample_converts_or_is_refused_by_name(tmp_path):
    outcomes = {}
    for path in sorted(KEPT.glob("graphcore_printProfileSummary_*.txt")):
        try:
            convert([path], tmp_path / "p.pop")
            outcomes[path.name] = "report"
            (tmp_path / "p.pop").unlink()
        except NotAReportError as exc:
            assert "without a Target section" in str(exc)
            outcomes[path.name] = "refused"
    assert outcomes == {
        "graphcore_printProfileSummary_execution__examples-tut7-matrix-vector_doc2020-04.txt": "refused",
        "graphcore_printProfileSummary_execution__lbm-graphcore_exchange-vs-compute.txt": "refused",
        "graphcore_printProfileSummary_execution__lbm-graphcore_halo-exchange-results.txt": "refused",
        "graphcore_printProfileSummary_graph__tf-docs_OOM-histogram-and-tile0_SDK0.9_ELIDED.txt": "refused",
        "graphcore_printProfileSummary_graph__tf-docs_adder-example_SDK0.9.txt": "report",
    }


def test_summary_with_target_becomes_a_report(tmp_path):
    source = tmp_path / "summary.txt"
    source.write_text(
        "Target:\n  Number of IPUs:         2\n  Tiles per IPU:          1,472\n"
        "  Memory Per-Tile:        624.0 kB\n  Clock Speed (approx):   1,330.0 MHz\n\n"
        "Graph:\n  Number of vertices:    12\n  Number of compute sets:   3\n\n"
        "Execution:\n  Total cycles:  1,000 (approx 0.8 microseconds)\n  Cycles by vertex type:\n"
        "    popops::Fill<float>   (4 instances):   400\n"
    )
    result = convert([source], tmp_path / "p.pop")
    assert "totals, not per-tile values" in result.warnings[0]
    with pva.openReport(tmp_path / "p.pop") as report:
        t = report.compilation.target
        assert (t.numTiles, t.bytesPerTile, t.clockFrequency, t.architecture.name) == (2944, 638976, 1.33e9, "Ipu2")
        assert report.compilation.graph.numComputeSets == 3
    with sqlite3.connect(f"file:{tmp_path / 'p.pop'}?mode=ro", uri=True) as conn:
        (value,) = conn.execute("SELECT value FROM extras WHERE source = 'poplar-text-summary'").fetchone()
        names = conn.execute("SELECT name FROM vertex_types").fetchall()
    conn.close()
    assert json.loads(value)[0]["sections"]["Execution"]["Total cycles"]["number"] == 1000
    assert names == [("popops::Fill<float>",)]


def test_text_that_is_not_a_summary():
    with pytest.raises(InvalidInputError, match="expected a Poplar profile summary"):
        parse_profile_summary("hello\n", "x.txt")


def test_a_4301_digit_number_is_not_a_crash(tmp_path):
    huge = "9" * 4301
    assert parse_value(huge).number is None and parse_value(huge).text == huge
    text = (KEPT / "graphcore_printProfileSummary_graph__tf-docs_adder-example_SDK0.9.txt").read_text()
    lines = text.splitlines()
    index = next(k for k, line in enumerate(lines) if "Number of vertices" in line)
    lines[index] = lines[index].split(":")[0] + ": " + huge
    source = tmp_path / "huge.txt"
    source.write_text("\n".join(lines) + "\n")
    try:
        convert([source], tmp_path / "p.pop")
    except pva.PvaError as exc:
        assert str(source) in str(exc)
