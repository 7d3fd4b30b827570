"""Every `pva simulate` preset: its results, the report invariants, determinism and the CLI."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
from simulator_invariants import check_report

from formats.pop.reader import ProfileReader
from pva.cli import main as cli_main
from simulator import Graph, Target
from simulator.errors import GraphError, OptionError
from simulator.presets import PRESETS, build_preset, resolve_knobs, run_preset

TS = "2024-01-01T00:00:00Z"

#: Small knobs for every preset so the suite stays fast.
SMALL = {
    "tutorial1": {},
    "tutorial2": {},
    "tutorial3": {},
    "matrix-vector": {"rows": 60, "cols": 40, "tiles-per-ipu": 16},
    "matmul": {"m": 96, "k": 64, "n": 80, "tiles-per-ipu": 32, "dtype": "float"},
    "fc": {"batch-size": 4, "input-size": 40, "output-size": 24, "tiles-per-ipu": 16},
    "gemm": {"m": 24, "k": 40, "n": 16, "beta": 0.5, "tiles-per-ipu": 16},
    "conv": {"batch": 2, "in-chans": 8, "out-chans": 8, "height": 6, "width": 6, "tiles-per-ipu": 16},
    "mnist-mlp": {"batch": 4, "hidden": 16, "steps": 2, "runs": 2, "tiles-per-ipu": 32},
    "cnn": {"batch": 2, "channels": 4, "layers": 2, "size": 6, "tiles-per-ipu": 16},
    "bert-encoder": {"layers": 2, "seq": 16, "hidden": 32, "heads": 2, "ipus": 2, "tiles-per-ipu": 16},
    "large": {
        "ipus": 2,
        "layers": 2,
        "steps": 2,
        "seq": 8,
        "hidden": 16,
        "heads": 2,
        "tiles-per-layer": 8,
        "tiles-per-ipu": 16,
    },
}


def test_every_preset_has_small_knobs():
    assert set(SMALL) == set(PRESETS)


@pytest.fixture(scope="module")
def preset_reports(tmp_path_factory):
    reports = {}
    for name, knobs in SMALL.items():
        directory = tmp_path_factory.mktemp(name.replace("-", "_"))
        engine = run_preset(name, knobs, str(directory), timestamp=TS)
        reports[name] = (directory, engine)
    return reports


@pytest.mark.parametrize("name", sorted(SMALL))
def test_preset_report_invariants(preset_reports, name):
    directory, engine = preset_reports[name]
    assert check_report(directory / "profile.pop") == []
    r = ProfileReader(directory / "profile.pop")
    assert r.query_one("SELECT count(*) FROM steps")[0] > 0
    assert r.metadata["instrumentation_compute"] == "Tile"
    # every table the concept applies to is filled
    for table in (
        "compute_sets",
        "compute_set_vertices",
        "compute_set_vars",
        "programs",
        "program_children",
        "program_vectors",
        "program_vars",
        "vars_info",
        "variables",
        "var_categories",
        "memory_by_tile",
        "memory_by_category",
        "vertex_memory",
        "liveness_steps",
        "liveness_step_ipus",
        "liveness_tiles",
        "always_live_vars",
        "equivalence_class_steps",
        "runs",
        "run_cycles_by_ipu",
        "run_parameters",
        "steps_by_ipu",
        "step_compute_sets",
        "cycle_totals",
        "debug_context_refs",
        "optimisation_metrics",
        "compilation_parameters",
        "target_parameters",
    ):
        assert r.query_one(f"SELECT count(*) FROM {table}")[0] > 0, table
    r.close()


def test_tutorial_outputs(preset_reports):
    assert preset_reports["tutorial1"][1].printed == [
        "v1-debug: {1,1.5,2,2.5}",
        "v2-debug: {1,1.5,2,2.5}",
        "v4-0: {0,1,2,3,4,5,6,7,8,9}",
        "v4-1: {10,11,12,13,14,15,16,17,18,19}",
    ]
    assert preset_reports["tutorial2"][1].printed[0] == "v3: {\n {5,4.5},\n {4,3.5}\n}"
    assert preset_reports["tutorial2"][1].printed[2] == "v5: {\n {5,3.5},\n {5,3.5}\n}"
    assert preset_reports["tutorial3"][1].printed == ["v1: {1,1.5,2,2.5}", "v2: {7,6,4.5,2.5}"]


def test_tutorial3_cycle_estimate(preset_reports):
    directory, _ = preset_reports["tutorial3"]
    r = ProfileReader(directory / "profile.pop")
    count, cycles, est_row, act_row = r.query_one(
        "SELECT v.count, v.estimated_cycles, c.estimated_cycles_row, c.active_cycles_row FROM compute_set_vertices v "
        "JOIN compute_sets c ON c.compute_set = v.compute_set JOIN vertex_types t ON t.id = v.vertex_type "
        "WHERE t.name = 'SumVertex'"
    )
    assert (count, cycles) == (4, 80)
    # one vertex of 20 thread cycles alone on each of tiles 0..3: 120 tile cycles, 20 active
    assert r.matrix("compute_set_estimated_cycles_by_tile").row(est_row)[:5].tolist() == [120, 120, 120, 120, 0]
    assert r.matrix("compute_set_active_cycles_by_tile").row(act_row)[:5].tolist() == [20, 20, 20, 20, 0]
    assert r.query_one("SELECT source FROM vertex_types WHERE name = 'SumVertex'")[0] == "CPlusPlus"


def test_matrix_vector_result(tmp_path):
    engine = run_preset("matrix-vector", SMALL["matrix-vector"], str(tmp_path), timestamp=TS)
    built = build_preset("matrix-vector", SMALL["matrix-vector"])
    expected = built.notes["matrix"] @ built.notes["vector"]
    assert np.allclose(engine._data.read(engine.graph.state.host_handles[("read", "out")][1]), expected)
    assert built.notes["split"] >= 1


def test_same_model_same_report(tmp_path):
    first = tmp_path / "run"
    run_preset("mnist-mlp", SMALL["mnist-mlp"], str(first), timestamp=TS)
    shutil.copy(first / "profile.pop", tmp_path / "first.pop")
    shutil.copy(first / "debug.cbor", tmp_path / "first.cbor")
    run_preset("mnist-mlp", SMALL["mnist-mlp"], str(first), timestamp=TS)
    assert (first / "profile.pop").read_bytes() == (tmp_path / "first.pop").read_bytes()
    assert (first / "debug.cbor").read_bytes() == (tmp_path / "first.cbor").read_bytes()


def test_knob_errors():
    with pytest.raises(OptionError, match=r"preset 'matmul' has no knob --rows; its knobs are --arch"):
        resolve_knobs("matmul", {"rows": 3})
    with pytest.raises(OptionError, match="knob --dtype of preset 'matmul' must be one of half, float"):
        resolve_knobs("matmul", {"dtype": "double"})
    with pytest.raises(OptionError, match="knob --m of preset 'matmul' expects a whole number, got 'many'"):
        resolve_knobs("matmul", {"m": "many"})
    with pytest.raises(OptionError, match="unknown preset 'resnet'"):
        resolve_knobs("resnet", {})


def test_cli_list(capsys):
    assert cli_main(["simulate", "--list"]) == 0
    out = capsys.readouterr().out
    for name in PRESETS:
        assert f"{name}: " in out
    assert "--dtype" in out and "--layers" in out and "(ipu1|ipu2|ipu21)" in out


def test_cli_run_and_bad_knob(tmp_path, capsys):
    directory = tmp_path / "out"
    assert (
        cli_main(
            [
                "simulate",
                "--preset",
                "matmul",
                "--m",
                "64",
                "--k",
                "32",
                "--n",
                "48",
                "--tiles-per-ipu",
                "16",
                "--arch",
                "ipu1",
                "-o",
                str(directory),
                "--timestamp",
                TS,
                "--engine-option",
                "debug.computeInstrumentationLevel=vertex",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "matmul:" in out and "profile.pop" in out
    r = ProfileReader(directory / "profile.pop")
    assert r.target["architecture"] == "Ipu1" and r.target["tiles_per_ipu"] == 16
    assert r.metadata["instrumentation_compute"] == "Vertex"
    assert r.query_one("SELECT count(*) FROM step_vertex_cycles")[0] > 0
    r.close()
    bad = tmp_path / "bad"
    assert cli_main(["simulate", "--preset", "conv", "--m", "5", "-o", str(bad)]) == 2
    assert "preset 'conv' has no knob --m" in capsys.readouterr().err
    assert not bad.exists()
    assert cli_main(["simulate", "--preset", "matmul", "--engine-option", "debug.nope=1", "-o", str(bad)]) == 2
    assert "unknown engine option 'debug.nope'" in capsys.readouterr().err
    assert not bad.exists() or not os.listdir(bad)


def test_cli_refuses_a_shape_larger_than_the_device(tmp_path, capsys):
    # 10^13 halves of A: refused before any host array is sized by it, exit status 2, nothing written
    bad = tmp_path / "huge"
    args = ["simulate", "--preset", "gemm", "--m", "100000000", "--k", "100000", "--n", "100000", "-o", str(bad)]
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    # the planner refuses it first (createMatMulInputLHS plans the product before adding matA)
    assert "the product's left operand of shape [100000000, 100000] needs 20,000,000,000,000 bytes" in err
    assert "more than the 940,572,672 bytes of all the graph's 1,472 tiles" in err
    assert not bad.exists() or not os.listdir(bad)
    # a convolution whose padding makes its output field 2 x 10^9 + 26 square, or whose kernel has
    # 10^12 positions: refused before planning (an int64 overflow and a 2.3 GiB planner array)
    for knobs, what in (
        (["--padding", "1000000000"], "output of shape [16000000416000002704, 64]"),
        (["--kernel-size", "1000000", "--padding", "500000"], "weights of shape [64000000000000, 64]"),
    ):
        assert cli_main(["simulate", "--preset", "conv", *knobs, "-o", str(bad)]) == 2
        assert f"the product's {what}" in capsys.readouterr().err
        assert not bad.exists() or not os.listdir(bad)
    # the limit is the graph's tiles: 2,000 x 2,000 floats (16 MB) fit 1,472 Mk2 tiles, not 16
    g = Graph(Target("ipu2", tiles_per_ipu=16))
    with pytest.raises(
        GraphError, match=r"needs 16,000,000 bytes, more than the 10,223,616 bytes of all the graph's 16 tiles"
    ):
        g.addVariable("float", [2000, 2000], "big")
    g.addVariable("float", [1000, 1000], "fits")


@pytest.mark.parametrize(
    "preset, knob, value, limit",
    [
        ("matmul", "ipus", 65, "64"),
        ("large", "layers", 1001, "1,000"),
        ("large", "steps", 10_001, "10,000"),
        ("mnist-mlp", "runs", 1001, "1,000"),
        ("bert-encoder", "heads", 1025, "1,024"),
        ("tutorial3", "cycle-estimate", 2**32, "4,294,967,295"),
    ],
)
def test_knobs_that_count_work_are_bounded(preset, knob, value, limit):
    with pytest.raises(OptionError, match=f"knob --{knob} of preset '{preset}' must be at most {limit}, got {value:,}"):
        resolve_knobs(preset, {knob: value})
    resolve_knobs(preset, {knob: int(limit.replace(",", ""))})  # the bound itself is allowed


def test_cli_reports_a_run_out_of_host_memory(tmp_path, capsys, monkeypatch):
    # sizes the device can hold may still need more host memory than the process gets: a clear
    # error and exit status 2, what is already in the directory kept
    from simulator.presets import registry

    def out_of_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(registry, "build_preset", out_of_memory)
    directory = tmp_path / "out"
    directory.mkdir()
    (directory / "mine.txt").write_text("kept")
    assert cli_main(["simulate", "--preset", "conv", "--padding", "3000", "-o", str(directory)]) == 2
    err = capsys.readouterr().err
    assert "preset 'conv' with --padding 3000: simulating it needs more host memory than this machine" in err
    assert os.listdir(directory) == ["mine.txt"]
    # the same error for a caller of the Python API
    with pytest.raises(OptionError, match="preset 'conv' with its defaults: simulating it needs more host memory"):
        run_preset("conv", None, str(directory))
    assert os.listdir(directory) == ["mine.txt"]
