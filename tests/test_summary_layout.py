"""`pva summary` laid out as Poplar's printProfileSummary: headings and their order against real samples,
and what a converted source did not record printed as "not recorded"."""

from __future__ import annotations

import io
import json
import pathlib

import pytest

import pva
from formats.convert import convert
from formats.legacy.text_summary import read_profile_summary
from pva.cli import main

SAMPLES = pathlib.Path(__file__).parent / "data" / "samples"
ADDER = SAMPLES / "graphcore_printProfileSummary_graph__tf-docs_adder-example_SDK0.9.txt"

#: The labels of the Execution section of Poplar's newer layout, in order, as printed in
#: thorbenlouw/lbm-graphcore experiments/halo-exchange-approaches/results.txt (real printProfileSummary
#: output; the file itself is not redistributable, so only its labels are listed here).
NEWER_EXECUTION = [
    "Total cycles",
    "Tile average compute cycles (including idle threads)",
    "Tile average compute cycles (excluding idle threads)",
    "Tile average IPU exchange cycles",
    "Tile average global exchange cycles",
    "Tile average host exchange cycles",
    "Tile average sync cycles",
    "Cycles by vertex type",
    "Run time by step type (each cycle once; overlaps go to compute, then exchange, stream copy, sync)",
]
#: The older layout, as in the kept tutorial sample (examples-tut7-matrix-vector).
OLDER_EXECUTION = [
    "Total cycles",
    "Total compute cycles (including idle threads)",
    "Total compute cycles (excluding idle threads)",
    "Total IPU exchange cycles",
    "Total global exchange cycles",
    "Total host exchange cycles",
    "Total shared structure copy cycles",
    "Total sync cycles",
]

_SKIP = {"rows", "notes", "histogram"}


def _paths(tree, prefix=()) -> list[tuple[str, ...]]:
    out = []
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key in _SKIP:
                continue
            name = "Vertex Data" if key.startswith("Vertex Data (") else key
            out.append(prefix + (name,))
            out += _paths(value, prefix + (name,))
    return out


def _is_subsequence(wanted: list, have: list) -> bool:
    it = iter(have)
    return all(item in it for item in wanted)


def _summary(path, *args) -> str:
    buffer = io.StringIO()
    pva.printProfileSummary(str(path), buffer, colours=False, **dict.fromkeys(args, True))
    return buffer.getvalue()


@pytest.fixture(scope="module")
def adder(tmp_path_factory):
    path = tmp_path_factory.mktemp("adder") / "adder.pop"
    convert([ADDER], path)
    return path


def test_sections_and_headings_follow_the_adder_sample(adder, tmp_path):
    (sample,) = read_profile_summary(ADDER)
    text = _summary(adder)
    (ours_summary,) = read_profile_summary(_write(tmp_path / "ours.txt", text))
    assert [k for k in ours_summary.sections if k in sample.sections] == list(sample.sections)
    for section in sample.sections:
        # (Vertex memory by type is not carried over from a text summary, so its heading has no rows.)
        wanted = [p for p in _paths(sample.sections[section]) if p[-1] != "By Type"]
        have = _paths(ours_summary.sections[section])
        # Our layout adds the newer Not Overlapped / Overlapped split under "By Data Type": compare its rows.
        have = [tuple(x for x in p if x not in ("Not Overlapped", "Overlapped")) for p in have]
        assert _is_subsequence(wanted, have), (section, [p for p in wanted if p not in have])
    # The figures the text summary carried come back, not zeros.
    assert "    Including Gaps:         23,878,396 B" in text
    assert "    Maximum (Including Gaps): 49,184 (48.0 K) on tile 0" in text
    assert "    0 tile(s) out of memory" in text
    assert "            Stack:                                   3,852,288 B" in text


def _write(path: pathlib.Path, text: str) -> pathlib.Path:
    path.write_text(text)
    return path


def test_memory_usage_without_an_extra_memory_line_and_with_poplars_zero_rows(simulated):
    text = _summary(simulated / "profile.pop")
    lines = text.splitlines()
    assert "Memory:" not in lines
    index = lines.index("Memory Usage:")
    assert lines[index - 1] == "" and lines[index - 2].startswith("  Number of compute sets:")
    for label in ("Constants", "Global Exchange Packet Headers", "Control Table", "Global Exchange Code"):
        assert f"            {label + ':':<36} {0:>13} B" in lines, label


def test_execution_headings_in_the_newer_layout_and_the_older_behind_a_flag(simulated, capsys):
    report = simulated / "profile.pop"
    text = _summary(report)
    execution = text[text.index("Execution:") :]
    labels = [
        line.strip().split(":")[0]
        for line in execution.splitlines()
        if line.startswith("  ") and not line.startswith("    ") and ":" in line
    ]
    assert labels == NEWER_EXECUTION
    assert "\n  Cycles by vertex type:\n" in execution
    note = execution.splitlines()[execution.splitlines().index("  Cycles by vertex type:") - 1]
    assert note.startswith("  (Cycles by vertex type are ") and "vertex type:" not in note
    with pva.openReport(report) as r:
        figures = r.summary()
    tiles = figures["target"]["num_tiles"]
    total = figures["execution"]["total_cycles"]
    sync = figures["execution"]["tile_cycles"]["sync"]
    assert (
        f"  Tile average sync cycles:                             {sync / tiles:,.1f} "
        f"({100 * sync / tiles / total:.1f}% of total)"
    ) in execution
    assert main(["summary", str(report), "--execution-totals", "--colours", "false"]) == 0
    older = capsys.readouterr().out
    older = older[older.index("Execution:") :]
    labels = [
        line.strip().split(":")[0]
        for line in older.splitlines()
        if line.startswith("  ") and not line.startswith("    ") and ":" in line
    ]
    assert _is_subsequence(OLDER_EXECUTION, labels) and "Tile average sync cycles" not in labels


def test_steps_heading_is_indented_and_total_data_has_a_unit(simulated):
    text = _summary(simulated / "profile.pop", "showExecutionSteps")
    lines = text.splitlines()
    assert "  Steps" in lines and "Steps" not in lines
    data = [line for line in lines if "Total Data:" in line]
    assert data and all(line.startswith("      Total Data:") and line.endswith(" B") for line in data)
    steps = lines[lines.index("  Steps") + 1 :]
    assert all(line.startswith("    ") for line in steps if line)


CEREBRAS = """Estimated Overall Performance
Samples/s: 2321.9
Compute Samples/s: 2321.9
Transmission Samples/s: 2430.7
Active PEs: 93%
Compute Utilization: 80%
+--------------+-----------+-------------------+------------------------+------------+---------------------+
| Kernel Name | Samples/s | Compute Samples/s | Transmission Samples/s | Active PEs | Compute Utilization |
+--------------+-----------+-------------------+------------------------+------------+---------------------+
| | | | | | |
| fc_para42.fc | 2321.9 | 2321.9 | 14311.7 | 5203 | 100% |
"""


@pytest.fixture(scope="module")
def cerebras(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cerebras")
    source = folder / "compile_report.txt"
    source.write_text(CEREBRAS)
    convert([source], folder / "p.pop")
    return folder / "p.pop"


def test_not_recorded_is_not_zero_in_the_summary(cerebras, capsys):
    with pva.openReport(cerebras) as report:
        assert {"target.tiles_per_ipu", "target.clock_frequency"} <= report.not_recorded
        assert isinstance(report.not_recorded, frozenset)
        assert report.memory_totals is None
        figures = report.summary()
    assert figures["target"]["tiles_per_ipu"] is None and figures["target"]["clock_frequency"] is None
    assert figures["graph"]["num_edges"] is None and figures["graph"]["num_compute_sets"] == 1
    assert "target.tiles_per_ipu" in figures["not_recorded"]
    text = _summary(cerebras)
    assert "  Tiles per IPU:          not recorded" in text
    assert "  Memory Per-Tile:        not recorded" in text
    assert "  Clock Speed (approx):   not recorded" in text
    assert "0.0 MHz" not in text
    assert main(["summary", str(cerebras), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["target"]["tiles_per_ipu"] is None


def test_memory_totals_of_a_text_summary_in_json(adder):
    with pva.openReport(adder) as report:
        assert report.not_recorded == frozenset()
        assert report.memory_totals["total_including_gaps"] == 23_878_396
        memory = report.summary()["memory"]
    assert memory["including_gaps"] == 23_878_396 and memory["excluding_gaps"] == 5_355_604
    assert memory["max_tile_including_gaps"] == {"tile": 0, "bytes": 49_184}


def test_cycle_totals_the_source_did_not_record(tmp_path):
    """A legacy execution profile without some tileCycles keys: those lines say "not recorded", not 0."""
    from legacy_builders import complete_graph_profile, execution_profile, write_json

    graph = complete_graph_profile()
    execution = execution_profile(graph, "COMPUTE_SETS")
    del execution["simulation"]["tileCycles"]["sync"]
    del execution["simulation"]["tileCycles"]["globalExchange"]
    source = write_json(tmp_path / "profile.json", {"graphProfile": graph, "executionProfile": execution})
    convert([source], tmp_path / "p.pop")
    text = _summary(tmp_path / "p.pop")
    assert "  Tile average sync cycles:                             not recorded" in text
    assert "  Tile average global exchange cycles:                  not recorded" in text
    assert "  Tile average IPU exchange cycles:                     not recorded" not in text
    with pva.openReport(tmp_path / "p.pop") as report:
        cycles = report.summary()["execution"]["tile_cycles"]
    assert cycles["sync"] is None and cycles["global_exchange"] is None and cycles["compute"] == 8094
