"""Values made plain for JSON: the one walker that turns arrays, runs, bytes and decimals into JSON types."""

from __future__ import annotations

import decimal
from typing import Any


def plain(value: Any) -> Any:
    """`value` with every array-like (numpy arrays and scalars, runs: anything with `tolist`) made a list
    or a number, bytes made hex text, and exact decimals made ints (other decimals floats); dicts,
    lists and tuples are walked."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {key: plain(inner) for key, inner in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(inner) for inner in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, decimal.Decimal):  # DuckDB sums of integers are 128-bit decimals
        return int(value) if value == value.to_integral_value() else float(value)
    tolist = getattr(value, "tolist", None)
    if tolist is not None:
        return plain(tolist())
    return value
