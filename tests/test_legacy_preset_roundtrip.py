"""pop -> legacy (JSON and CBOR) -> pop on every simulator preset: `pva check` passes and the key
figures survive (the legacy format holds one simulation, so several runs come back as one)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from formats.exporters.legacy import export_legacy
from formats.legacy import convert_legacy
from formats.pop.check import check_report
from formats.pop.reader import ProfileReader
from simulator.presets import PRESETS, run_preset

#: Small knobs so each preset simulates in a second or two; the rest keep their defaults.
KNOBS = {
    "matmul": {"m": 64, "k": 96, "n": 64},
    "matmul-2ipu": {"m": 128, "k": 128, "n": 128, "ipus": 2},
    "conv": {"batch": 1, "in-chans": 16, "out-chans": 16, "height": 8, "width": 8},
    "mnist-mlp": {"batch": 4, "hidden": 32, "steps": 2, "runs": 2},
    "cnn": {"batch": 1, "channels": 8, "layers": 2, "size": 8},
    "matrix-vector": {"rows": 100, "cols": 40},
    "bert-encoder": {"layers": 1, "seq": 16, "hidden": 32},
    "large": {"ipus": 2, "layers": 2, "seq": 16, "hidden": 32, "heads": 2, "tiles-per-layer": 4},
}
CASES = sorted(set(PRESETS) | {"matmul-2ipu"})


def _key_figures(path) -> dict:
    r = ProfileReader(path)
    try:
        return {
            "cycle_totals": r.query(
                "SELECT ipu, sum(active_compute), sum(compute), sum(inter_ipu_exchange), sum(stream_copy_begin), "
                "sum(stream_copy), sum(stream_copy_end), sum(internal_exchange), sum(sync), sum(total) "
                "FROM cycle_totals GROUP BY ipu ORDER BY ipu"
            ),
            "run_cycles": r.query_one(
                'SELECT sum(c) FROM (SELECT max("end" - start) AS c FROM run_cycles_by_ipu GROUP BY run)'
            )[0],
            "step_cycles_by_ipu": r.query(
                "SELECT ipu, sum(cycles) FROM steps_by_ipu WHERE profiled GROUP BY ipu ORDER BY ipu"
            ),
            "steps": r.query("SELECT id, type, program, compute_set, name, sync_type FROM steps ORDER BY id"),
            "compute_sets": r.query("SELECT name FROM compute_sets ORDER BY compute_set"),
            "memory": r.query_one(
                "SELECT sum(total), sum(total_including_gaps), sum(always_live_bytes), sum(not_always_live_bytes), "
                "max(total) FROM memory_by_tile"
            ),
            "graph": dict(r.graph),
        }
    finally:
        r.close()


@pytest.fixture(scope="module", params=CASES)
def simulated_preset(request, tmp_path_factory):
    name = request.param
    preset = "matmul" if name == "matmul-2ipu" else name
    directory = tmp_path_factory.mktemp(name)
    run_preset(preset, {"tiles-per-ipu": 16, **KNOBS.get(name, {})}, str(directory), timestamp=1_700_000_000.0)
    return directory / "profile.pop"


@pytest.mark.parametrize("encoding", ["json", "cbor"])
def test_preset_round_trips_through_legacy(simulated_preset, tmp_path, encoding):
    original = simulated_preset
    assert check_report(original) == []
    written = export_legacy(original, tmp_path / "legacy", encoding=encoding, combined=False)
    assert [p.rsplit("/", 1)[-1] for p in map(str, written)] == [f"graph.{encoding}", f"execution.{encoding}"]
    back = tmp_path / "back.pop"
    convert_legacy(written, back)
    assert [str(p) for p in check_report(back)] == []
    before, after = _key_figures(original), _key_figures(back)
    assert after["steps"] == before["steps"]
    assert after["compute_sets"] == before["compute_sets"]
    assert after["memory"] == before["memory"]
    assert after["graph"] == before["graph"]
    assert after["cycle_totals"] == before["cycle_totals"]
    assert after["step_cycles_by_ipu"] == before["step_cycles_by_ipu"]
    assert after["run_cycles"] == before["run_cycles"]


def test_pva_check_passes_after_the_command_line_round_trip(tmp_path):
    directory = tmp_path / "r"
    run_preset("tutorial1", {"tiles-per-ipu": 16}, str(directory), timestamp=1_700_000_000.0)
    commands = [
        ["export", str(directory / "profile.pop"), "--format", "legacy-json", "-o", str(tmp_path / "L")],
        [
            "convert",
            str(tmp_path / "L" / "graph.json"),
            str(tmp_path / "L" / "execution.json"),
            "-o",
            str(tmp_path / "back.pop"),
        ],
        ["check", str(tmp_path / "back.pop")],
    ]
    for args in commands:
        done = subprocess.run([sys.executable, "-m", "pva", *args], capture_output=True, text=True, check=False)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    assert done.stdout.strip().endswith("back.pop: ok")
