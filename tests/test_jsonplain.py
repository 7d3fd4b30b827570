"""formats.json_values.plain: the one walker that makes values JSON-plain."""

import decimal
import json

import numpy as np

from formats.json_values import plain


def test_plain_makes_every_kind_json_serialisable():
    value = {
        "array": np.array([1, 2, 3], dtype=np.uint64),
        "scalar": np.float32(0.5),
        "nested": [(np.int16(-4), b"\x01\xff"), {"d": decimal.Decimal("12")}],
        "fraction": decimal.Decimal("1.5"),
        "none": None,
    }
    result = plain(value)
    assert result == {
        "array": [1, 2, 3],
        "scalar": 0.5,
        "nested": [[-4, "01ff"], {"d": 12}],
        "fraction": 1.5,
        "none": None,
    }
    assert type(result["array"][0]) is int
    json.dumps(result)
