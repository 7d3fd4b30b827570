"""OperationAnalysis: programs grouped by the framework operation that created them."""

from __future__ import annotations

import json

import pytest
from test_compilation_builder import model  # noqa: F401  (fixture)

import pva
from formats.debug.debug_cbor import write_debug_info
from formats.pop.writer import ProfileWriter


@pytest.fixture(scope="module")
def report(model):
    with pva.openReport(model.path, model.debug_path) as opened:
        yield opened


@pytest.fixture(scope="module")
def operations(report):
    return pva.OperationAnalysis(report).operations


def test_operations_in_step_order(operations):
    got = [
        (op.debugContext.id, op.name, [p._id for p in op.programs()], op.firstStepIndex, op.lastStepIndex)
        for op in operations
    ]
    assert got == [
        (12, "stream", [1, 2, 3], 1, 3),
        (2, "linear/MatMul", [4, 5], 4, 5),
        (6, "relu/Relu", [8], 7, 7),
        (8, "Call", [10, 12, 13, 30], 9, 11),
        (9, "copy", [14], 12, 12),
        (10, "unused/Add", [], -1, -1),
    ]


def test_operation_list_is_fast_to_index(operations, report):
    analysis = pva.OperationAnalysis(report)
    assert analysis.operations is analysis.operations
    assert repr(analysis) == "<OperationAnalysis 6 operations>"
    raw = analysis.operations
    assert [raw[i].debugContext.id for i in range(len(raw))] == [op.debugContext.id for op in operations]


def test_operation_members(operations, model, report):
    call = operations[3]
    assert [c.id for c in call.replacedDebugContext] == [2, 6]
    assert call.replacedDebugContext and not operations[1].replacedDebugContext
    assert json.loads(call.debugContext.json)["op_type"] == "Call"
    matmul = operations[1]
    expected = sorted(var for program, var in model.program_vars if program in (4, 5))
    assert [v._id for v in matmul.vars] == expected
    relu = operations[2]
    assert [v._id for v in relu.vars] == sorted(var for cs, var in model.compute_set_vars if cs == 1)
    assert [v._id for v in call.vars] == [var for program, var in model.program_vars if program == 13]
    assert list(operations[5].vars) == []
    assert repr(matmul) == "<Operation 'linear/MatMul' (context 2), 2 programs, steps 4..5>"
    assert repr(operations[5]) == "<Operation 'unused/Add' (context 10), 0 programs, no liveness steps>"


def test_poptorch_style_walk_to_the_framework_layer(operations):
    """The walk poptorch's test_pva_annotations does, up the parents to the poptorch layer."""

    def find_poptorch_layer(ctx):
        layer = json.loads(ctx.layer)["layer"]
        if layer == "poptorch":
            return ctx
        assert ctx.parents, "Can't find 'poptorch' layer"
        return find_poptorch_layer(ctx.parents[0])

    seen = []
    for op in operations:
        if not op.name or op.name == "Call":
            continue
        ctx = op.replacedDebugContext[0] if op.replacedDebugContext else op.debugContext
        if json.loads(ctx.layer)["layer"] == "poplibs":
            continue
        if not ctx.parents:
            continue
        pop_op = find_poptorch_layer(ctx)
        data = json.loads(pop_op.json)
        assert op.name == data["op_name"]
        seen.append((op.name, pop_op.location.fileName, pop_op.location.lineNumber))
    assert seen == [("linear/MatMul", "model.py", 10), ("relu/Relu", "model.py", 12)]


def test_popliner_style_use(operations):
    """popliner builds unique operations by debug context id and reads programs, steps and vars."""
    unique = {}
    for i in range(len(operations)):
        uid = operations[i].debugContext.id
        if uid not in unique:
            progs = operations[i].programs()
            unique[uid] = (len(progs), {p._id for p in progs})
            if progs:
                assert operations[i].firstStepIndex <= operations[i].lastStepIndex
                assert json.loads(operations[i].debugContext.json)["layer"]
    assert sum(1 for n, _ in unique.values() if n > 0) == 5


def test_without_liveness_steps_operations_still_have_programs(tmp_path):
    path, debug = tmp_path / "profile.pop", tmp_path / "debug.cbor"
    with ProfileWriter(path) as w:
        w.set_target(num_ipus=1, tiles_per_ipu=2, bytes_per_tile=1024)
        w.insert("programs", ("id", "type", "name"), [(0, "Sequence", ""), (1, "Sync", ""), (2, "Sync", "")])
        w.insert("program_children", ("parent", "position", "child"), [(0, 0, 1), (0, 1, 2)])
        w.insert("control_programs", ("position", "program"), [(0, 0)])
        w.insert(
            "debug_context_refs",
            ("kind", "object", "debug_context"),
            [("program", 2, 2), ("program", 1, 3), ("program", 2, 77)],
        )
    write_debug_info(
        debug,
        [
            {"id": 1, "layer": "tensorflow", "name": "dense"},
            {"id": 2, "layer": "poplibs", "name": "sync", "parents": [1]},
            {"id": 3, "layer": "poplibs", "name": "lonely"},
        ],
    )
    with pva.openReport(path, debug) as report:
        ops = pva.OperationAnalysis(report).operations
        assert [(op.name, [p._id for p in op.programs()], op.firstStepIndex) for op in ops] == [
            ("dense", [2], -1),
            ("lonely", [1], -1),
        ]
        assert repr(pva.OperationAnalysis(report)) == "<OperationAnalysis not analysed yet>"
