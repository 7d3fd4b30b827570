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
from simulator.poplibs import poplin
from simulator.presets import build_preset, run_preset
from simulator.presets.layers import _conv_backward_params, _ConvFunction

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
    x = poplin.createInput(g, params, "x")
    w = poplin.createWeights(g, params, "w")
    x2 = poplin.createInput(g, params, "x2")
    w2 = poplin.createWeights(g, params, "w2")
    fn = _ConvFunction(g, x, w, params, {})
    prog = Sequence()
    y = fn.call(x, w, prog, "y")
    y2 = fn.call(x2, w2, prog, "y2")
    for name, t in (("x", x), ("w", w), ("x2", x2), ("w2", w2)):
        g.createHostWrite(name, t)
    g.createHostRead("y", y)
    g.createHostRead("y2", y2)
    rng = np.random.default_rng(5)
    values = {
        name: rng.standard_normal(tuple(t.shape)).astype(np.float32)
        for name, t in (("x", x), ("w", w), ("x2", x2), ("w2", w2))
    }
    out = run_functional(g, [prog], tmp_path, values, ["y", "y2"])
    # the second call's output is a tensor of its own: the first call's is not overwritten
    np.testing.assert_allclose(out["y"], correlate(values["x"], values["w"], padding=(1, 1)), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out["y2"], correlate(values["x2"], values["w2"], padding=(1, 1)), rtol=1e-4, atol=1e-4)
    # each call copies both arguments in, calls the one function and copies the output out
    kinds = [type(p).__name__ for p in prog.children()]
    assert kinds == ["Copy", "Copy", "Call", "Copy"] * 2
    assert _calls(prog) == [fn.function, fn.function]


def test_the_forward_function_on_transposed_flipped_weights_is_the_input_gradient(tmp_path):
    # the backward pass as the tool reuses the forward function: deltas [b, o, h, w] and the
    # weights [o, c, 3, 3] transposed and flipped into a tensor of the forward plan
    params = poplin.ConvParams(2, 4, 4, (5, 5), (3, 3), (1, 1), (1, 1), FLOAT)
    assert _conv_backward_params(params) == params
    g = codelet_graph(16)
    x = poplin.createInput(g, params, "x")
    w = poplin.createWeights(g, params, "w")
    d = poplin.createInput(g, params, "d")
    fn = _ConvFunction(g, x, w, params, {})
    prog = Sequence()
    bwd_weights = poplin.createWeights(g, params, "bwdWeights")
    poplin.weightsTransposeChansFlipXY(g, w, bwd_weights, prog, "Bwd")
    grad = fn.call(d, bwd_weights, prog, "grad")
    g.createHostWrite("w", w)
    g.createHostWrite("d", d)
    g.createHostRead("grad", grad)
    rng = np.random.default_rng(7)
    wv = rng.standard_normal(tuple(w.shape)).astype(np.float32)
    dv = rng.standard_normal(tuple(d.shape)).astype(np.float32)
    out = run_functional(g, [prog], tmp_path, {"w": wv, "d": dv}, ["grad"])["grad"]
    expected = correlate(dv, wv.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1], padding=(1, 1))
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


def test_a_convolution_unlike_its_backward_pass_plans_the_backward_pass_alone():
    # 8 -> 16 channels: the backward convolution takes 16 channels to 8, another convolution
    params = poplin.ConvParams(2, 8, 16, (6, 6), (3, 3), (1, 1), (1, 1))
    assert _conv_backward_params(params) != params
    built = build_preset("conv", {**WIDER, "tiles-per-ipu": 16})
    fwd, bwd = built.programs
    assert len(_calls(fwd)) == 1
    assert _calls(bwd) == []


def test_both_runs_execute_the_forward_functions_compute_sets(tmp_path):
    run_preset("conv", {**SYMMETRIC, "tiles-per-ipu": 16}, str(tmp_path), timestamp=TS, progress=False)
    fwd_steps, bwd_steps = _step_names(tmp_path)
    assert "Fwd/Conv_1/Convolve" in fwd_steps
    assert "Fwd/Conv_1/Convolve" in bwd_steps
    # the backward pass's copies into the function's parameters and out of its output
    assert "copy/conv/deltas->Fwd/in/OnTileCopy" in bwd_steps or "copy/conv/deltas->Fwd/in/Exchange" in bwd_steps
    assert any(n.startswith("copy/Fwd/") and "->Bwd/prevDeltas/" in n for n in bwd_steps)
