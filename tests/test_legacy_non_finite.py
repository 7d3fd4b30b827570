"""NaN and infinities in legacy JSON/CBOR profiles and Chrome traces: one-line errors naming the
file and the JSON location; the same words inside strings are text, not numbers."""

from __future__ import annotations

import json

import cbor2
import pytest
from legacy_builders import complete_graph_profile

from formats.convert import convert
from formats.errors import InvalidInputError
from formats.streaming.json_events import READ_SIZE

CBOR_SELF_DESCRIBE = b"\xd9\xd9\xf7"


def _graph_text(**replace) -> str:
    graph = complete_graph_profile()
    graph["target"]["clockFrequency"] = 1330000000.5
    text = json.dumps(graph)
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new, 1)
    return text


def _refusal(tmp_path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(InvalidInputError) as info:
        convert([path], tmp_path / "out.pop")
    assert not (tmp_path / "out.pop").exists()
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_scalar_in_json(tmp_path, literal):
    text = _graph_text(**{"1330000000.5": literal})
    offset = text.index(literal)
    message = _refusal(tmp_path, "graph.json", text.encode())
    assert message == (
        f"'{tmp_path / 'graph.json'}': $.target.clockFrequency at byte {offset:,}, line 1, "
        f"column {offset + 1}: expected a finite number, found {literal}"
    )


def test_non_finite_numbers_inside_number_arrays_name_their_index(tmp_path):
    graph = complete_graph_profile()
    total = graph["memory"]["byTile"]["total"]
    for index, literal in ((0, "NaN"), (3, "-Infinity"), (len(total) - 1, "Infinity")):
        values = [str(v) for v in total]
        values[index] = literal
        text = json.dumps(graph).replace(json.dumps(total), "[" + ", ".join(values) + "]", 1)
        message = _refusal(tmp_path, "graph.json", text.encode())
        assert f"': $.memory.byTile.total[{index}] at byte " in message
        assert message.endswith(f": expected a finite number, found {literal}")


def test_a_literal_split_between_two_reads_is_still_found(tmp_path):
    text = _graph_text()
    key = '"clockFrequency": '
    at = text.index(key) + len(key)
    padding = READ_SIZE - at - 1  # "NaN" starts one byte before the first read ends
    text = text[: at - len(key)] + " " * padding + key + "NaN" + text[at + len("1330000000.5") :]
    assert text[READ_SIZE - 1 : READ_SIZE + 2] == "NaN"
    message = _refusal(tmp_path, "graph.json", text.encode())
    assert "$.target.clockFrequency at byte" in message and message.endswith("found NaN")


def test_the_words_inside_strings_are_not_numbers(tmp_path):
    graph = complete_graph_profile()
    graph["computeSets"]["names"][0] = "NaN check, -Infinity [NaN]"
    graph["optimizationInfo"] = {"Infinity": 1}
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(graph))
    convert([path], tmp_path / "out.pop")
    assert (tmp_path / "out.pop").exists()


@pytest.mark.parametrize(
    ("event", "where"),
    [
        ({"name": "a", "ph": "X", "ts": 0, "dur": "NaN!", "pid": 1, "tid": 1}, "$[0].dur"),
        ({"name": "a", "ph": "X", "ts": 0, "dur": 5, "pid": 1, "tid": 1, "args": {"x": "NaN!"}}, "$[0].args.x"),
    ],
)
def test_chrome_trace_with_non_finite_numbers(tmp_path, event, where):
    text = json.dumps([event]).replace('"NaN!"', "NaN")
    message = _refusal(tmp_path, "trace.json", text.encode())
    assert f"': {where} at byte " in message and message.endswith("expected a finite number, found NaN")


def test_non_finite_scalar_in_cbor(tmp_path):
    graph = complete_graph_profile()
    graph["target"]["clockFrequency"] = float("nan")
    message = _refusal(tmp_path, "graph.cbor", CBOR_SELF_DESCRIBE + cbor2.dumps(graph))
    assert message.startswith(f"'{tmp_path / 'graph.cbor'}': $.target.clockFrequency at byte ")
    assert message.endswith("expected a finite number, found NaN")


def test_non_finite_number_in_a_cbor_array(tmp_path):
    graph = complete_graph_profile()
    graph["memory"]["byTile"]["total"][3] = float("-inf")
    message = _refusal(tmp_path, "graph.cbor", CBOR_SELF_DESCRIBE + cbor2.dumps(graph))
    assert f"'{tmp_path / 'graph.cbor'}': $.memory.byTile.total[3] at byte " in message
    assert message.endswith("expected a finite number, found -Infinity")
