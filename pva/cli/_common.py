"""Helpers shared by commands: formatting numbers and printing JSON."""

from __future__ import annotations

import json
import sys
from typing import Any


def thousands(value: float | int) -> str:
    """A number with thousands separators: 1,216."""
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


def print_json(data: Any) -> None:
    """Print data as indented JSON on standard output."""
    json.dump(data, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def add_json_flag(parser) -> None:
    """Add the --json option every command has."""
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON instead of text")
