"""legacy -> pop -> legacy: the exported documents are equivalent to the originals."""

from __future__ import annotations

import json
import os

import cbor2
import pytest
from legacy_builders import PROFILER_MODES, complete_graph_profile, execution_profile, write_cbor, write_json

from formats.exporters.legacy import export_legacy
from formats.legacy import convert_legacy
from formats.legacy.equivalence import DERIVED, differences
from formats.legacy.exporter import CBOR_MAGIC

SKELETON = {
    "graphProfile": {
        "target": {
            "type": "IPU_MODEL",
            "numIPUs": 1,
            "tilesPerIPU": 4,
            "numTiles": 4,
            "bytesPerTile": 262144,
            "bytesPerIPU": 1048576,
            "totalMemory": 1048576,
            "clockFrequency": 1600000000,
        },
        "graph": {"numVertices": 5, "numEdges": 9, "numVars": 12, "numComputeSets": 2},
        "vertexTypes": {"names": ["popops::ScaledAddSupervisor<float,float,true>", "poplar_rt::ShortMemcpy"]},
        "computeSets": {"names": ["add/ScaledAdd", "Copy_a_to_b"]},
        "exchanges": {"codeBytesByTile": [[0, 64, 64, 0]]},
        "programs": [
            {"type": "Sequence"},
            {"type": "OnTileExecute", "name": "add/ScaledAdd"},
            {"type": "GlobalExchange", "name": "progIdCopy/GlobalPre"},
        ],
        "memory": {
            "byTile": {"total": [5780, 4200, 4200, 4200], "totalIncludingGaps": [49184, 8192, 8192, 8192]},
            "byCategory": {
                "vertexInstanceState": {
                    "nonInterleaved": {"nonOverlapped": [16, 16, 16, 16]},
                    "interleaved": {"nonOverlapped": [0, 0, 0, 0]},
                    "overflowed": {"nonOverlapped": [0, 0, 0, 0]},
                }
            },
            "byVertexType": {
                "codeBytes": [[100, 100, 100, 100], [40, 0, 0, 40]],
                "vertexDataBytes": [[16, 16, 16, 16], [8, 0, 0, 8]],
                "descriptorBytes": [[0, 0, 0, 0], [0, 0, 0, 0]],
                "edgePtrBytes": [[8, 8, 8, 8], [4, 0, 0, 4]],
                "copyPtrBytes": [[0, 0, 0, 0], [0, 0, 0, 0]],
            },
            "liveness": {
                "alwaysLive": {"bytesByTile": [1000, 900, 900, 900]},
                "notAlwaysLive": {
                    "maxBytesByTile": [200, 100, 100, 100],
                    "byProgram": [{"bytes": 200, "children": []}],
                },
            },
        },
    },
    "executionProfile": {
        "profilerMode": "IPU_MODEL",
        "simulation": {
            "cycles": 12345,
            "tileCycles": {"compute": 2000, "doExchange": 300, "streamCopy": 0, "sync": 400, "globalExchange": 0},
            "steps": [
                {"type": "OnTileExecute", "name": "add/ScaledAdd", "cycles": 500, "cyclesOverlapped": 0},
                {"type": "StreamCopy", "cycles": 9000},
            ],
        },
    },
}


def _read(path: str):
    with open(path, "rb") as handle:
        data = handle.read()
    return cbor2.loads(data) if data.startswith(CBOR_MAGIC) else json.loads(data)


@pytest.mark.parametrize("encoding", ["json", "cbor"])
@pytest.mark.parametrize("mode", PROFILER_MODES)
def test_complete_profiles_round_trip_exactly(tmp_path, mode, encoding):
    graph = complete_graph_profile(seed=len(mode))
    document = {"graphProfile": graph, "executionProfile": execution_profile(graph, mode)}
    writer = write_json if encoding == "json" else write_cbor
    source = writer(tmp_path / f"in.{encoding}", document)
    convert_legacy([source], tmp_path / "p.pop")
    (written,) = export_legacy(tmp_path / "p.pop", tmp_path / f"out.{encoding}", encoding=encoding)
    assert differences(document, _read(written), derived=()) == []


def test_field_notes_skeleton_round_trips_with_only_derived_additions(tmp_path):
    source = write_json(tmp_path / "in.json", SKELETON)
    convert_legacy([source], tmp_path / "p.pop")
    (written,) = export_legacy(tmp_path / "p.pop", tmp_path / "out.json")
    exported = _read(written)
    for key in ("graphProfile", "executionProfile"):
        assert differences(SKELETON[key], exported[key]) == []
    strict = differences(SKELETON["graphProfile"], exported["graphProfile"], derived=())
    assert "$.memory.byCategory.vertexInstanceState.total: added by the export" in strict
    assert exported["graphProfile"]["memory"]["byCategory"]["vertexInstanceState"]["total"] == [16, 16, 16, 16]
    assert exported["graphProfile"]["target"]["numTiles"] == 4


def test_unknown_keys_come_back_where_they_were(tmp_path):
    graph = complete_graph_profile()
    graph["target"]["futureField"] = {"nested": [1, 2, 3]}
    graph["programs"][3]["annotation"] = "hot"
    execution = execution_profile(graph, "IPU_MODEL")
    execution["simulation"]["steps"][1]["extra"] = 7.5
    document = {"graphProfile": graph, "executionProfile": execution, "producer": "test"}
    convert_legacy([write_json(tmp_path / "in.json", document)], tmp_path / "p.pop")
    (written,) = export_legacy(tmp_path / "p.pop", tmp_path / "out.json")
    assert differences(document, _read(written), derived=()) == []


def test_exchange_ids_without_exchange_arrays_come_back(tmp_path):
    document = {
        "graphProfile": {
            "target": {"numIPUs": 1, "tilesPerIPU": 2},
            "programs": [{"exchange": 5, "type": "DoExchange"}, {"exchange": 2, "type": "StreamCopy"}],
        },
        "executionProfile": {
            "profilerMode": "IPU_MODEL",
            "simulation": {"steps": [{"type": "DoExchange", "program": 0, "exchange": 5, "cycles": 3}]},
        },
    }
    convert_legacy([write_json(tmp_path / "in.json", document)], tmp_path / "p.pop")
    (written,) = export_legacy(tmp_path / "p.pop", tmp_path / "out.json")
    exported = _read(written)
    assert exported["graphProfile"]["programs"] == document["graphProfile"]["programs"]
    for key in ("graphProfile", "executionProfile"):
        assert differences(document[key], exported[key]) == []


def test_directory_form_writes_graph_and_execution_files(tmp_path):
    source = write_json(tmp_path / "in.json", SKELETON)
    convert_legacy([source], tmp_path / "p.pop")
    written = export_legacy(tmp_path / "p.pop", tmp_path / "legacy", encoding="cbor")
    assert [os.path.basename(p) for p in written] == ["graph.cbor", "execution.cbor"]
    assert sorted(os.listdir(tmp_path / "legacy")) == ["execution.cbor", "graph.cbor", "manifest.json"]
    with open(written[0], "rb") as handle:
        assert handle.read(3) == CBOR_MAGIC  # TensorFlow checked that the first byte is 0xD9
    assert differences(SKELETON["graphProfile"], _read(written[0])) == []
    # and the pair converts back again
    convert_legacy(written, tmp_path / "again.pop")


def _export_convert_export(report, directory):
    first = export_legacy(report, directory / "first.json")[0]
    convert_legacy([first], directory / "second.pop")
    second = export_legacy(directory / "second.pop", directory / "second.json")[0]
    return _read(first), _read(second)


def test_sample_report_round_trips_through_legacy(tmp_path, sample):
    first, second = _export_convert_export(sample.path, tmp_path)
    assert differences(first, second, derived=()) == []
    graph = first["graphProfile"]
    assert graph["target"]["numTiles"] == 8 and graph["target"]["type"] == "IPU_MODEL"
    assert [p["type"] for p in graph["programs"][:4]] == ["Sequence", "StreamCopyBegin", "StreamCopy", "StreamCopyEnd"]
    assert len(first["executionProfile"]["simulation"]["steps"]) == 11


@pytest.mark.parametrize(
    "preset, knobs", [("tutorial3", {}), ("matrix-vector", {}), ("matmul", {"m": 32, "k": 32, "n": 32})]
)
def test_simulated_reports_round_trip_through_legacy(tmp_path, preset, knobs):
    presets = pytest.importorskip("simulator.presets")
    presets.run_preset(preset, knobs, directory=str(tmp_path))
    first, second = _export_convert_export(tmp_path / "profile.pop", tmp_path)
    assert differences(first, second, derived=()) == []
    assert first["executionProfile"]["simulation"]["steps"], "a simulated report has execution steps"
    assert first["graphProfile"]["programs"]


def test_derived_locations_are_documented():
    assert "$.simulation.steps[*].*" in DERIVED and "$.memory.byCategory.*.total" in DERIVED
