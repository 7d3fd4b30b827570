"""The conv preset runs what poplibs' single_conv_layer tool runs (tools/single_conv_layer.cpp,
sdk-release-2.0): the forward convolution is a graph function (graphfn::TensorFunction) whose
calls copy their arguments in and the output out; the backward pass of a convolution that is its
own backward pass calls that function on the transposed and flipped weights (the tool's
--enable-convolution-reuse, on by default)."""

from __future__ import annotations

import numpy as np
import pytest
from simulator_run import codelet_graph, correlate, run_functional

import pva
from simulator import FLOAT, Sequence
from simulator import programs as P
from simulator.errors import GraphError
from simulator.poplibs import graphfn, poplin
from simulator.presets import build_preset, run_preset

TS = "2024-01-01T00:00:00Z"

SYMMETRIC = {"batch-size": 2, "input-channels": 8, "output-channels": 8, "field": "6,6", "kernel-size": "3"}
SYMMETRIC_1X1 = {**SYMMETRIC, "kernel-size": "1", "padding": "0"}
WIDER = {**SYMMETRIC, "output-channels": 16}


def _calls(program) -> list:
    """The functions the Call programs under `program` run, in program order."""
    if isinstance(program, P.Call):
        return [program.function]
    return [f for child in program.children() for f in _calls(child)]


def _step_names(directory) -> list[list[str]]:
    """The names of the programs of each run's steps."""
    report = pva.openReport(str(directory / "profile.pop"))
    return [[s.program.name for s in run.steps] for run in report.execution.runs]


def test_the_function_computes_the_convolution_of_each_calls_arguments(tmp_path):
    params = poplin.ConvParams(2, 4, 4, (5, 5), (3, 3), (1, 1), (1, 1), FLOAT)
    g = codelet_graph(16)
    tensors = {
        "x": poplin.createInput(g, params, "x"),
        "w": poplin.createWeights(g, params, "w"),
        "x2": poplin.createInput(g, params, "x2"),
        "w2": poplin.createWeights(g, params, "w2"),
    }
    fn = graphfn.TensorFunction(
        g,
        {"in": tensors["x"], "weights": tensors["w"]},
        lambda args, body: poplin.convolution(g, args[0], args[1], params, body, "Fwd"),
        "Fwd",
    )
    prog = Sequence()
    y = fn([tensors["x"], tensors["w"]], prog, "y")
    y2 = fn([tensors["x2"], tensors["w2"]], prog, "y2")
    for name, t in tensors.items():
        g.createHostWrite(name, t)
    g.createHostRead("y", y)
    g.createHostRead("y2", y2)
    rng = np.random.default_rng(5)
    values = {name: rng.standard_normal(tuple(t.shape)).astype(np.float32) for name, t in tensors.items()}
    out = run_functional(g, [prog], tmp_path, values, ["y", "y2"])
    # the second call's output is a tensor of its own: the first call's is not overwritten
    np.testing.assert_allclose(out["y"], correlate(values["x"], values["w"], padding=(1, 1)), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["y2"], correlate(values["x2"], values["w2"], padding=(1, 1)), rtol=1e-4, atol=1e-4)
    # each call copies both arguments in, calls the one function and copies the output out
    kinds = [type(p).__name__ for p in prog.children()]
    assert kinds == ["Copy", "Copy", "Call", "Copy"] * 2
    assert _calls(prog) == [fn.function, fn.function]
    with pytest.raises(GraphError, match="takes 2 tensors, got 1"):
        fn([tensors["x"]], prog, "y3")


@pytest.mark.parametrize(
    ("knobs", "field"),
    [
        ({**SYMMETRIC, "field": "6,5"}, (6, 5)),
        ({**SYMMETRIC, "field": "6,5", "kernel-size": "5", "padding": "2"}, (6, 5)),
        ({**SYMMETRIC, "field": "6,5", "kernel-size": "3,1", "padding": "1,0"}, (6, 5)),
    ],
)
def test_the_backward_pass_through_the_forward_function_is_the_input_gradient(tmp_path, monkeypatch, knobs, field):
    # the preset's own backward pass, run on data: the deltas convolved with the weights
    # transposed and flipped, by the forward function
    seen = {}
    flip, call = poplin.weightsTransposeChansFlipXY, graphfn.TensorFunction.__call__

    def spy_flip(g, w_in, w_out, prog, name):
        seen["weights"] = w_in
        return flip(g, w_in, w_out, prog, name)

    def spy_call(self, args, prog, name):
        out = call(self, args, prog, name)
        seen.setdefault("calls", []).append((name, args, out))
        return out

    monkeypatch.setattr(poplin, "weightsTransposeChansFlipXY", spy_flip)
    monkeypatch.setattr(graphfn.TensorFunction, "__call__", spy_call)
    built = build_preset("conv", {**knobs, "dtype": "float", "tiles-per-ipu": 16, "single-phase": "bwd"})
    (bwd,) = built.programs
    # the forward call is built but its program dropped, as the tool drops it
    assert [name for name, _, _ in seen["calls"]] == ["Fwd/nextAct", "Bwd/prevDeltas"]
    _, (deltas, _), grad = seen["calls"][1]
    w = seen["weights"]
    g = built.graph
    g.createHostWrite("w", w)
    g.createHostWrite("d", deltas)
    g.createHostRead("grad", grad)
    rng = np.random.default_rng(3)
    wv = rng.standard_normal(tuple(w.shape)).astype(np.float32)
    dv = rng.standard_normal(tuple(deltas.shape)).astype(np.float32)
    out = run_functional(g, [bwd], tmp_path, {"w": wv, "d": dv}, ["grad"])["grad"]
    kh, kw = w.shape[2:]
    expected = correlate(dv, wv.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1], padding=((kh - 1) // 2, (kw - 1) // 2))
    assert out.shape == expected.shape == (2, 8, *field)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("knobs", [SYMMETRIC, SYMMETRIC_1X1])
def test_a_convolution_that_is_its_own_backward_pass_reuses_the_forward_function(knobs):
    # 8 -> 8 channels at stride 1, a 3x3 kernel padded by 1 or a 1x1 kernel: the backward
    # convolution has the forward one's parameters, so the tool calls the forward function on the
    # transposed weights
    built = build_preset("conv", {**knobs, "tiles-per-ipu": 16})
    fwd, bwd = built.programs
    (function,) = _calls(fwd)
    assert _calls(bwd) == [function]
    # before the call, the weights transposed and flipped into a tensor of the forward plan
    before = bwd.children()[: [type(p) for p in bwd.children()].index(P.Call)]
    executed = [p.compute_set.name for p in before if isinstance(p, P.Execute)]
    assert executed == ["Bwd/WeightTranspose"]


@pytest.mark.parametrize(
    "knobs",
    [
        WIDER,  # 8 -> 16 channels: backwards, 16 -> 8
        {**SYMMETRIC, "padding-lower": "2", "padding-upper": "0"},  # the field kept, padded at one end
        {**SYMMETRIC, "field": "7,7", "stride": "2"},  # strided: the deltas are dilated backwards
    ],
)
def test_a_convolution_unlike_its_backward_pass_plans_the_backward_pass_alone(knobs):
    built = build_preset("conv", {**knobs, "tiles-per-ipu": 16})
    fwd, bwd = built.programs
    assert len(_calls(fwd)) == 1
    assert _calls(bwd) == []


@pytest.mark.parametrize(("phase", "calls"), [("fwd", 1), ("bwd", 1), ("wu", 0)])
def test_each_single_phase_builds_the_forward_function(phase, calls):
    built = build_preset("conv", {**SYMMETRIC, "tiles-per-ipu": 16, "single-phase": phase})
    (prog,) = built.programs
    assert len(_calls(prog)) == calls
    # the function's vertices are in the graph whatever the phase, as the tool builds it
    assert "Fwd/Conv_1/Convolve" in [cs.name for cs in built.graph.state.compute_sets]


def test_both_runs_execute_the_forward_functions_compute_sets(tmp_path):
    run_preset("conv", {**SYMMETRIC, "tiles-per-ipu": 16}, str(tmp_path), timestamp=TS, progress=False)
    fwd_steps, bwd_steps = _step_names(tmp_path)
    assert "Fwd/Conv_1/Convolve" in fwd_steps
    assert "Fwd/Conv_1/Convolve" in bwd_steps
    # the backward pass's copies into the function's parameters and out of its output
    assert "copy/conv/deltas->Fwd/in/OnTileCopy" in bwd_steps or "copy/conv/deltas->Fwd/in/Exchange" in bwd_steps
    assert any(n.startswith("copy/Fwd/") and "->Bwd/prevDeltas/" in n for n in bwd_steps)
