"""Every simulator preset, and a 2-IPU matmul, with knobs small enough to simulate in a second or two."""

from __future__ import annotations

import pathlib

from simulator.presets import PRESETS, run_preset

#: Small knobs so each case simulates in a second or two; the rest keep their defaults.
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


def simulate_case(case: str, directory: str | pathlib.Path) -> pathlib.Path:
    """The report of a case (a preset's name, or matmul-2ipu) simulated on 16-tile IPUs into `directory`."""
    preset = "matmul" if case == "matmul-2ipu" else case
    run_preset(preset, {"tiles-per-ipu": 16, **KNOBS.get(case, {})}, str(directory), timestamp=1_700_000_000.0)
    return pathlib.Path(directory) / "profile.pop"
