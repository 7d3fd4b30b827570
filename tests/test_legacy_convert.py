"""Legacy Poplar v1 profiles in: every documented section reaches profile.pop and the object model."""

from __future__ import annotations

import json
import os
import pathlib
import sqlite3

import numpy as np
import pytest
from legacy_builders import complete_graph_profile, execution_profile, write_cbor, write_json

import pva
from formats.errors import InvalidInputError, PvaError, UnsupportedVersionError
from formats.legacy import convert_legacy, read_document
from formats.streaming.runs import Run, Spool


@pytest.fixture(scope="module")
def complete(tmp_path_factory):
    """A complete graph profile with a COMPUTE_SETS execution profile, converted from one JSON document."""
    directory = tmp_path_factory.mktemp("legacy")
    graph = complete_graph_profile()
    execution = execution_profile(graph, "COMPUTE_SETS")
    source = write_json(directory / "profile.json", {"graphProfile": graph, "executionProfile": execution})
    output = str(directory / "profile.pop")
    result = convert_legacy([source], output)
    return graph, execution, output, result


def _sql(path, query, params=()):
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return conn.execute(query, params).fetchall()


def test_target_graph_and_vertex_types(complete):
    graph, _x, output, result = complete
    assert result.unknown_keys == 0 and result.warnings == []
    with pva.openReport(output) as report:
        target = report.compilation.target
        assert (target.numIPUs, target.tilesPerIpu, target.numTiles) == (2, 4, 8)
        assert target.bytesPerTile == 638976 and target.clockFrequency == 1.33e9
        assert target.type == pva.Target.Type.Ipu and target.architecture == pva.IPU.Architecture.Ipu2
        assert [t.relativeSyncDelay for t in report.compilation.tiles[:4]] == graph["target"]["relativeSyncDelayByTile"]
        g = report.compilation.graph
        assert (g.numComputeSets, g.numEdges, g.numVars, g.numVertices) == (4, 24, 111, 16)
        assert g.optimisationMetrics == {"cycleEstimateRatio": 0.75, "mergedCopies": 3.0}
    assert _sql(output, "SELECT name, size FROM vertex_types ORDER BY id") == list(
        zip(graph["vertexTypes"]["names"], graph["vertexTypes"]["sizes"])
    )


def test_compute_sets_vertices_and_cycle_estimates(complete):
    graph, _x, output, _r = complete
    cs = graph["computeSets"]
    with pva.openReport(output) as report:
        sets = report.compilation.computeSets
        assert [c.name for c in sets] == cs["names"]
        assert list(sets[2].estimatedCyclesByTile) == cs["cycleEstimates"]["cyclesByTile"][2]
        assert [(v.type.name, v.count) for v in sets[0].vertices] == [
            ("popops::ScaledAddSupervisor<float,float,true>", 2),
            ("poplar_rt::ShortMemcpy", 1),
        ]
    rows = _sql(
        output, "SELECT compute_set, vertex_type, count, estimated_cycles FROM compute_set_vertices ORDER BY id"
    )
    assert rows[:3] == [(0, 0, 2, 22), (0, 1, 1, 12), (1, 2, 5, 57)]
    assert _sql(
        output,
        "SELECT num_vertices, estimated_cycles_max, estimated_cycles_total FROM compute_sets WHERE compute_set = 1",
    ) == [(5, max(cs["cycleEstimates"]["cyclesByTile"][1]), sum(cs["cycleEstimates"]["cyclesByTile"][1]))]


def test_programs_tagged_union(complete):
    graph, _x, output, _r = complete
    with pva.openReport(output) as report:
        programs = report.compilation.programs
        assert len(programs) == len(graph["programs"])
        assert [p.type.name for p in programs[:10]] == [
            "Sequence",
            "OnTileExecute",
            "DoExchange",
            "OnTileExecute",
            "GlobalExchange",
            "StreamCopyMid",
            "Repeat",
            "RepeatWhile",
            "IfElse",
            "Call",
        ]
        assert programs[16].type == pva.Program.Type.OnTileSwitch
        assert [c._id for c in programs[0].children] == graph["programs"][0]["children"]
        assert programs[3].computeset.name == "layer1/fwd"
        assert [p._id for p in report.compilation.controlPrograms] == [0]
        assert [p._id for p in report.compilation.functions] == [12]
        exchange = programs[17]  # DoExchange of internal exchange 1
        assert list(exchange.bytesReceivedByTile) == graph["exchanges"]["bytesReceivedByTile"][1]
        assert list(exchange.codeBytesByTile) == graph["exchanges"]["codeBytesByTile"][1]
        assert list(exchange.estimatedCyclesByTile) == graph["exchanges"]["cyclesByTile"][1]
        assert list(programs[5].bytesSentByTile) == graph["hostExchanges"]["bytesSentByTile"][1]
        assert list(programs[4].estimatedCyclesByTile) == graph["externalExchanges"]["estimatedCyclesByTile"][0]
    assert _sql(output, "SELECT call_target FROM programs WHERE id = 9") == [(12,)]
    kept = dict(_sql(output, "SELECT path, value FROM extras WHERE source = 'legacy-graph-profile'"))
    assert json.loads(kept["$.programs[2].memoryByInstruction"])["total"] == 80
    assert json.loads(kept["$.programs[8].type"]) == "If"
    assert json.loads(kept["$.programs[7].type"]) == "RepeatWhileTrue"


def test_exchanges_keep_their_ids_and_share_rows_with_programs(complete):
    _g, _x, output, _r = complete
    rows = _sql(output, "SELECT family, exchange, kind, row FROM exchanges ORDER BY family, exchange, kind")
    assert ("internal", 1, "code_bytes", 1) in rows and ("host", 1, "estimated_cycles", 4) in rows
    shared = _sql(
        output,
        "SELECT v.row, e.row FROM program_vectors v JOIN programs p ON p.id = v.program "
        "JOIN exchanges e ON e.family = 'internal' AND e.exchange = p.exchange AND e.kind = v.kind "
        "WHERE p.type = 'DoExchange'",
    )
    assert shared and all(a == b for a, b in shared)


def test_memory_by_tile_category_compute_set_vertex_type_and_liveness(complete):
    graph, _x, output, _r = complete
    memory = graph["memory"]
    with pva.openReport(output) as report:
        tiles = report.compilation.tiles
        assert [t.memory.total.excludingGaps for t in tiles] == memory["byTile"]["total"]
        assert [t.memory.total.includingGaps for t in tiles] == memory["byTile"]["totalIncludingGaps"]
        assert [t.memory.alwaysLiveBytes for t in tiles] == memory["liveness"]["alwaysLive"]["bytesByTile"]
        assert [t.memory.notAlwaysLiveBytes for t in tiles] == memory["liveness"]["notAlwaysLive"]["maxBytesByTile"]
        variable = tiles[5].memory.category.variable
        assert (
            variable.nonInterleaved.nonOverlapped
            == memory["byCategory"]["variable"]["nonInterleaved"]["nonOverlapped"][5]
        )
        assert variable.overflowed.overlapped == memory["byCategory"]["variable"]["overflowed"]["overlapped"][5]
        assert variable.total == memory["byCategory"]["variable"]["total"][5]
    by_cs = memory["byComputeSet"]
    assert _sql(
        output, "SELECT code_bytes, vertex_data_bytes FROM compute_set_memory WHERE compute_set = 2 AND tile = 3"
    ) == [(by_cs["codeBytes"][2][3], by_cs["vertexDataBytes"][2][3])]
    by_vt = memory["byVertexType"]
    assert _sql(
        output, "SELECT edge_ptr_bytes, padding_bytes FROM vertex_memory WHERE vertex_type = 1 AND tile = 6"
    ) == [(by_vt["edgePtrBytes"][1][6], by_vt["paddingBytes"][1][6])]
    assert _sql(output, "SELECT id, program, parent, depth, not_always_live_bytes FROM liveness_steps ORDER BY id") == [
        (0, 0, None, 0, 4096),
        (1, 1, 0, 1, 1024),
        (2, 6, 0, 1, 2048),
        (3, 13, 2, 2, 512),
    ]


def test_execution_profile_compute_sets_mode(complete):
    graph, execution, output, _r = complete
    with pva.openReport(output) as report:
        assert report.instrumentationSettings.compute.name == "Tile"
        steps = report.execution.steps
        assert len(steps) == len(execution["simulation"]["steps"]) == 14
        assert [s.program.type.name for s in steps[:4]] == ["OnTileExecute", "DoExchange", "OnTileExecute", "Sync"]
        assert report.execution.totalCycles.compute == 8094
        assert report.execution.totalCycles.internalExchange == 2070
    first = execution["simulation"]["steps"][0]
    # Ipu.cycles sums the step over tiles (seed 004). In COMPUTE_SETS mode the tiles' cycles are
    # measured: computeSetCyclesByTile[cs], shared by the two executions of the compute set.
    measured = np.array(execution["computeSetCyclesByTile"][first["computeSet"]], dtype=np.uint64)
    share = measured // 2 + (measured % 2 > 0)
    # Two IPUs: each gets its own tiles' cycles; span and balances are the step's device-wide figures.
    rows = _sql(
        output,
        "SELECT ipu, cycles, tile_cycles_max, active_tiles, all_cycles_from_min, all_cycles_to_max, "
        "tile_balance, active_tile_balance, thread_balance FROM steps_by_ipu "
        "WHERE step_id = 0 ORDER BY ipu",
    )
    half = len(share) // 2
    assert rows == [
        (
            ipu,
            int(part.sum()),
            int(part.max()),
            int(np.count_nonzero(part)),
            first["cyclesFrom"],
            first["cyclesTo"],
            0.5,
            0.875,
            0.25,
        )
        for ipu, part in enumerate((share[:half], share[half:]))
    ]
    assert _sql(output, "SELECT type, sync_type FROM steps WHERE id = 3") == [("Sync", "External")]
    reader = __import__("formats.pop.reader", fromlist=["ProfileReader"]).ProfileReader(output)
    try:
        matrix = reader.matrix("compute_set_cycles_by_tile")
        assert matrix.rows().tolist() == execution["computeSetCyclesByTile"]
    finally:
        reader.close()
    assert (
        _sql(output, 'SELECT start, "end" FROM run_cycles_by_ipu WHERE run = 0 ORDER BY ipu')
        == [(0, execution["simulation"]["cycles"])] * 2
    )
    assert json.loads(_sql(output, "SELECT value FROM extras WHERE path = '$.programTrace'")[0][0]) == [0, 0]


@pytest.mark.parametrize(
    "mode", ["SINGLE_TILE_COMPUTE_SETS", "VERTICES", "EXTERNAL_EXCHANGES", "HOST_EXCHANGES", "NONE", "CPU"]
)
def test_every_profiler_mode_maps_its_arrays(tmp_path, mode):
    graph = complete_graph_profile()
    execution = execution_profile(graph, mode)
    output = tmp_path / "p.pop"
    convert_legacy([write_json(tmp_path / "g.json", graph), write_json(tmp_path / "x.json", execution)], output)
    assert _sql(output, "SELECT value FROM metadata WHERE key = 'legacy_profiler_mode'") == [(mode,)]
    if mode == "SINGLE_TILE_COMPUTE_SETS":
        assert [
            r[0] for r in _sql(output, "SELECT measured_cycles FROM compute_sets ORDER BY compute_set")
        ] == execution["computeSetCycles"]
    elif mode == "VERTICES":
        assert _sql(output, "SELECT compute_set, vertex_type, cycles FROM vertex_cycles ORDER BY vertex") == list(
            zip(execution["vertexComputeSet"], execution["vertexType"], execution["vertexCycles"])
        )
    elif mode in ("EXTERNAL_EXCHANGES", "HOST_EXCHANGES"):
        family = "external" if mode == "EXTERNAL_EXCHANGES" else "host"
        key = "externalExchangeCycles" if family == "external" else "hostExchangeCycles"
        with pva.openReport(output) as report:
            program = report.compilation.programs[4 if family == "external" else 5]
            if family == "external":
                assert list(program.exchangeCyclesByTile) == execution[key][0]
        assert len(
            _sql(output, "SELECT row FROM exchanges WHERE family = ? AND kind = 'exchange_cycles'", (family,))
        ) == len(execution[key])
    else:
        assert _sql(output, "SELECT count(*) FROM steps") == [(0,)]
        assert _sql(output, "SELECT count(*) FROM runs") == [(0,)]


def test_two_files_and_one_document_give_the_same_tables(tmp_path, complete):
    graph, execution, combined, _r = complete
    separate = tmp_path / "separate.pop"
    convert_legacy(
        [write_json(tmp_path / "graph.json", graph), write_json(tmp_path / "execution.json", execution)], separate
    )
    for table in ("programs", "steps", "steps_by_ipu", "memory_by_tile", "exchanges", "compute_set_memory"):
        assert _sql(separate, f"SELECT * FROM {table}") == _sql(combined, f"SELECT * FROM {table}"), table


def test_cbor_with_typed_arrays_matches_json(tmp_path, complete):
    graph, execution, combined, _r = complete
    source = write_cbor(
        tmp_path / "profile.cbor", {"graphProfile": graph, "executionProfile": execution}, typed_arrays=True
    )
    with open(source, "rb") as handle:
        assert handle.read(1) == b"\xd9"
    output = tmp_path / "cbor.pop"
    result = convert_legacy([source], output)
    assert "CBOR" in result.kinds[0]
    for table in ("programs", "steps_by_ipu", "memory_by_tile", "compute_set_vertices", "liveness_steps"):
        assert _sql(output, f"SELECT * FROM {table}") == _sql(combined, f"SELECT * FROM {table}"), table
    assert _sql(output, "SELECT matrix, first_row, num_rows FROM matrix_chunks ORDER BY matrix, first_row") == _sql(
        combined, "SELECT matrix, first_row, num_rows FROM matrix_chunks ORDER BY matrix, first_row"
    )


def test_pretty_printed_json_with_bom_parses_the_same(tmp_path, complete):
    graph, execution, combined, _r = complete
    text = json.dumps({"graphProfile": graph, "executionProfile": execution}, indent=2)
    source = tmp_path / "pretty.json"
    source.write_bytes(b"\xef\xbb\xbf" + text.encode())
    output = tmp_path / "pretty.pop"
    convert_legacy([source], output)
    assert _sql(output, "SELECT * FROM memory_by_tile") == _sql(combined, "SELECT * FROM memory_by_tile")


def test_unknown_keys_are_kept_queryable_and_counted(tmp_path):
    graph = {
        "target": {"numIPUs": 1, "tilesPerIPU": 2, "futureField": {"a": [1, 2]}},
        "programs": [{"type": "Sequence", "colour": "red"}],
        "newSection": [3, 4, 5],
    }
    execution = {
        "profilerMode": "IPU_MODEL",
        "simulation": {"cycles": 10, "steps": [{"type": "OnTileExecute", "cycles": 10, "hint": True}]},
    }
    output = tmp_path / "p.pop"
    result = convert_legacy(
        [write_json(tmp_path / "g.json", graph), write_json(tmp_path / "x.json", execution)], output
    )
    assert result.unknown_keys == 4
    assert result.warnings[0].startswith("4 unknown key(s) kept in table extras")
    kept = {(s, p): json.loads(v) for s, p, v in _sql(output, "SELECT source, path, value FROM extras")}
    assert kept[("legacy-graph-profile", "$.target.futureField")] == {"a": [1, 2]}
    assert kept[("legacy-graph-profile", "$.programs[0].colour")] == "red"
    assert kept[("legacy-graph-profile", "$.newSection")] == [3, 4, 5]
    assert kept[("legacy-execution-profile", "$.simulation.steps[0].hint")] is True


def test_missing_optional_sections_leave_parts_empty(tmp_path):
    output = tmp_path / "p.pop"
    convert_legacy([write_json(tmp_path / "g.json", {"target": {"numIPUs": 1, "numTiles": 16}})], output)
    with pva.openReport(output) as report:
        assert report.compilation.target.numTiles == 16
        assert len(report.compilation.computeSets) == 0
        assert len(report.compilation.programs) == 0
        assert len(report.execution.steps) == 0
        assert [t.memory.total.excludingGaps for t in report.compilation.tiles] == [0] * 16


@pytest.mark.parametrize(
    "document, location, message",
    [
        (
            {"target": {"numIPUs": 1, "tilesPerIPU": 4}, "memory": {"byTile": {"total": [1, 2, 3]}}},
            "$.memory.byTile.total",
            "expected 4 values (one per tile), found 3",
        ),
        (
            {
                "target": {"numIPUs": 1, "tilesPerIPU": 2},
                "computeSets": {"names": ["a"], "cycleEstimates": {"cyclesByTile": [[1, 2, 3]]}},
            },
            "$.computeSets.cycleEstimates.cyclesByTile[0]",
            "expected 2 values",
        ),
        (
            {
                "target": {"numIPUs": 1, "tilesPerIPU": 2},
                "programs": [{"type": "Sequence", "children": [1]}, {"type": "Sequence", "children": [0]}],
            },
            "$.programs[1].children[0]",
            "program 0 contains itself",
        ),
        (
            {"target": {"numIPUs": 2, "tilesPerIPU": 2, "numTiles": 5}},
            "$.target.numTiles",
            "expected numIPUs * tilesPerIPU = 4, found 5",
        ),
        (
            {"target": {"numIPUs": 1, "tilesPerIPU": 2}, "programs": [{"type": "OnTileExecute", "computeSet": 3}]},
            "$.programs[0].computeSet",
            "expected a compute set index below 0, found 3",
        ),
        (
            {"target": {"numIPUs": 1, "tilesPerIPU": 2}, "programs": [{"type": "Call", "target": 0}]},
            "$.programs[0].target",
            "expected an index below 0 into functionPrograms, found 0",
        ),
        (
            {"target": {"numIPUs": 64, "tilesPerIPU": 262144}},
            "$.target.tilesPerIPU",
            "more than the input could describe",
        ),
    ],
)
def test_bad_values_are_reported_with_path_and_location(tmp_path, document, location, message):
    output = tmp_path / "p.pop"
    source = write_json(tmp_path / "g.json", document)
    with pytest.raises(InvalidInputError) as caught:
        convert_legacy([source], output)
    text = str(caught.value)
    assert text.startswith(f"{source!r}: {location}"), text
    assert message in text
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, PvaError)
    assert not output.exists()
    assert os.listdir(tmp_path) == ["g.json"]


def test_a_failed_conversion_leaves_an_existing_output_untouched(tmp_path, complete):
    _g, _x, good, _r = complete
    output = tmp_path / "p.pop"
    output.write_bytes(pathlib.Path(good).read_bytes())
    before = output.read_bytes()
    source = write_json(
        tmp_path / "bad.json", {"target": {"numIPUs": 1, "tilesPerIPU": 2}, "memory": {"byTile": {"total": [1]}}}
    )
    with pytest.raises(InvalidInputError):
        convert_legacy([source], output)
    assert output.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["bad.json", "p.pop"]


def test_execution_profile_alone_is_refused(tmp_path):
    source = write_json(tmp_path / "x.json", {"profilerMode": "NONE"})
    with pytest.raises(InvalidInputError, match="an execution profile alone cannot be converted"):
        convert_legacy([source], tmp_path / "p.pop")


@pytest.mark.parametrize(
    "content, expected",
    [
        (b'{"format": "experimental", "profile": {}}', "a Poplar v2 'experimental' profile"),
        (b'{"profilerFormat": "v2", "data": []}', "a Poplar v2 'experimental' profile"),
        (b"Memory Usage      :\n  Total       :    1234 bytes\n  Step #0:\n", "a pre-2019 Poplar report"),
    ],
)
def test_other_generations_are_refused_by_name(tmp_path, content, expected):
    source = tmp_path / "old"
    source.write_bytes(content)
    with pytest.raises(UnsupportedVersionError) as caught:
        convert_legacy([source], tmp_path / "p.pop")
    assert expected in str(caught.value) and str(source) in str(caught.value)


def test_v3_sqlite_profile_is_refused(tmp_path):
    source = tmp_path / "profile.sqlite"
    with sqlite3.connect(source) as conn:
        conn.execute("CREATE TABLE compute_sets (compute_set INTEGER, name TEXT)")
    conn.close()
    with pytest.raises(UnsupportedVersionError, match="a SQLite profile that is not a pva report"):
        convert_legacy([source], tmp_path / "p.pop")


def test_long_arrays_are_spooled_not_kept_in_memory(tmp_path):
    tiles = 5000
    graph = {
        "target": {"numIPUs": 1, "tilesPerIPU": tiles},
        "computeSets": {"names": ["a", "b"], "cycleEstimates": {"cyclesByTile": [list(range(tiles))] * 2}},
    }
    source = write_json(tmp_path / "g.json", graph)
    with Spool(tmp_path) as spool:
        tree = read_document(source, "json", spool)
        rows = tree["computeSets"]["cycleEstimates"]["cyclesByTile"]
        assert all(isinstance(r, Run) and r._array is None and r._segments for r in rows)
        assert spool.size == 2 * tiles * 2  # uint16 values
        assert rows[1].array().tolist() == list(range(tiles))
    assert os.listdir(tmp_path) == ["g.json"]


def test_json_syntax_errors_name_the_location(tmp_path):
    source = tmp_path / "g.json"
    source.write_text(
        '{"target": {"numIPUs": 1, "tilesPerIPU": 2}, "computeSets": {"names": ["a", "b"],'
        ' "cycleEstimates": {"cyclesByTile": [[1, 2], [3,, 4]]}}}'
    )
    with pytest.raises(InvalidInputError) as caught:
        convert_legacy([source], tmp_path / "p.pop")
    assert "$.computeSets.cycleEstimates.cyclesByTile[1]" in str(caught.value)
    assert "line 1" in str(caught.value)


def test_compute_sets_mode_gives_steps_their_measured_tile_cycles(complete):
    """computeSetCyclesByTile[cs][tile] reaches ExecutionStep.cyclesByTile; Ipu.cycles is their sum."""
    _graph, execution, output, _r = complete
    measured = np.array(execution["computeSetCyclesByTile"], dtype=np.uint64)
    legacy_steps = execution["simulation"]["steps"]
    totals = np.zeros_like(measured)
    with pva.openReport(output) as report:
        steps = report.execution.steps
        executions = [i for i, s in enumerate(legacy_steps) if s["type"] == "OnTileExecute"]
        assert executions
        for index in executions:
            cs = legacy_steps[index]["computeSet"]
            by_tile = list(steps[index].cyclesByTile)
            assert len(by_tile) == measured.shape[1]
            assert sum(ipu.cycles for ipu in steps[index].ipus) == sum(by_tile) > 0
            totals[cs] += np.array(by_tile, dtype=np.uint64)
            runs = sum(1 for s in legacy_steps if s.get("computeSet") == cs)
            # each execution gets an equal share; the earliest take the remainder
            assert max(by_tile[t] - int(measured[cs, t]) // runs for t in range(len(by_tile))) <= 1
        used = sorted({legacy_steps[i]["computeSet"] for i in executions})
        assert totals[used].tolist() == measured[used].tolist()
        # steps without per-tile figures stay without them (a zero row: not profiled per tile)
        assert list(steps[1].cyclesByTile) == [0] * measured.shape[1]


def test_compute_sets_mode_split_of_a_compute_set_run_three_times(tmp_path):
    graph = complete_graph_profile()
    execution = execution_profile(graph, "COMPUTE_SETS")
    steps = execution["simulation"]["steps"]
    first = next(s for s in steps if s["type"] == "OnTileExecute")
    cs = first["computeSet"]
    tiles = graph["target"]["numTiles"]
    execution["computeSetCyclesByTile"][cs] = [7] * tiles
    repeats = [s for s in steps if s.get("computeSet") == cs]
    steps.append(dict(repeats[0]))
    count = len(repeats) + 1
    source = write_json(tmp_path / "p.json", {"graphProfile": graph, "executionProfile": execution})
    convert_legacy([source], tmp_path / "p.pop")
    with pva.openReport(str(tmp_path / "p.pop")) as report:
        rows = [list(s.cyclesByTile) for i, s in enumerate(report.execution.steps) if steps[i].get("computeSet") == cs]
    assert len(rows) == count
    assert [sum(r[0] for r in rows)] == [7]
    assert [r[0] for r in rows] == [7 // count + (1 if i < 7 % count else 0) for i in range(count)]
