"""What a converted source did not record is listed, not passed off as zero; what it recorded is
carried over (metadata not_recorded and memory_totals)."""

from __future__ import annotations

import json
import pathlib
import sqlite3

from legacy_builders import complete_graph_profile, write_json

from formats.convert import convert

SAMPLES = pathlib.Path(__file__).parent / "data" / "samples"
ADDER = SAMPLES / "graphcore_printProfileSummary_graph__tf-docs_adder-example_SDK0.9.txt"

# The layout documented by Cerebras (as in tests/test_cerebras_report.py), one kernel.
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


def _metadata(path) -> dict:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        rows = dict(conn.execute("SELECT key, value FROM metadata"))
    conn.close()
    return rows


def test_text_summary_memory_totals_are_carried_over(tmp_path):
    convert([ADDER], tmp_path / "p.pop")
    meta = _metadata(tmp_path / "p.pop")
    assert json.loads(meta["not_recorded"]) == []
    totals = json.loads(meta["memory_totals"])
    assert totals["total_including_gaps"] == 23_878_396
    assert (totals["non_interleaved"], totals["interleaved"], totals["overflowed"]) == (5_355_604, 0, 0)
    assert totals["total"] == 5_355_604
    assert totals["by_category"]["stack"] == 3_852_288
    assert totals["by_category"]["controlCode"] == 851_272
    assert sum(totals["by_category"].values()) == totals["total"]
    assert totals["max_tile_including_gaps"] == {"tile": 0, "bytes": 49_184}
    assert totals["max_tile"] == {"tile": 0, "bytes": 5_780}


def test_text_summary_without_clock_or_tile_memory_lists_them(tmp_path):
    text = ADDER.read_text()
    text = "\n".join(
        line
        for line in text.splitlines()
        if "Clock Speed" not in line and "Memory Per-Tile" not in line and "Number of edges" not in line
    )
    source = tmp_path / "summary.txt"
    source.write_text(text + "\n")
    convert([source], tmp_path / "p.pop")
    missing = json.loads(_metadata(tmp_path / "p.pop")["not_recorded"])
    assert missing == [
        "target.bytes_per_tile",
        "target.bytes_per_ipu",
        "target.total_memory",
        "target.memory_per_replica",
        "target.clock_frequency",
        "graph.num_edges",
    ]


def test_cerebras_report_lists_the_hardware_it_does_not_describe(tmp_path):
    source = tmp_path / "compile_report.txt"
    source.write_text(CEREBRAS)
    convert([source], tmp_path / "p.pop")
    missing = set(json.loads(_metadata(tmp_path / "p.pop")["not_recorded"]))
    assert {
        "target.tiles_per_ipu",
        "target.bytes_per_tile",
        "target.clock_frequency",
        "target.num_ipus",
        "graph.num_vertices",
        "graph.num_edges",
        "graph.num_vars",
    } <= missing
    assert "graph.num_compute_sets" not in missing  # the kernels are counted


def test_legacy_profile_without_optional_target_fields(tmp_path):
    graph = complete_graph_profile()
    complete = write_json(tmp_path / "complete.json", graph)
    convert([complete], tmp_path / "complete.pop")
    assert json.loads(_metadata(tmp_path / "complete.pop")["not_recorded"]) == []
    for key in ("clockFrequency", "bytesPerTile", "bytesPerIPU", "totalMemory", "minSyncDelay"):
        graph["target"].pop(key, None)
    del graph["graph"]["numEdges"]
    partial = write_json(tmp_path / "partial.json", graph)
    convert([partial], tmp_path / "partial.pop")
    assert json.loads(_metadata(tmp_path / "partial.pop")["not_recorded"]) == [
        "target.bytes_per_tile",
        "target.bytes_per_ipu",
        "target.total_memory",
        "target.memory_per_replica",
        "target.clock_frequency",
        "target.min_sync_delay",
        "graph.num_edges",
    ]


def test_poplar_sync_steps_without_cycles_are_listed(tmp_path):
    from legacy_builders import execution_profile

    graph = complete_graph_profile()
    execution = execution_profile(graph, "IPU_MODEL")
    assert {"syncType": "External", "type": "Sync"} in execution["simulation"]["steps"]
    source = write_json(tmp_path / "p.json", {"graphProfile": graph, "executionProfile": execution})
    convert([source], tmp_path / "p.pop")
    assert json.loads(_metadata(tmp_path / "p.pop")["not_recorded"]) == ["steps_by_ipu.cycles[Sync]"]
