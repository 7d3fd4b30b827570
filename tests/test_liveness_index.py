"""Liveness answers from pva.liveness_index equal the query layer's SQL definition, on every preset.

The SQL of formats.pop.query (one aggregate over vars_info per call) is the definition: a lowered
variable counts in a step when it is allocated, not always live, and its class is live there.
"""

from __future__ import annotations

import pytest
from reportbuilder import changed_copy
from test_simulator_presets import SMALL, TS

import pva
from simulator.presets import run_preset


@pytest.fixture(scope="module")
def preset_paths(tmp_path_factory):
    paths = {}
    for name in ("mnist-mlp", "bert-encoder", "large", "cnn", "matmul"):
        directory = tmp_path_factory.mktemp(name.replace("-", "_"))
        run_preset(name, SMALL[name], str(directory), timestamp=TS, functional=False)
        paths[name] = str(directory / "profile.pop")
    return paths


def _sizes(variables):
    return [(v.name, v._id, v.size) for v in variables]


def _check_every_answer(path: str) -> int:
    """Every step x tile, IPU and variable answer against the SQL; the number of answers compared."""
    compared = 0
    with pva.openReport(path) as report:
        compilation = report.compilation
        reader = compilation._reader
        target = compilation.target
        tiles = [t.tileId for t in compilation.tilesWithLivenessInfo]
        variables = list(compilation.variables)
        matrix = compilation.notAlwaysLiveMemoryArray()
        assert matrix.shape == (len(compilation.livenessProgramSteps), target.tilesPerReplica)
        assert matrix.dtype == "uint64" and not matrix.flags.writeable
        for step in compilation.livenessProgramSteps:
            index = step._index
            for tile in tiles:
                memory = step.notAlwaysLiveMemoryForTile(tile)
                assert memory.bytes == reader.not_always_live_bytes(index, tiles=(tile, tile + 1)), (index, tile)
                assert matrix[index, tile] == memory.bytes
                expected = compilation._sized_variables(reader.not_always_live_variables(index, tiles=(tile, tile + 1)))
                assert _sizes(memory.variables) == _sizes(expected), (index, tile)
                compared += 2
            for ipu in range(target.ipusPerReplica):
                lo, hi = ipu * target.tilesPerIpu, (ipu + 1) * target.tilesPerIpu
                recorded = reader.liveness_bytes_of_ipu(index, ipu)
                expected_bytes = reader.not_always_live_bytes(index, tiles=(lo, hi)) if recorded is None else recorded
                assert step.notAlwaysLiveMemoryForIpu(ipu).bytes == expected_bytes
                compared += 1
            for variable in variables:
                expected_bytes = reader.not_always_live_bytes_of_variable(index, variable._id)
                assert step.notAlwaysLiveBytesForVariable(variable) == expected_bytes
                compared += 1
        middle = len(matrix) // 2
        assert (compilation.notAlwaysLiveMemoryArray(middle, middle + 3) == matrix[middle : middle + 3]).all()
        assert compilation.notAlwaysLiveMemoryArray(5, 2).shape == (0, target.tilesPerReplica)
    return compared


@pytest.mark.parametrize("name", ["mnist-mlp", "bert-encoder", "large", "cnn", "matmul"])
def test_every_liveness_answer_of_a_preset_equals_the_sql_definition(preset_paths, name):
    assert _check_every_answer(preset_paths[name]) > 100


def test_the_sample_report_with_artificial_variables_and_overlapping_intervals(sample, tmp_path):
    assert _check_every_answer(sample.path) > 0
    # an interval overlapping another of its class counts the class once, as the SQL's IN does
    overlapping = changed_copy(sample.path, tmp_path / "o.pop", "INSERT INTO equivalence_class_steps VALUES (1, 3, 9)")
    assert _check_every_answer(overlapping) > 0
    with pva.openReport(overlapping) as report:
        artificial = [v for v in report.compilation.variables if v._id < 0] or [
            v for s in report.compilation.livenessProgramSteps for v in s.notAlwaysLiveMemory.variables if v._id < 0
        ]
        for variable in artificial:
            for step in report.compilation.livenessProgramSteps:
                expected = report.compilation._reader.not_always_live_bytes_named(step._index, variable.name)
                assert step.notAlwaysLiveBytesForVariable(variable._id) == expected


def test_a_class_id_that_is_not_an_integer_is_a_damaged_report(sample, tmp_path):
    damaged = changed_copy(
        sample.path, tmp_path / "d.pop", "UPDATE equivalence_class_steps SET \"end\" = 'x' WHERE class = 0"
    )
    with pva.openReport(damaged) as report:
        step = report.compilation.livenessProgramSteps[0]
        tile = report.compilation.tilesWithLivenessInfo[0]
        with pytest.raises(pva.PvaError, match="equivalence_class_steps class, start and end must be integers"):
            step.notAlwaysLiveMemoryForTile(tile)


@pytest.mark.parametrize("name", ["mnist-mlp", "bert-encoder"])
def test_lowered_variables_of_a_tile_read_lazily_equal_their_rows(preset_paths, name):
    with pva.openReport(preset_paths[name]) as report:
        compilation = report.compilation
        reader = compilation._reader
        for tile in compilation.tiles[: compilation.target.tilesPerReplica]:
            found = compilation.loweredVariables.forTile(tile)
            rows = reader.lowered_variables_on_tile(tile.tileId)
            assert [(v._id, v.tileId, v.bytes) for v in found] == [(r[0], r[1], r[3]) for r in rows]
            assert [v._row for v in found] == rows
            assert [(v.name, v.alignment, v.offset, v.allocated, v.hasUnloweredVar) for v in found] == [
                (r[2], r[4], r[5], bool(r[7]), r[17] is not None) for r in rows
            ]


def test_ipus_read_step_by_step_then_at_once_give_the_same_bytes(preset_paths, monkeypatch):
    import pva.liveness_index

    monkeypatch.setattr(pva.liveness_index, "_IPU_STEPS_ASKED", 2)
    assert _check_every_answer(preset_paths["bert-encoder"]) > 100
