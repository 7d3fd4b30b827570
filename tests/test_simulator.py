"""The simulator's graph API, compiler, engine and reports on small hand-built graphs."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from simulator_invariants import check_report

import pva
from formats.pop.reader import ProfileReader
from simulator import (
    FLOAT,
    INT,
    Call,
    Copy,
    Engine,
    Execute,
    Graph,
    If,
    Input,
    IPUModel,
    Output,
    PrintTensor,
    Repeat,
    RepeatWhileTrue,
    Sequence,
    Switch,
    Sync,
    Target,
    Vertex,
    WriteUndef,
)
from simulator.compiler.memory import CATEGORIES
from simulator.errors import ExecutionError, GraphError, OptionError
from simulator.options import parse_environment, resolve
from simulator.poplibs import popops
from simulator.target import ARCHITECTURES

TS = "2024-01-01T00:00:00Z"


def small_target(tiles: int = 8, ipus: int = 1, arch: str = "ipu2", replicas: int = 1) -> Target:
    return Target(arch, num_ipus=ipus, tiles_per_ipu=tiles, replication_factor=replicas)


def report_options(directory, **extra) -> dict:
    options = {"autoReport.all": "true", "autoReport.directory": str(directory)}
    options.update(extra)
    return options


class Writer(Vertex):
    fields = {"y": Output(FLOAT, vector=True)}

    def compute(self, f):
        f["y"][:] = 1.0
        return True


class Doubler(Vertex):
    fields = {"x": Input(FLOAT, vector=True), "y": Output(FLOAT, vector=True)}

    def compute(self, f):
        f["y"][:] = 2 * f["x"]
        return True


# -- targets ------------------------------------------------------------------------------------


def test_architectures_have_the_published_figures():
    expected = {"Ipu1": (1216, 262_144, 1.6e9), "Ipu2": (1472, 638_976, 1.33e9), "Ipu21": (1472, 638_976, 1.85e9)}
    for name, (tiles, size, clock) in expected.items():
        arch = ARCHITECTURES[name]
        assert (arch.tiles_per_ipu, arch.bytes_per_tile, arch.clock_frequency) == (tiles, size, clock)
        assert Target(name.lower()).numTiles == tiles


def test_two_ipu_mk2_target_sizes(tmp_path):
    target = Target("ipu2", num_ipus=2)
    assert target.bytesPerIPU == 940_572_672
    assert target.totalMemory == 1_881_145_344
    assert target.numTiles == 2944
    g = Graph(target)
    v = g.addVariable(FLOAT, [16], "v")
    g.setTileMapping(v, 0)
    with Engine(g, Sequence(WriteUndef(v)), report_options(tmp_path), timestamp=TS) as e:
        e.run(0)
    report = pva.openReport(str(tmp_path / "profile.pop"))
    t = report.compilation.target
    assert (t.bytesPerIPU, t.totalMemory, t.numIPUs, t.tilesPerIpu) == (940_572_672, 1_881_145_344, 2, 1472)
    report.close()


def test_shrunk_ipu_model():
    model = IPUModel("ipu1")
    model.tilesPerIPU = 4
    target = model.createDevice().getTarget()
    assert (target.architecture, target.numTiles, target.bytesPerTile) == ("Ipu1", 4, 262_144)
    with pytest.raises(GraphError, match="tiles_per_ipu must be between 1 and 1216"):
        Target("ipu1", tiles_per_ipu=2000)


# -- tensors ------------------------------------------------------------------------------------


def test_tensor_views_keep_element_order():
    g = Graph(small_target())
    v = g.addVariable(FLOAT, [3, 4], "v")
    t = v.transpose()
    var, idx = t.element_arrays()
    assert idx.reshape(4, 3).tolist() == np.arange(12).reshape(3, 4).T.tolist()
    s = v.slice([1, 1], [3, 3])
    assert s.shape == (2, 2)
    assert s.element_arrays()[1].tolist() == [5, 6, 9, 10]
    assert v[2].element_arrays()[1].tolist() == [8, 9, 10, 11]
    with pytest.raises(GraphError, match="out of range"):
        v.slice(0, 5, 0)


# -- functional execution -----------------------------------------------------------------------


def test_copies_streams_and_host_handles(tmp_path):
    g = Graph(small_target())
    a = g.addVariable(INT, [6], "a")
    b = g.addVariable(INT, [6], "b")
    g.setTileMapping(a, 0)
    for i in range(6):
        g.setTileMapping(b[i], i)
    g.createHostRead("b", b)
    stream = g.addHostToDeviceFIFO("in", INT, 6)
    out = g.addDeviceToHostFIFO("out", INT, 6)
    prog = Sequence(Copy(stream, a), Copy(a, b), Copy(b, out), PrintTensor("b", b))
    host_out = np.zeros(6, dtype=np.int32)
    with Engine(g, prog, report_options(tmp_path), timestamp=TS) as e:
        e.connectStream("in", np.arange(12))
        e.connectStream("out", host_out)
        e.run(0)
        assert e.readTensor("b").tolist() == [0, 1, 2, 3, 4, 5]
        e.run(0)
        assert e.readTensor("b").tolist() == [6, 7, 8, 9, 10, 11]
        assert host_out.tolist() == [6, 7, 8, 9, 10, 11]
        assert e.printed == ["b: {0,1,2,3,4,5}", "b: {6,7,8,9,10,11}"]
    assert check_report(tmp_path / "profile.pop") == []


def test_control_flow_runs_on_data(tmp_path):
    g = Graph(small_target())
    g.addCodelets(Doubler)
    popops.addCodelets(g)
    x = g.addVariable(FLOAT, [4], "x")
    g.setTileMapping(x, 1)
    n = g.addVariable(INT, [1], "n")
    g.setTileMapping(n, 0)
    flag = g.addVariable(INT, [1], "flag")
    g.setTileMapping(flag, 0)
    one = g.addConstant(INT, [1], [1], "one")
    g.setTileMapping(one, 0)
    limit = g.addConstant(INT, [1], [5], "limit")
    g.setTileMapping(limit, 0)
    cs = g.addComputeSet("double")
    vtx = g.addVertex(cs, "Doubler", {"x": x, "y": x})
    g.setTileMapping(vtx, 1)
    g.createHostWrite("x", x)
    g.createHostRead("x", x)
    g.createHostRead("n", n)
    # count up to 5 with RepeatWhileTrue, doubling x each time; If and Switch pick branches
    cond = Sequence()
    less = popops._binary(g, "SUBTRACT", limit, n, cond, "remaining")
    cond.add(Copy(less, flag))
    body = Sequence(Execute(cs))
    popops.addInPlace(g, n, one, body, "increment")
    twice = g.addFunction(Sequence(Execute(cs)), "twice")
    prog = Sequence(
        RepeatWhileTrue(cond, flag, body),
        If(flag, Execute(cs), Call(twice)),
        Switch(n, [(5, Call(twice)), (6, Execute(cs))]),
    )
    with Engine(g, prog, report_options(tmp_path), timestamp=TS) as e:
        e.writeTensor("x", np.ones(4))
        e.run(0)
        assert e.readTensor("n").tolist() == [5]
        # 5 iterations, If takes the else branch (flag 0): twice, the switch on 5: twice again
        assert e.readTensor("x").tolist() == [2.0**7] * 4
    types = ProfileReader(tmp_path / "profile.pop").column("SELECT DISTINCT type FROM programs")
    for kind in (
        "RepeatWhile",
        "IfElse",
        "SetLocalConsensusFromVar",
        "OnEveryTileSwitch",
        "Call",
        "DoExchange",
        "OnTileExecute",
        "Sync",
        "StreamCopyMid",
    ):
        assert kind in types
    assert check_report(tmp_path / "profile.pop") == []


def test_sync_program_and_repeat_counts(tmp_path):
    g = Graph(small_target(ipus=2, tiles=4))
    v = g.addVariable(FLOAT, [8], "v")
    g.setTileMapping(v.slice(0, 4), 0)
    g.setTileMapping(v.slice(4, 8), 5)
    w = g.addVariable(FLOAT, [8], "w")
    g.setTileMapping(w, 6)
    prog = Repeat(3, Sequence(Sync("global"), Copy(v, w)))
    with Engine(g, prog, report_options(tmp_path), timestamp=TS) as e:
        e.run(0)
    r = ProfileReader(tmp_path / "profile.pop")
    assert r.query_one("SELECT repeat_count FROM programs WHERE type = 'Repeat'")[0] == 3
    assert r.query_one("SELECT count(*) FROM steps WHERE type = 'GlobalExchange' AND name LIKE 'copy%'")[0] == 3
    assert "GS1" in r.column("SELECT sync_type FROM programs WHERE type = 'Sync'")
    # the global exchange moved v's first half from IPU 0 to tile 6 on IPU 1
    row = r.query_one(
        "SELECT row FROM program_vectors v JOIN programs p ON p.id = v.program "
        "WHERE p.type = 'GlobalExchange' AND p.name LIKE 'copy%' AND v.kind = 'bytes_received'"
    )[0]
    received = r.matrix("program_bytes_received_by_tile").row(row)
    assert int(received[6]) == 16 and int(received.sum()) == 16
    assert check_report(tmp_path / "profile.pop") == []


# -- the compiler's figures ---------------------------------------------------------------------


def test_compute_set_cycles_follow_six_threads(tmp_path):
    g = Graph(small_target())
    g.addCodelets(Doubler)
    x = g.addVariable(FLOAT, [14], "x")
    g.setTileMapping(x, 0)
    cs = g.addComputeSet("seven")
    for i in range(7):
        v = g.addVertex(cs, "Doubler", {"x": x.slice(2 * i, 2 * i + 2), "y": x.slice(2 * i, 2 * i + 2)})
        g.setTileMapping(v, 0)
        g.setCycleEstimate(v, 10 + i)
    with Engine(g, Execute(cs), report_options(tmp_path), timestamp=TS) as e:
        e.run(0)
    r = ProfileReader(tmp_path / "profile.pop")
    est_row, act_row = r.query_one(
        "SELECT estimated_cycles_row, active_cycles_row FROM compute_sets WHERE name = 'seven'"
    )
    # rounds of six, longest first: (16, 15, ..., 11) then (10): 6 * (16 + 10) tile cycles
    assert int(r.matrix("compute_set_estimated_cycles_by_tile").row(est_row)[0]) == 6 * (16 + 10)
    assert int(r.matrix("compute_set_active_cycles_by_tile").row(act_row)[0]) == sum(range(10, 17))


def test_exchange_bytes_and_message_buffers(tmp_path):
    g = Graph(small_target())
    g.addCodelets(Doubler)
    x = g.addVariable(FLOAT, [8], "x")
    y = g.addVariable(FLOAT, [8], "y")
    g.setTileMapping(x, 0)
    g.setTileMapping(y, 3)
    cs = g.addComputeSet("remote")
    v = g.addVertex(cs, "Doubler", {"x": x, "y": y})
    g.setTileMapping(v, 3)
    with Engine(g, Execute(cs), report_options(tmp_path), timestamp=TS) as e:
        e.run(0)
    r = ProfileReader(tmp_path / "profile.pop")
    (prog,) = r.column("SELECT id FROM programs WHERE name = 'remote/ExchangePre'")
    vectors = dict(r.query("SELECT kind, row FROM program_vectors WHERE program = ?", (prog,)))
    assert int(r.matrix("program_bytes_received_by_tile").row(vectors["bytes_received"])[3]) == 32
    assert int(r.matrix("program_bytes_sent_by_tile").row(vectors["bytes_sent"])[0]) == 32
    # the exchange lands in a message buffer on tile 3
    msg = r.query_one(
        "SELECT v.size_bytes FROM vars_info v JOIN var_categories c ON c.id = v.category "
        "WHERE c.name = 'message' AND v.tile = 3"
    )
    assert msg == (32,)
    assert r.column("SELECT name FROM var_categories ORDER BY id") == list(CATEGORIES)
    assert list(CATEGORIES) == list(pva.compilation.CATEGORIES)


def test_overflow_is_reported_and_can_be_refused(tmp_path):
    g = Graph(small_target(tiles=2, arch="ipu1"))
    big = g.addVariable(FLOAT, [80_000], "big")
    g.setTileMapping(big, 0)
    with Engine(g, WriteUndef(big), report_options(tmp_path), timestamp=TS) as e:
        e.run(0)
    r = ProfileReader(tmp_path / "profile.pop")
    over, total = r.query_one("SELECT overflowed, total_including_gaps FROM memory_by_tile WHERE tile = 0")
    assert over > 0 and total > 262_144
    assert check_report(tmp_path / "profile.pop") == []
    with pytest.raises(GraphError, match="out of memory: 1 tile"):
        Engine(g, WriteUndef(big), {"debug.allowOutOfMemory": "false"})


def _liveness_of(path, var_name):
    """The liveness step programs' names where the variable is live."""
    r = ProfileReader(path)
    cls = r.query_one("SELECT equivalence_class FROM vars_info WHERE name = ? LIMIT 1", (var_name,))[0]
    live = set()
    for start, end in r.query('SELECT start, "end" FROM equivalence_class_steps WHERE class = ?', (cls,)):
        live.update(range(start, end))
    names = dict(r.query("SELECT l.id, p.name FROM liveness_steps l JOIN programs p ON p.id = l.program"))
    return {names[s] for s in live if names.get(s)}


def _writer_cs(g, name, target, width, read=False):
    cs = g.addComputeSet(name)
    if read:
        v = g.addVertex(cs, "Doubler", {"x": target.slice(0, width), "y": target.slice(0, width)})
    else:
        v = g.addVertex(cs, "Writer", {"y": target.slice(0, width)})
    g.setTileMapping(v, 0)
    return cs


@pytest.mark.parametrize("second_writes_all, expect_live", [(True, False), (False, True)])
def test_a_variable_dies_only_when_one_compute_set_writes_all_of_it(tmp_path, second_writes_all, expect_live):
    g = Graph(small_target())
    g.addCodelets([Doubler, Writer])
    a = g.addVariable(FLOAT, [2], "a")
    other = g.addVariable(FLOAT, [2], "other")
    g.setTileMapping(a, 0)
    g.setTileMapping(other, 0)
    first = _writer_cs(g, "first", a, 2)
    middle = _writer_cs(g, "middle", other, 2)
    second = _writer_cs(g, "second", a, 2 if second_writes_all else 1)
    reader = _writer_cs(g, "reader", a, 2, read=True)
    with Engine(
        g,
        Sequence(Execute(first), Execute(middle), Execute(second), Execute(reader)),
        report_options(tmp_path),
        timestamp=TS,
    ) as e:
        e.run(0)
    live = _liveness_of(tmp_path / "profile.pop", "a")
    assert {"first", "second", "reader"} <= live and "programId" not in live
    assert ("middle" in live) is expect_live


@pytest.mark.parametrize("undef", [True, False])
def test_write_undef_kills_a_variable(tmp_path, undef):
    g = Graph(small_target())
    g.addCodelets([Doubler, Writer])
    a = g.addVariable(FLOAT, [2], "a")
    other = g.addVariable(FLOAT, [2], "other")
    g.setTileMapping(a, 0)
    g.setTileMapping(other, 0)
    prog = Sequence(
        Execute(_writer_cs(g, "write", a, 2)),
        Execute(_writer_cs(g, "use", a, 2, read=True)),
        Execute(_writer_cs(g, "middle", other, 2)),
    )
    if undef:
        prog.add(WriteUndef(a))
    prog.add(Execute(_writer_cs(g, "partial", a, 1)))
    prog.add(Execute(_writer_cs(g, "read", a, 2, read=True)))
    with Engine(g, prog, report_options(tmp_path), timestamp=TS) as e:
        e.run(0)
    live = _liveness_of(tmp_path / "profile.pop", "a")
    assert {"write", "use", "partial", "read"} <= live
    assert ("middle" in live) is (not undef)


# -- bad input ----------------------------------------------------------------------------------


def _no_outputs(directory) -> bool:
    return not os.path.exists(directory) or not os.listdir(directory)


def test_unconnected_field_is_named(tmp_path):
    g = Graph(small_target())
    g.addCodelets(Doubler)
    x = g.addVariable(FLOAT, [2], "x")
    g.setTileMapping(x, 0)
    cs = g.addComputeSet("half-connected")
    v = g.addVertex(cs, "Doubler", {"x": x})
    g.setTileMapping(v, 2)
    with pytest.raises(GraphError, match=r"field 'y' of vertex 0 \(Doubler, tile 2\) is not connected") as info:
        Engine(g, Execute(cs), report_options(tmp_path / "out"))
    assert isinstance(info.value, pva.PvaError) and isinstance(info.value, ValueError)
    assert "half-connected" in str(info.value)
    assert _no_outputs(tmp_path / "out")


def test_a_bare_program_is_refused_by_name(tmp_path):
    # the base class of the control programs runs nothing: compiling it is the caller's error
    from simulator.programs import Program

    with pytest.raises(GraphError, match="a Program is not a control program the engine can run"):
        Engine(Graph(small_target()), Sequence(Program()), report_options(tmp_path / "out"))
    assert _no_outputs(tmp_path / "out")


def test_unmapped_tensor_is_named(tmp_path):
    g = Graph(small_target())
    x = g.addVariable(FLOAT, [10], "weights")
    g.setTileMapping(x.slice(0, 6), 1)
    with pytest.raises(
        GraphError, match=r"variable 'weights' .* has 4 element\(s\) without a tile mapping \(elements 6..9\)"
    ):
        Engine(g, WriteUndef(x), report_options(tmp_path / "out"))
    assert _no_outputs(tmp_path / "out")


def test_cycle_in_function_calls_is_named(tmp_path):
    g = Graph(small_target())
    inner = Sequence()
    f = g.addFunction(inner, "f")
    h = g.addFunction(Sequence(Call(f)), "h")
    inner.add(Call(h))
    with pytest.raises(GraphError, match="function calls form a cycle: 'f' -> 'h' -> 'f'"):
        Engine(g, Call(f), report_options(tmp_path / "out"))
    assert _no_outputs(tmp_path / "out")


def test_stream_never_connected_is_named(tmp_path):
    g = Graph(small_target())
    x = g.addVariable(INT, [3], "x")
    g.setTileMapping(x, 0)
    s = g.addHostToDeviceFIFO("feed", INT, 3)
    e = Engine(g, Copy(s, x), report_options(tmp_path / "out"))
    with pytest.raises(
        ExecutionError,
        match=r"stream 'feed' \(HostToDevice, 3 x int\) is used by program 0 but was "
        r"never connected",
    ):
        e.run(0)
    e.abort()
    assert _no_outputs(tmp_path / "out")


def test_unknown_option_is_named(tmp_path):
    g = Graph(small_target())
    x = g.addVariable(INT, [3], "x")
    g.setTileMapping(x, 0)
    with pytest.raises(
        OptionError, match=r"unknown engine option 'debug.instrumnt' .* did you mean 'debug.instrument'"
    ):
        Engine(g, WriteUndef(x), {"debug.instrumnt": "true", "autoReport.directory": str(tmp_path / "out")})
    with pytest.raises(OptionError, match="expects one of tile, vertex, device, ipu"):
        resolve({"debug.computeInstrumentationLevel": "cycle"})
    assert _no_outputs(tmp_path / "out")


# -- options and instrumentation ----------------------------------------------------------------


def test_poplar_engine_options_environment_variable():
    env = {
        "POPLAR_ENGINE_OPTIONS": json.dumps(
            {
                "debug.instrument": "true",
                "debug.computeInstrumentationLevel": "vertex",
                "autoReport.directory": "envdir",
            }
        )
    }
    options = resolve({"debug.computeInstrumentationLevel": "device", "autoReport.directory": "given"}, env)
    assert (options.compute, options.external_exchange, options.directory) == ("Vertex", "Tile", "envdir")
    assert parse_environment({"POPLAR_ENGINE_OPTIONS": ""}) == {}
    with pytest.raises(OptionError, match="POPLAR_ENGINE_OPTIONS must be a JSON object"):
        parse_environment({"POPLAR_ENGINE_OPTIONS": "{debug.instrument: true"})
    with pytest.raises(OptionError, match="unknown engine option 'debug.foo' in POPLAR_ENGINE_OPTIONS"):
        parse_environment({"POPLAR_ENGINE_OPTIONS": '{"debug.foo": "1"}'})
    all_on = resolve({"autoReport.all": "true"}, {})
    assert (all_on.compute, all_on.graph_profile, all_on.execution_profile, all_on.debug_info) == (
        "Tile",
        True,
        True,
        True,
    )
    off = resolve({"autoReport.all": "true", "debug.instrumentCompute": "false"}, {})
    assert off.compute == "Off" and off.external_exchange == "Tile"


def _vertex_graph():
    g = Graph(small_target(tiles=4, ipus=2))
    g.addCodelets(Doubler)
    x = g.addVariable(FLOAT, [8], "x")
    cs = g.addComputeSet("work")
    for i in range(8):
        g.setTileMapping(x[i], i)
        v = g.addVertex(cs, "Doubler", {"x": x.slice(i, i + 1), "y": x.slice(i, i + 1)})
        g.setTileMapping(v, i)
        g.setCycleEstimate(v, 10 * (i + 1))
    return g, cs


@pytest.mark.parametrize("level", ["tile", "vertex", "device", "ipu"])
def test_instrumentation_levels(tmp_path, level, monkeypatch):
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", json.dumps({"debug.computeInstrumentationLevel": level}))
    g, cs = _vertex_graph()
    with Engine(g, Execute(cs), report_options(tmp_path), timestamp=TS) as e:
        e.run(0)
    r = ProfileReader(tmp_path / "profile.pop")
    assert r.metadata["instrumentation_compute"] == level.capitalize()
    (step,) = r.column("SELECT id FROM steps WHERE type = 'OnTileExecute'")
    row = r.matrix("step_cycles_by_tile").row(step).astype(int).tolist()
    if level in ("tile", "vertex"):
        assert row == [60 * (i + 1) for i in range(8)]
    elif level == "device":
        assert row == [480] + [0] * 7
        assert r.query_one("SELECT count(*) FROM steps WHERE type = 'Sync' AND program IS NULL")[0] >= 2
    else:
        assert row == [240, 0, 0, 0, 480, 0, 0, 0]
    vertex_rows = r.query("SELECT count, cycles FROM step_vertex_cycles")
    assert vertex_rows == ([(8, 360)] if level == "vertex" else [])
    assert check_report(tmp_path / "profile.pop") == []


def test_replica_to_profile(tmp_path):
    g = Graph(small_target(tiles=4, ipus=2, replicas=2))
    g.addCodelets(Doubler)
    x = g.addVariable(FLOAT, [4], "x")
    cs = g.addComputeSet("work")
    for i in range(4):
        g.setTileMapping(x[i], i)
        g.setTileMapping(g.addVertex(cs, "Doubler", {"x": x.slice(i, i + 1), "y": x.slice(i, i + 1)}), i)
    with Engine(g, Execute(cs), report_options(tmp_path, **{"profiler.replicaToProfile": "1"}), timestamp=TS) as e:
        e.run(0)
    r = ProfileReader(tmp_path / "profile.pop")
    assert (r.target["num_replicas"], r.target["tiles_per_replica"], r.target["num_tiles"]) == (2, 4, 8)
    assert r.query("SELECT DISTINCT ipu, profiled FROM steps_by_ipu ORDER BY ipu") == [(0, 0), (1, 1)]
    (step,) = r.column("SELECT id FROM steps WHERE type = 'OnTileExecute'")
    row = r.matrix("step_cycles_by_tile").row(step)
    assert row[:4].sum() == 0 and row[4:].sum() > 0
    assert r.column("SELECT ipu FROM run_cycles_by_ipu") == [1]
    assert check_report(tmp_path / "profile.pop") == []


# -- output files -------------------------------------------------------------------------------


def test_auto_report_directory_layout(tmp_path):
    g, cs = _vertex_graph()
    directory = tmp_path / "reports"
    with Engine(g, Execute(cs), report_options(directory), timestamp=TS) as e:
        e.load()
        e.run(0)
        e.run(0)
    files = sorted(os.listdir(directory), key=lambda f: f.endswith(".pvti"))
    assert files[:2] == ["debug.cbor", "profile.pop"] and len(files) == 3 and files[2].endswith(".pvti")
    report = pva.openReport(str(directory / "profile.pop"), str(directory / "debug.cbor"))
    assert report.poplarVersion.string == "3.1.0 (simulator)"
    assert len(report.execution.runs) == 2
    report.close()
    r = ProfileReader(directory / "profile.pop")
    assert r.metadata["created"] == r.metadata["compilation_timestamp"] == "2024-01-01T00:00:00Z"
    refs = r.query_one("SELECT count(DISTINCT kind) FROM debug_context_refs")[0]
    assert refs == 3
    from formats.debug.debug_cbor import DebugInfoReader

    contexts = list(DebugInfoReader(directory / "debug.cbor").records.values())
    names = {c.name for c in contexts}
    assert {"work", "x", "controlProgram"} <= names
    located = [c for c in contexts if c.name == "x"][0]
    assert located.location[0] == "tests/test_simulator.py"
    trace = pva.openTrace(str(directory / files[2]))
    labels = [e.label for p in trace.processes for t in p.threads for e in t.events]
    assert labels[:1] == ["compile"] and "engine load" in labels and labels.count("run 0") == 2


def test_run_count_option_limits_recorded_runs(tmp_path):
    g, cs = _vertex_graph()
    with Engine(
        g, Execute(cs), report_options(tmp_path, **{"autoReport.executionProfileProgramRunCount": "1"}), timestamp=TS
    ) as e:
        for _ in range(3):
            e.run(0)
    assert ProfileReader(tmp_path / "profile.pop").query_one("SELECT count(*) FROM runs")[0] == 1


def test_compile_only_report(tmp_path):
    g, cs = _vertex_graph()
    Engine(
        g, Execute(cs), {"autoReport.outputGraphProfile": "true", "autoReport.directory": str(tmp_path)}, timestamp=TS
    ).close()
    r = ProfileReader(tmp_path / "profile.pop")
    assert r.query_one("SELECT count(*) FROM steps")[0] == 0
    assert r.query_one("SELECT count(*) FROM liveness_steps")[0] > 0
    assert sorted(os.listdir(tmp_path))[0] != "debug.cbor"


# -- other targets and features -----------------------------------------------------------------


def test_cpu_target_runs_on_one_tile(tmp_path):
    from simulator import cpu_device

    target = cpu_device().getTarget()
    assert (target.type, target.numTiles) == ("Cpu", 1)
    g = Graph(target)
    popops.addCodelets(g)
    a = g.addConstant(FLOAT, [3], [1, 2, 3], "a")
    g.setTileMapping(a, 0)
    prog = Sequence()
    b = popops.add(g, a, a, prog, "double")
    prog.add(PrintTensor("b", b))
    with Engine(g, prog, report_options(tmp_path), timestamp=TS) as e:
        e.run(0)
    assert e.printed == ["b: {2,4,6}"]
    assert ProfileReader(tmp_path / "profile.pop").target["type"] == "Cpu"


def test_remote_buffer_round_trip(tmp_path):
    g = Graph(small_target())
    x = g.addVariable(FLOAT, [4], "x")
    y = g.addVariable(FLOAT, [4], "y")
    g.setTileMapping(x, 1)
    g.setTileMapping(y, 2)
    c = g.addConstant(FLOAT, [4], [1, 2, 3, 4], "c")
    g.setTileMapping(c, 1)
    buffer = g.addRemoteBuffer("store", FLOAT, 4, repeats=2)
    prog = Sequence(Copy(c, x), Copy(x, buffer, offset=1), Copy(buffer, y, offset=1), PrintTensor("y", y))
    with Engine(g, prog, report_options(tmp_path), timestamp=TS) as e:
        e.run(0)
    assert e.printed == ["y: {1,2,3,4}"]
    r = ProfileReader(tmp_path / "profile.pop")
    assert "RemoteBuffer" in r.column("SELECT stream_copy_type FROM programs WHERE type = 'StreamCopyMid'")
    with pytest.raises(GraphError, match="remote buffer 'store' has 2 rows; row 5 does not exist"):
        Engine(g, Copy(x, buffer, offset=5))


def test_virtual_graphs_and_replication(tmp_path):
    g = Graph(small_target(tiles=4, ipus=2), replication_factor=2)
    assert (g.num_tiles, g.replication_factor) == (4, 2)
    popops.addCodelets(g)
    upper = g.createVirtualGraph(2, 4)
    x = upper.addVariable(FLOAT, [6], "x")
    from simulator.poplibs.poputil import mapTensorLinearly

    mapTensorLinearly(upper, x)
    assert {t for t, intervals in enumerate(g.getTileMapping(x)) if intervals} == {2, 3}
    prog = Sequence()
    popops.addInPlace(upper, x, x, prog, "twice")
    with Engine(g, prog, report_options(tmp_path), timestamp=TS) as e:
        e.run(0)
    r = ProfileReader(tmp_path / "profile.pop")
    assert (r.target["num_replicas"], r.target["num_tiles"], r.target["tiles_per_replica"]) == (2, 8, 4)
    (step,) = r.column("SELECT id FROM steps WHERE type = 'OnTileExecute'")
    row = r.matrix("step_cycles_by_tile").row(step)
    assert row[[2, 3, 6, 7]].all() and not row[[0, 1, 4, 5]].any()
    assert check_report(tmp_path / "profile.pop") == []


def test_progress_bar_draws_only_when_enabled():
    import io

    from formats.progress import Progress

    stream = io.StringIO()
    bar = Progress(stream, enabled=True, interval=0, unit="steps")
    bar.start("running", 4)
    bar.advance(4)
    assert "running" in stream.getvalue() and "4/4 steps" in stream.getvalue()
    bar.finish()
    quiet = io.StringIO()
    Progress(stream=quiet).start("x", 1)
    assert quiet.getvalue() == ""


def test_pva_objects_read_a_simulated_report(tmp_path):
    g, cs = _vertex_graph()
    with Engine(g, Execute(cs), report_options(tmp_path), timestamp=TS) as e:
        e.run(0)
    report = pva.openReport(str(tmp_path / "profile.pop"), str(tmp_path / "debug.cbor"))
    c = report.compilation
    assert c.target.numTiles == 8 and c.graph.numComputeSets == 1
    assert [ci.name for ci in c.computeSets] == ["work"]
    ote = [p for p in c.programs if p.type == pva.Program.Type.OnTileExecute]
    assert len(ote) == 1
    step = [s for s in report.execution.steps if s.program == ote[0]][0]
    assert list(step.cyclesByTile) == [60 * (i + 1) for i in range(8)]
    assert sum(i.cycles for i in step.ipus) == sum(60 * (i + 1) for i in range(8))
    assert max(s.notAlwaysLiveMemory.bytes for s in c.livenessProgramSteps) >= 0
    report.close()
