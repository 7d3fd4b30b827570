"""Ready-made models for `pva simulate`: the Poplar tutorials, single layers and whole networks.

- registry: knobs, the `preset` decorator, `build_preset`, `run_preset` and `listing`;
- tutorials, layers, networks: the presets, registered in that order when the package loads.

Names with a leading underscore are shared between the package's modules only.
"""

from __future__ import annotations

import importlib

from .registry import PRESETS, Built, Knob, Preset, build_preset, listing, resolve_knobs, run_preset

# the modules register their presets as they load; this order is `pva simulate --list`'s
for _module in ("tutorials", "layers", "networks"):
    importlib.import_module(f"{__name__}.{_module}")

__all__ = [
    "PRESETS",
    "Built",
    "Knob",
    "Preset",
    "build_preset",
    "listing",
    "resolve_knobs",
    "run_preset",
]
