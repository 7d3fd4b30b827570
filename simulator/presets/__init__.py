"""Ready-made models for `pva simulate`: the Poplar tutorials, single layers and whole networks.

- registry: knobs, the `preset` decorator, `build_preset`, `run_preset` and `listing`;
- tutorials, layers, networks: the presets, registered in that order when the package loads
  (the tutorials' vertices, such as `SumVertex`, are in `tutorials`).

Names with a leading underscore are shared between the package's modules only.
"""

from __future__ import annotations

from .registry import (
    MAX_HEADS,
    MAX_IPUS,
    MAX_LAYERS,
    MAX_RUNS,
    MAX_STEPS,
    PRESETS,
    Built,
    Knob,
    Preset,
    build_preset,
    flag,
    listing,
    preset,
    resolve_knobs,
    run_preset,
)

# the modules register their presets as they load, in the order of `pva simulate --list`
# isort: off
from . import tutorials
from . import layers
from . import networks

# isort: on

__all__ = [
    "MAX_HEADS",
    "MAX_IPUS",
    "MAX_LAYERS",
    "MAX_RUNS",
    "MAX_STEPS",
    "PRESETS",
    "Built",
    "Knob",
    "Preset",
    "build_preset",
    "flag",
    "layers",
    "listing",
    "networks",
    "preset",
    "resolve_knobs",
    "run_preset",
    "tutorials",
]
