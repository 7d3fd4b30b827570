"""When two legacy profiles are equivalent: what legacy -> pop -> legacy preserves.

Two documents are equivalent when, after `normalise`:

* the key order of objects is ignored (the exporter writes keys sorted, as Poplar did);
* numbers compare by value (3 and 3.0 are equal; CBOR and JSON integers alike);
* the exported document may hold keys the original lacked only where `DERIVED` allows: values
  the format stores anyway and writes back (derived sizes, zero defaults, the documented fields
  of each step type). Every key of the original is present with an equal value.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..streaming.runs import Run

#: Locations (JSON paths with [*] for any index) the exporter may add to what the input had.
DERIVED = (
    "$.target.*",
    "$.graph",
    "$.graph.*",
    "$.optimizationInfo",
    "$.vertexTypes",
    "$.vertexTypes.*",
    "$.computeSets",
    "$.computeSets.names",
    "$.controlPrograms",
    "$.functionPrograms",
    "$.memory",
    "$.memory.byTile.*",
    "$.memory.byCategory.*.total",
    "$.memory.byComputeSet.*",
    "$.memory.byVertexType.*",
    "$.memory.liveness",
    "$.memory.liveness.alwaysLive",
    "$.memory.liveness.alwaysLive.bytesByTile",
    "$.memory.liveness.notAlwaysLive",
    "$.memory.liveness.notAlwaysLive.maxBytesByTile",
    "$.simulation.cycles",
    "$.simulation.tileCycles.*",
    "$.simulation.steps[*].*",
    # what a profile.pop holds and v1 has no place for (docs/formats.md)
    "$.pva",
    "$.pva.*",
)


def normalise(value: Any) -> Any:
    """Plain Python values: Runs and numpy arrays become lists, integral floats become ints."""
    if isinstance(value, Run):
        value = value.tolist()
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, Mapping):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return value


def differences(original: Any, exported: Any, *, derived: tuple[str, ...] = DERIVED, limit: int = 20) -> list[str]:
    """Where `exported` is not equivalent to `original` (empty when equivalent)."""
    found: list[str] = []
    patterns = tuple(d.replace("[*]", "#") for d in derived)
    _compare(normalise(original), normalise(exported), "$", "$", patterns, found, limit)
    return found


def _compare(a: Any, b: Any, path: str, pattern: str, derived: tuple[str, ...], found: list[str], limit: int) -> None:
    if len(found) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a:
            if key not in b:
                found.append(f"{path}.{key}: missing from the export")
            else:
                _compare(a[key], b[key], f"{path}.{key}", f"{pattern}.{key}", derived, found, limit)
        for key in b:
            if key not in a and not any(fnmatch.fnmatchcase(f"{pattern}.{key}", d) for d in derived):
                found.append(f"{path}.{key}: added by the export")
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            found.append(f"{path}: {len(a)} items in the original, {len(b)} in the export")
            return
        for index, (x, y) in enumerate(zip(a, b)):
            _compare(x, y, f"{path}[{index}]", f"{pattern}#", derived, found, limit)
        return
    if a != b or type(a) is bool and type(b) is not bool:
        found.append(f"{path}: {a!r} in the original, {b!r} in the export")
