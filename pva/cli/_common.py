"""Helpers shared by commands: formatting numbers and printing JSON."""

from __future__ import annotations

import json
import math
import sys
from typing import Any


def thousands(value: float | int) -> str:
    """A number with thousands separators: 1,216."""
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


def print_json(data: Any) -> None:
    """Print data as indented JSON on standard output: always valid JSON, a non-finite number (which JSON
    cannot hold) printed as null with a note on standard error."""
    try:
        text = json.dumps(data, indent=2, sort_keys=False, default=str, allow_nan=False)
    except ValueError:
        replaced: list[int] = [0]
        text = json.dumps(_finite(data, replaced), indent=2, sort_keys=False, default=str, allow_nan=False)
        print(
            f"note: {replaced[0]} value(s) that are not finite numbers (infinite or NaN) are printed as null",
            file=sys.stderr,
        )
    sys.stdout.write(text)
    sys.stdout.write("\n")


def _finite(data: Any, replaced: list[int]) -> Any:
    """`data` with every non-finite float replaced by None (counted in replaced[0])."""
    if isinstance(data, float):
        if math.isfinite(data):
            return data
        replaced[0] += 1
        return None
    if isinstance(data, dict):
        return {key: _finite(value, replaced) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(value, replaced) for value in data]
    return data


def add_json_flag(parser) -> None:
    """Add the --json option every command has."""
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON instead of text")
