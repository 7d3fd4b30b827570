"""Building and running small simulator graphs in tests: a graph with poplibs' codelets, a
functional engine run that returns the tensors read back and checks the report it writes, a
matrix product run on data, and a numpy reference for convolutions."""

from __future__ import annotations

import numpy as np
from simulator_invariants import check_report

from simulator import FLOAT, Engine, Graph, Sequence, Target
from simulator.poplibs import poplin, popnn, popops

TS = "2024-01-01T00:00:00Z"


def codelet_graph(tiles: int = 32, arch: str = "ipu2") -> Graph:
    """A graph of one IPU with `tiles` tiles and popops', poplin's and popnn's codelets."""
    g = Graph(Target(arch, tiles_per_ipu=tiles))
    for lib in (popops, poplin, popnn):
        lib.addCodelets(g)
    return g


def run_functional(g, prog, tmp_path, writes: dict, reads: list[str]) -> dict:
    """Run `prog` once with values, write its report to tmp_path (checked), return the tensors read."""
    with Engine(
        g, prog, {"autoReport.all": "true", "autoReport.directory": str(tmp_path)}, timestamp=TS, functional=True
    ) as e:
        for name, value in writes.items():
            e.writeTensor(name, value)
        e.run(0)
        out = {name: e.readTensor(name) for name in reads}
    assert check_report(tmp_path / "profile.pop") == []
    return out


def run_product(g, shape, options, tmp_path, seed: int):
    """A B of random float operands created for the plan of `options` and run functionally: returns
    (a @ b, C read back, the program)."""
    m, k, n = shape
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    A = poplin.createMatMulInputLHS(g, FLOAT, a.shape, b.shape, "A", options)
    B = poplin.createMatMulInputRHS(g, FLOAT, a.shape, b.shape, "B", options)
    prog = Sequence()
    C = poplin.matMul(g, A, B, prog, "mm", options)
    g.createHostWrite("A", A)
    g.createHostWrite("B", B)
    g.createHostRead("C", C)
    out = run_functional(g, [prog], tmp_path, {"A": a, "B": b}, ["C"])
    return a @ b, out["C"], prog


def correlate(x, w, stride=(1, 1), padding=(0, 0), padding_upper=None):
    """Reference: y[b, o] = sum_c x[b, c] (*) w[o, c], cross-correlation as poplin computes it, the
    field padded by `padding` at the start of each dim and `padding_upper` (`padding` when None)
    at its end."""
    upper = padding if padding_upper is None else padding_upper
    sh, sw = stride
    kh, kw = w.shape[2:]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (padding[0], upper[0]), (padding[1], upper[1])))
    oh = (xp.shape[2] - kh) // sh + 1
    ow = (xp.shape[3] - kw) // sw + 1
    y = np.zeros((x.shape[0], w.shape[0], oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i : i + sh * oh : sh, j : j + sw * ow : sw]
            y += np.einsum("bchw,oc->bohw", patch, w[:, :, i, j].astype(np.float64))
    return y


def run_convolution(g, prog, x, w, y, tmp_path, seed: int, dtype=np.float32):
    """Run a convolution's program on random input and weights: (input, weights, output) values."""
    g.createHostWrite("x", x)
    g.createHostWrite("w", w)
    g.createHostRead("y", y)
    rng = np.random.default_rng(seed)
    xv = rng.standard_normal(tuple(x.shape)).astype(dtype)
    wv = rng.standard_normal(tuple(w.shape)).astype(dtype)
    return xv, wv, run_functional(g, prog, tmp_path, {"x": xv, "w": wv}, ["y"])["y"]


def build_convolution(g, params, options=None, names=("conv/in", "conv/weights")):
    """Input and weights created for `params` (for its plan without `options`), and the
    convolution "conv" of them with `options` in a new program: (input, weights, program, output)."""
    x = poplin.createInput(g, params, names[0])
    w = poplin.createWeights(g, params, names[1])
    prog = Sequence()
    y = poplin.convolution(g, x, w, params, prog, "conv", options)
    return x, w, prog, y
