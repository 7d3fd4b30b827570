"""debug.cbor: the writer and reader in formats, and DebugContext, Filter and DebugContextLocation."""

from __future__ import annotations

import json
import os

import cbor2
import pytest
from test_compilation_builder import model  # noqa: F401  (fixture)

import pva
from formats.debug.debug_cbor import DebugInfoReader, write_debug_info


@pytest.fixture(scope="module")
def report(model):
    with pva.openReport(model.path, model.debug_path) as opened:
        yield opened


@pytest.fixture(scope="module")
def comp(report):
    return report.compilation


# -- the file --------------------------------------------------------------------------------


def test_round_trip(model):
    records = DebugInfoReader(model.debug_path).records
    assert sorted(records) == [c["id"] for c in model.contexts]
    for context in model.contexts:
        record = records[context["id"]]
        assert (record.layer, record.name, list(record.parents), record.data) == (
            context["layer"],
            context["name"],
            context["parents"],
            context["data"],
        )
        location = context["location"]
        assert record.location == (
            None if location is None else (location["fileName"], location["lineNumber"], location["functionName"])
        )


def test_file_layout_is_documented_cbor(model):
    with open(model.debug_path, "rb") as handle:
        document = cbor2.load(handle)
    assert document["pva_debug_info"] == "1.0"
    second = document["contexts"][1]
    assert second == {
        "id": 2,
        "layer": "popart",
        "name": "MatMul",
        "parentIds": [1],
        "location": {"fileName": "model.py", "lineNumber": 10, "functionName": "forward"},
        "op_name": "linear/MatMul",
        "op_type": "MatMul",
        "tensorId": "t1",
        "inputs": ["x", "w"],
    }


def test_writer_streams_an_iterable_and_counts(tmp_path):
    path = tmp_path / "debug.cbor"
    count = write_debug_info(
        path,
        ({"id": i, "layer": "poplar", "name": f"c{i}", "parents": [i - 1] if i > 1 else []} for i in range(1, 3001)),
    )
    assert count == 3000
    records = DebugInfoReader(path).records
    assert len(records) == 3000 and records[3000].parents == (2999,)


@pytest.mark.parametrize(
    "contexts, message",
    [
        ([{"id": 0, "layer": "x", "name": ""}], "'id' must be an integer >= 1"),
        ([{"id": 1, "layer": 5, "name": ""}], "'layer' must be a string"),
        ([{"id": 1, "layer": "x", "name": "", "parents": [7]}], r"names parent\(s\) \[7\]"),
        ([{"id": 1, "layer": "x", "name": ""}, {"id": 1, "layer": "y", "name": ""}], "context id 1 appears twice"),
        (
            [{"id": 1, "layer": "x", "name": "", "parents": [2]}, {"id": 2, "layer": "x", "name": "", "parents": [1]}],
            "its own ancestor",
        ),
        ([{"id": 1, "layer": "x", "name": "", "data": {"layer": "y"}}], "reserved"),
        ([{"id": 1, "layer": "x", "name": "", "data": {"f": float("nan")}}], "finite number"),
        ([{"id": 1, "layer": "x", "name": "", "data": {"f": object()}}], "JSON-able"),
        ([{"id": 1, "layer": "x", "name": "", "location": {"lineNumber": -1}}], "lineNumber"),
        ([{"id": 1, "layer": "x", "name": "", "colour": "red"}], r"unknown key\(s\) colour"),
        (["not a dict"], "expected a dict"),
    ],
)
def test_writer_rejects_bad_contexts_and_writes_nothing(tmp_path, contexts, message):
    path = tmp_path / "debug.cbor"
    with pytest.raises(pva.InvalidInputError, match=message) as info:
        write_debug_info(path, contexts)
    assert str(path) in str(info.value)
    assert os.listdir(tmp_path) == []


def test_writer_keeps_the_previous_file_on_error(tmp_path):
    path = tmp_path / "debug.cbor"
    write_debug_info(path, [{"id": 1, "layer": "poplar", "name": "keep"}])
    with pytest.raises(pva.InvalidInputError):
        write_debug_info(path, [{"id": 1, "layer": "poplar", "name": "new"}, {"id": 0}])
    assert DebugInfoReader(path).records[1].name == "keep"
    assert os.listdir(tmp_path) == ["debug.cbor"]


@pytest.mark.parametrize(
    "content, error, message",
    [
        (b"", pva.NotAReportError, "empty file"),
        (b'{"contexts": []}', pva.NotAReportError, "found a JSON document"),
        (cbor2.dumps({"contexts": [{"id": 1}]})[:-3], pva.CorruptReportError, "damaged or truncated"),
        (cbor2.dumps({"other": 1}), pva.NotAReportError, "a map without 'contexts'"),
        (cbor2.dumps({"contexts": 5}), pva.NotAReportError, "'contexts' to be an array"),
        (cbor2.dumps({"contexts": [{"id": "x"}]}), pva.NotAReportError, "integer 'id'"),
        (cbor2.dumps({"contexts": [{"id": 1, "parentIds": [2]}]}), pva.InconsistentReportError, "names parent"),
        (cbor2.dumps({"contexts": [{"id": 1}, {"id": 1}]}), pva.InconsistentReportError, "appears twice"),
        (
            cbor2.dumps({"contexts": [{"id": 1, "parentIds": [2]}, {"id": 2, "parentIds": [1]}]}),
            pva.InconsistentReportError,
            "its own ancestor",
        ),
        (cbor2.dumps({"pva_debug_info": "2.0", "contexts": []}), pva.UnsupportedVersionError, "newer than"),
        (cbor2.dumps({"contexts": [{"id": 1, "location": {"lineNumber": "x"}}]}), pva.NotAReportError, "location"),
    ],
)
def test_reader_rejects_malformed_files(tmp_path, content, error, message):
    path = tmp_path / "debug.cbor"
    path.write_bytes(content)
    with pytest.raises(error, match=message) as info:
        DebugInfoReader(path)
    assert str(path) in str(info.value) and info.value.path == str(path)
    assert isinstance(info.value, pva.PvaError)


def test_open_report_checks_the_debug_path(model, tmp_path):
    with pytest.raises(pva.ReportNotFoundError, match="debug information file"):
        pva.openReport(model.path, str(tmp_path / "missing.cbor"))


def test_malformed_debug_file_fails_on_first_use_naming_it(model, tmp_path):
    bad = tmp_path / "debug.cbor"
    bad.write_bytes(b"\xa1\x61")
    with pva.openReport(model.path, str(bad)) as report:
        assert report.compilation.isDebugInfoPresent
        with pytest.raises(pva.CorruptReportError, match="debug.cbor"):
            report.compilation.debugContexts()
        with pytest.raises(pva.CorruptReportError):
            pva.OperationAnalysis(report).operations


# -- the object model ------------------------------------------------------------------------


def test_debug_info_presence(comp, model):
    assert comp.isDebugInfoPresent is True
    with pva.openReport(model.path) as plain:
        compilation = plain.compilation
        assert compilation.isDebugInfoPresent is False
        with pytest.raises(pva.NotPresentError, match="no debug information") as info:
            compilation.debugContexts()
        assert isinstance(info.value, RuntimeError)
        with pytest.raises(pva.NotPresentError):
            compilation.debugContext(1)
        with pytest.raises(pva.NotPresentError):
            pva.OperationAnalysis(plain)
        assert list(compilation.programs[4].debugContexts) == []


def test_debug_context_members(comp):
    ctx = comp.debugContext(2)
    assert (ctx.id, ctx.name) == (2, "MatMul")
    assert ctx.layer == "popart" and str(ctx.layer) == "popart" and f"{ctx.layer}" == "popart"
    assert json.loads(ctx.layer)["layer"] == "popart"  # what poptorch's test does
    assert {ctx.layer: 1}["popart"] == 1
    data = json.loads(ctx.json)
    assert data == {
        "layer": "popart",
        "name": "MatMul",
        "op_name": "linear/MatMul",
        "op_type": "MatMul",
        "tensorId": "t1",
        "inputs": ["x", "w"],
    }
    assert [p.id for p in ctx.parents] == [1] and [c.id for c in ctx.children] == [3]
    assert ctx.location.fileName == "model.py" and ctx.location.lineNumber == 10
    assert ctx.location.functionName == "forward" and ctx.location.isValid is True
    assert comp.debugContext(3).location.isValid is False
    assert comp.debugContext(3).location.fileName == ""
    assert ctx.fullPath == "model/linear/MatMul"
    assert comp.debugContext(13).fullPath == "model/linear/MatMul/matMul/shared"
    assert [c.id for c in comp.debugContext(3).children] == [4, 13]
    assert [p.id for p in comp.debugContext(13).parents] == [3, 7]
    assert ctx == comp.debugContext(2) and ctx is comp.debugContext(2) and hash(ctx) == hash(comp.debugContext(2))
    assert repr(ctx) == "<DebugContext 2 popart 'MatMul'>"
    assert repr(ctx.location) == "<DebugContextLocation model.py:10 in forward>"
    assert repr(comp.debugContext(3).location) == "<DebugContextLocation (none)>"
    assert pva.DebugContext.INVALID_ID == 0


def test_debug_context_lookup_errors(comp):
    with pytest.raises(pva.NoSuchObjectError, match="0 is the invalid id"):
        comp.debugContext(pva.DebugContext.INVALID_ID)
    with pytest.raises(pva.NoSuchObjectError, match="no debug context with id 99"):
        comp.debugContext(99)


def test_filters(comp):
    Filter = pva.DebugContext.Filter
    assert [c.id for c in comp.debugContexts()] == list(range(1, 14))
    assert [c.id for c in comp.debugContexts(Filter())] == list(range(1, 14))
    assert [c.id for c in comp.debugContexts(Filter("popart"))] == [2, 6, 8, 10]
    assert [c.id for c in comp.debugContexts("poplibs")] == [3, 7, 9, 12]
    assert [c.id for c in comp.debugContexts(Filter(True))] == [1, 5, 8, 9, 10, 12]
    assert [c.id for c in comp.debugContexts(Filter(False))] == list(range(1, 14))
    f = Filter("poplar")
    assert (f.layer, f.withoutParent) == ("poplar", False)
    assert (Filter(True).layer, Filter(True).withoutParent) == ("", True)
    assert [c.id for c in comp.debugContexts(Filter(comp.debugContext(4).layer))] == [4, 11, 13]
    assert Filter(layer="poplar").layer == "poplar" and Filter(withoutParent=True).withoutParent is True
    with pytest.raises(TypeError):
        Filter(3.5)
    with pytest.raises(TypeError):
        Filter(layer="poplar", withoutParent=True)
    assert repr(Filter("poplar")) == "<DebugContext.Filter layer='poplar'>"


def test_programs_and_variables_of_a_context(comp):
    call = comp.debugContext(8)
    assert [p._id for p in call.programs()] == [10, 12, 13, 30, 12, 13]
    assert [p._id for p in call.programs(inlineCalls=True)] == [10, 12, 13, 30, 12, 13]
    assert [p._id for p in call.programs(False)] == [10, 30, 12, 13]
    assert [p._id for p in comp.debugContext(1).programs()] == [4, 5]
    assert [p._id for p in comp.debugContext(12).programs()] == [1, 2, 3]
    assert list(comp.debugContext(10).programs()) == []
    assert [v.name for v in comp.debugContext(1).variables()] == ["weights", "msg"]
    assert [v.name for v in comp.debugContext(5).variables()] == ["acts", "msg"]
    assert list(comp.debugContext(8).variables()) == []


def test_program_contexts_point_back(comp):
    for program in comp.programs:
        for context in program.debugContexts:
            assert program in context.programs()


# -- pairing (issue 17 item 7) -------------------------------------------------------------------------------------


def test_a_debug_cbor_of_another_report_is_refused(tmp_path):
    import pva
    from formats.debug.debug_cbor import read_debug_id
    from simulator.presets import run_preset

    first, second = tmp_path / "a", tmp_path / "b"
    for directory, preset in ((first, "tutorial1"), (second, "tutorial3")):
        run_preset(preset, {"tiles-per-ipu": 16}, str(directory), timestamp=1_700_000_000.0)
    own = read_debug_id(first / "debug.cbor")
    assert own and own != read_debug_id(second / "debug.cbor")
    with pva.openReport(first / "profile.pop", first / "debug.cbor") as report:
        assert report.compilation.debugContexts()
    with pytest.raises(pva.PvaError) as caught:
        pva.openReport(first / "profile.pop", second / "debug.cbor")
    message = str(caught.value)
    assert str(first / "profile.pop") in message and str(second / "debug.cbor") in message
    assert "is not the debug information of" in message


@pytest.mark.parametrize(
    ("name", "module"), [("tutorial1", "tutorials"), ("gemm", "layers"), ("mnist-mlp", "networks")]
)
def test_a_presets_debug_locations_are_its_own_lines(name, module):
    # the presets are the simulator's client code: a debug context made by a poplibs function they
    # call is located at the preset's line that called it, not inside the simulator
    from simulator.presets import build_preset

    knobs = {"tiles-per-ipu": 16, "m": 64, "k": 64, "n": 64} if name == "gemm" else {}
    if name == "mnist-mlp":
        knobs = {"tiles-per-ipu": 16, "batch": 4, "hidden": 8, "steps": 1, "runs": 1}
    built = build_preset(name, knobs)
    located = [c["location"] for c in built.graph.state.debug.contexts if c["location"]]
    assert located
    assert {loc["fileName"] for loc in located} <= {f"simulator/presets/{module}.py", "simulator/presets/registry.py"}
    assert any(loc["fileName"] == f"simulator/presets/{module}.py" for loc in located)
