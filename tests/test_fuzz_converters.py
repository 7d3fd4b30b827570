"""Fuzzing the legacy (JSON, CBOR) and Chrome-trace readers with malformed input.

Every case must end either in a report (or trace) the object model reads, or in a pva.PvaError
that names the input file and the location of the fault (a JSON location such as
``$.computeSets.names[3]``, or a byte position). Never an unexpected exception, a hang, a huge
allocation, or a file left behind.
"""

from __future__ import annotations

import json
import os
import re
import struct

import cbor2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from legacy_builders import complete_graph_profile, execution_profile

import pva
from formats.chrome.importer import import_chrome_trace
from formats.convert import convert
from formats.errors import PvaError

#: Examples per fuzz test. The suite runs them deterministically; set PVA_FUZZ_EXAMPLES for a longer,
#: randomised campaign (for example PVA_FUZZ_EXAMPLES=2000 python -m pytest tests/test_fuzz_converters.py).
EXAMPLES = int(os.environ.get("PVA_FUZZ_EXAMPLES", "120"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize="PVA_FUZZ_EXAMPLES" not in os.environ,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

_LOCATION = re.compile(r"(\$|byte \d|line \d)")


def _small_document() -> dict:
    graph = complete_graph_profile(num_ipus=1, tiles_per_ipu=3, seed=11)
    return {"graphProfile": graph, "executionProfile": execution_profile(graph, "COMPUTE_SETS", seed=2)}


BASE = _small_document()
BASE_JSON = json.dumps(BASE).encode()
BASE_CBOR = b"\xd9\xd9\xf7" + cbor2.dumps(BASE)
CHROME = json.dumps(
    {
        "traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "host"}},
            {
                "ph": "X",
                "name": "layer",
                "ts": 10,
                "dur": 90,
                "pid": 1,
                "tid": 2,
                "cat": "CONV",
                "args": {"total_cycle": 5},
            },
            {"ph": "B", "name": "b", "ts": 20, "pid": 1, "tid": 2},
            {"ph": "E", "ts": 30, "pid": 1, "tid": 2},
            {"ph": "i", "name": "mark", "ts": 40, "pid": 1, "tid": 2, "s": "t"},
            {"ph": "C", "name": "mem", "ts": 50, "pid": 1, "args": {"used": 3}},
        ],
        "displayTimeUnit": "ns",
    }
).encode()

NASTY_VALUES = [
    b"-1",
    b"1.5",
    b"1e400",
    b"-1e400",
    b"99999999999999999999999999",
    b"NaN",
    b"Infinity",
    b"null",
    b"true",
    b'"x"',
    b"[]",
    b"{}",
    b"[[[[[[[[]]]]]]]]",
    b"0.0",
    b"18446744073709551616",
    b"-0",
    b"[" * 5000 + b"]" * 5000,
    b"1e-400",
    b'"\\ud800"',
    b"00",
    b"[1,,2]",
    b"[1,2",
]


@st.composite
def mutated(draw, base: bytes):
    """Bytes of a document with a few mutations: cuts, flips, insertions, or nasty values swapped in."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "value", "value", "value"]))
        if not data:
            break
        position = draw(st.integers(0, len(data) - 1))
        if kind == "truncate":
            del data[position:]
        elif kind == "flip":
            data[position] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            data[position:position] = draw(
                st.sampled_from([b",", b"]", b"}", b"{", b"[", b'"', b":", b"\x00", b"\xff"])
            )
        elif kind == "delete":
            del data[position : position + draw(st.integers(1, 40))]
        else:
            numbers = list(re.finditer(rb"-?\d+(?:\.\d+)?", bytes(data)))
            if numbers:
                match = numbers[draw(st.integers(0, len(numbers) - 1))]
                data[match.start() : match.end()] = draw(st.sampled_from(NASTY_VALUES))
    return bytes(data)


def _json_values():
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=8),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=12), inner, max_size=5)),
        max_leaves=30,
    )


@st.composite
def wrong_types(draw):
    """The base document with one value replaced by an arbitrary JSON value of another shape."""
    document = json.loads(BASE_JSON)
    node = document
    path = []
    while isinstance(node, (dict, list)) and node and draw(st.integers(0, 3)) > 0:
        key = draw(st.sampled_from(sorted(node))) if isinstance(node, dict) else draw(st.integers(0, len(node) - 1))
        path.append(key)
        parent, node = node, node[key]
    if path:
        parent[path[-1]] = draw(_json_values())
    return json.dumps(document).encode()


def _check_outcome(tmp_path, source: str, run) -> None:
    output = tmp_path / "out.file"
    output.unlink(missing_ok=True)  # Hypothesis runs every example in the same tmp_path
    before = set(os.listdir(tmp_path))
    try:
        run(source, output)
    except PvaError as exc:
        message = str(exc)
        assert source in message, message
        assert _LOCATION.search(message), message
        assert not output.exists()
    else:
        assert output.exists()
        os.unlink(output)
    after = set(os.listdir(tmp_path)) - {"out.file"}
    assert after == before, f"left behind: {after - before}"


def _convert_and_read(source, output):
    convert([source], output)
    with pva.openReport(output) as report:
        c = report.compilation
        assert c.target.numTiles >= 1
        for cs in c.computeSets:
            list(cs.estimatedCyclesByTile)
        for program in c.programs:
            list(program.children)
        [t.memory.total.excludingGaps for t in c.tiles]
        [s.program for s in report.execution.steps]


def _import_and_read(source, output):
    import_chrome_trace(source, output)
    with pva.openTrace(output) as trace:
        for process in trace.processes:
            for thread in process.threads:
                for event in thread.events:
                    event.args


def _write(tmp_path, name, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


@FUZZ
@given(data=mutated(BASE_JSON))
def test_legacy_json_mutations(tmp_path, data):
    _check_outcome(tmp_path, _write(tmp_path, "in.json", data), _convert_and_read)


@FUZZ
@given(data=wrong_types())
def test_legacy_json_wrong_types(tmp_path, data):
    _check_outcome(tmp_path, _write(tmp_path, "in.json", data), _convert_and_read)


@FUZZ
@given(data=mutated(BASE_CBOR))
def test_legacy_cbor_mutations(tmp_path, data):
    _check_outcome(tmp_path, _write(tmp_path, "in.cbor", data), _convert_and_read)


@FUZZ
@given(value=_json_values())
def test_arbitrary_documents(tmp_path, value):
    for name, data in (
        ("in.json", json.dumps({"graphProfile": {"target": value}}).encode()),
        ("in.cbor", b"\xd9\xd9\xf7" + cbor2.dumps({"graphProfile": value})),
    ):
        _check_outcome(tmp_path, _write(tmp_path, name, data), _convert_and_read)


@FUZZ
@given(data=mutated(CHROME))
def test_chrome_trace_mutations(tmp_path, data):
    _check_outcome(tmp_path, _write(tmp_path, "trace.json", data), _import_and_read)


@FUZZ
@given(
    events=st.lists(
        st.dictionaries(
            st.sampled_from(["ph", "name", "ts", "dur", "pid", "tid", "args", "cat", "s"]),
            st.one_of(
                st.sampled_from(["X", "B", "E", "i", "C", "M", "s"]),
                st.integers(-(2**64), 2**64),
                st.floats(allow_nan=False),
                st.text(max_size=5),
                st.none(),
                st.dictionaries(st.text(max_size=4), st.one_of(st.integers(), st.text(max_size=3)), max_size=3),
            ),
        ),
        max_size=12,
    )
)
def test_chrome_trace_random_events(tmp_path, events):
    text = json.dumps(events, allow_nan=True).encode()
    _check_outcome(tmp_path, _write(tmp_path, "trace.json", text), _import_and_read)


@pytest.mark.parametrize(
    "header",
    [
        b"\x9b" + struct.pack(">Q", 2**60),  # an array of 2**60 items
        b"\xbb" + struct.pack(">Q", 2**59),  # a map of 2**59 pairs
        b"\x7b" + struct.pack(">Q", 2**62),  # a text string of 2**62 bytes
        b"\xd8\x46\x5b" + struct.pack(">Q", 2**61),  # a uint32 typed array of 2**61 bytes
    ],
)
def test_declared_lengths_beyond_the_input_allocate_nothing(tmp_path, header):
    import resource

    source = _write(tmp_path, "in.cbor", b"\xd9\xd9\xf7\xa1\x6cgraphProfile\xa1\x66target" + header + b"\x01\x02")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(PvaError) as caught:
        convert([source], tmp_path / "out.pop")
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 200_000
    assert source in str(caught.value)
    assert "$.graphProfile.target" in str(caught.value)
    assert os.listdir(tmp_path) == ["in.cbor"]


def test_deep_nesting_is_refused_not_a_crash(tmp_path):
    for name, data in (
        ("deep.json", b'{"graphProfile": {"target": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"),
        ("deep.cbor", b"\xd9\xd9\xf7\xa1\x6cgraphProfile" + b"\x81" * 100_000 + b"\x01"),
    ):
        source = _write(tmp_path, name, data)
        with pytest.raises(PvaError, match="nesting deeper than 200 levels"):
            convert([source], tmp_path / "out.pop")
