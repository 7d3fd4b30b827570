"""Presets of whole networks: an MNIST MLP, a CNN, BERT encoder layers and the large multi-IPU model."""

from __future__ import annotations

import numpy as np

from .. import programs as P
from ..engine import Engine
from ..errors import OptionError
from ..graph import Graph
from ..poplibs import poplin, popnn, popops, poprand
from ..poplibs._util import map_linearly
from ..target import Target
from ..types import HALF, UNSIGNED_INT, as_type
from .registry import (
    _ARCH,
    _DTYPE,
    _TILES,
    MAX_HEADS,
    MAX_IPUS,
    MAX_LAYERS,
    MAX_RUNS,
    MAX_STEPS,
    Built,
    Knob,
    _target,
    preset,
)

_IO_TILES = Knob(
    "io-tiles",
    int,
    0,
    "tiles per IPU kept for stream copies, which then overlap compute (Poplar's I/O tiles; 0: none)",
    None,
    0,
)


def _io_graphs(target: Target) -> tuple[Graph, Graph | None]:
    """The compute graph and, with I/O tiles, the virtual graph of the I/O tiles."""
    root = Graph(target)
    if not target.io_tiles:
        return root, None
    top = target.tiles_per_ipu
    return root.createVirtualGraph(0, top - target.io_tiles), root.createVirtualGraph(top - target.io_tiles, top)


def _stream_in(io: Graph | None, stream, tensor, load, prefetch, name: str) -> None:
    """Copy a stream into `tensor` in `load`; with I/O tiles, `prefetch` streams the next data
    into a buffer on the I/O tiles (at the end of a loop body, so it overlaps its compute) and
    `load` copies that buffer into `tensor`."""
    if io is None:
        load.add(P.Copy(stream, tensor))
        return
    buffer = io.addVariable(tensor.dtype, list(tensor.shape), f"{name}/ioBuffer")
    map_linearly(io, buffer)
    load.add(P.Copy(buffer, tensor))
    prefetch.add(P.Copy(stream, buffer))


def _dense(g: Graph, x, fan_in: int, fan_out: int, prog, name: str, dtype):
    W = poplin.createMatMulInputRHS(g, dtype, (x.shape[0], fan_in), (fan_in, fan_out), f"{name}/weights")
    b = g.addVariable(dtype, [fan_out], f"{name}/biases")
    map_linearly(g, b)
    y = poplin.matMul(g, x, W, prog, f"{name}/Fwd")
    popops.addInPlace(g, y, b, prog, f"{name}/Fwd/bias")
    return y, W, b


@preset(
    "mnist-mlp",
    "a training loop of a two-layer perceptron on MNIST-sized data (tutorial 5 style)",
    _ARCH,
    _TILES,
    _DTYPE,
    Knob("batch", int, 16, "batch size"),
    Knob("hidden", int, 128, "hidden units"),
    Knob("steps", int, 4, "training steps per run", None, 1, MAX_STEPS),
    Knob("runs", int, 2, "runs of the training program", None, 1, MAX_RUNS),
    _IO_TILES,
)
def _mnist(arch, tiles_per_ipu, dtype, batch, hidden, steps, runs, io_tiles) -> Built:
    tiles = _target(arch, tiles_per_ipu).tiles_per_ipu
    if io_tiles >= tiles:
        raise OptionError(f"knob --io-tiles must be below the tiles per IPU ({tiles}), got {io_tiles}")
    g, io = _io_graphs(_target(arch, tiles_per_ipu, io_tiles=io_tiles))
    for lib_ in (popops, poplin, popnn, poprand):
        lib_.addCodelets(g)
    t = as_type(dtype)
    x = poplin.createMatMulInputLHS(g, t, (batch, 784), (784, hidden), "images")
    labels = g.addVariable(t, [batch, 10], "labels")
    map_linearly(g, labels)
    label_index = g.addVariable(UNSIGNED_INT, [batch], "labelIndex")
    g.setTileMapping(label_index, 0)
    num_correct = g.addVariable(UNSIGNED_INT, [1], "numCorrect")
    g.setTileMapping(num_correct, 0)
    seed = g.addVariable(UNSIGNED_INT, [2], "seed")
    g.setTileMapping(seed, 0)
    images_in = g.addHostToDeviceFIFO("images", t, batch * 784)
    labels_in = g.addHostToDeviceFIFO("labels", t, batch * 10)
    index_in = g.addHostToDeviceFIFO("labelIndex", UNSIGNED_INT, batch)
    seed_in = g.addHostToDeviceFIFO("seed", UNSIGNED_INT, 2)
    correct_out = g.addDeviceToHostFIFO("numCorrect", UNSIGNED_INT, 1)
    init = P.Sequence(name="init")
    init.add(P.Copy(seed_in, seed))
    poprand.setSeed(g, seed, 0, init, "init")
    step = P.Sequence(name="trainingStep")
    prefetch = P.Sequence(name="prefetch")
    for stream, tensor, name in (
        (images_in, x, "images"),
        (labels_in, labels, "labels"),
        (index_in, label_index, "labelIndex"),
    ):
        _stream_in(io, stream, tensor, step, prefetch, name)
    h, W1, b1 = _dense(g, x, 784, hidden, step, "Layer1", t)
    popnn.nonLinearityInPlace(g, "SIGMOID", h, step, "Layer1/Fwd/Nonlinearity")
    hx = g.clone(h, "Layer1/Fwd/activations")
    step.add(P.Copy(h, hx))
    y, W2, b2 = _dense(g, hx, hidden, 10, step, "Layer3", t)
    popnn.nonLinearityInPlace(g, "SIGMOID", y, step, "Layer3/Fwd/Nonlinearity")
    deltas, loss = popnn.calcLoss(g, y, labels, "SUM_SQUARED", step, "Layer5/Bwd/LossSumSquared")
    popnn.calcAccuracy(g, y, label_index, num_correct, step, "Layer5/Accuracy")
    d3 = popnn.nonLinearityInputGradient(g, "SIGMOID", y, deltas, step, "Layer3/Bwd/Nonlinearity")
    dW2 = poplin.matMul(g, hx.transpose(), d3, step, "Layer3/Wu")
    dh = poplin.matMul(g, d3, W2.transpose(), step, "Layer3/Bwd")
    d1 = popnn.nonLinearityInputGradient(g, "SIGMOID", hx, dh, step, "Layer1/Bwd/Nonlinearity")
    dW1 = poplin.matMul(g, x.transpose(), d1, step, "Layer1/Wu")
    db1 = popops.reduce(g, d1, [0], step, "ADD", debugPrefix="Layer1/Wu/ReduceBias")
    db2 = popops.reduce(g, d3, [0], step, "ADD", debugPrefix="Layer3/Wu/ReduceBias")
    for target_, grad, name in (
        (W1, dW1, "Layer1/Wu/weights"),
        (W2, dW2, "Layer3/Wu/weights"),
        (b1, db1, "Layer1/Wu/biases"),
        (b2, db2, "Layer3/Wu/biases"),
    ):
        popops.scaledAddTo(g, target_, grad, -0.01, step, name)
    step.add(P.WriteUndef(deltas))
    if io is not None:
        step.add(prefetch)
    train = P.Sequence(P.Repeat(steps, step, name="trainingLoop"), P.Copy(num_correct, correct_out), name="train")
    if io is not None:
        train = P.Sequence(prefetch, train, name="train")

    def setup(engine: Engine) -> None:
        rng = np.random.default_rng(5)
        engine.connectStream("seed", np.array([7, 11], dtype=np.uint32))
        engine.connectStream("images", rng.random(batch * 784 * steps).astype(t.numpy))
        engine.connectStream("labels", np.eye(10, dtype=t.numpy)[rng.integers(0, 10, batch * steps)].reshape(-1))
        engine.connectStream("labelIndex", rng.integers(0, 10, batch * steps).astype(np.uint32))
        engine.connectStream("numCorrect", np.zeros(1, dtype=np.uint32))

    return Built(g, [init, train], [0] + [1] * runs, setup=setup)


@preset(
    "cnn",
    "a small convolutional network: convolutions, ReLU, a dense layer, loss and its update",
    _ARCH,
    _TILES,
    _DTYPE,
    Knob("batch", int, 4, "batch size"),
    Knob("channels", int, 32, "channels of each conv"),
    Knob("layers", int, 3, "convolution layers", None, 1, MAX_LAYERS),
    Knob("size", int, 16, "input height and width"),
    Knob("classes", int, 10, "output classes"),
)
def _cnn(arch, tiles_per_ipu, dtype, batch, channels, layers, size, classes) -> Built:
    g = Graph(_target(arch, tiles_per_ipu))
    for lib_ in (popops, poplin, popnn):
        lib_.addCodelets(g)
    t = as_type(dtype)
    prog = P.Sequence(name="cnn")
    in_chans = 4
    params = poplin.ConvParams(batch, in_chans, channels, (size, size), (3, 3), (1, 1), (1, 1), t)
    x = poplin.createInput(g, params, "input")
    stream = g.addHostToDeviceFIFO("input", t, x.numElements())
    prog.add(P.Copy(stream, x))
    act = x
    for layer in range(layers):
        c_in = in_chans if layer == 0 else channels
        p = poplin.ConvParams(batch, c_in, channels, (size, size), (3, 3), (1, 1), (1, 1), t)
        w = poplin.createWeights(g, p, f"Layer{layer}/weights")
        act = poplin.convolution(g, act, w, p, prog, f"Layer{layer}/Fwd/Conv")
        popnn.nonLinearityInPlace(g, "RELU", act, prog, f"Layer{layer}/Fwd/Relu")
    flat = act.reshape((batch, channels * size * size))
    flat_copy = poplin.createMatMulInputLHS(g, t, flat.shape, (flat.shape[1], classes), "flatten")
    prog.add(P.Copy(flat, flat_copy))
    logits, W, b = _dense(g, flat_copy, flat.shape[1], classes, prog, "Dense", t)
    popnn.nonLinearityInPlace(g, "SIGMOID", logits, prog, "Dense/Fwd/Sigmoid")
    labels = g.addVariable(t, [batch, classes], "labels")
    map_linearly(g, labels)
    deltas, loss = popnn.calcLoss(g, logits, labels, "SUM_SQUARED", prog, "Loss")
    grad = popnn.nonLinearityInputGradient(g, "SIGMOID", logits, deltas, prog, "Dense/Bwd/Sigmoid")
    dW = poplin.matMul(g, flat_copy.transpose(), grad, prog, "Dense/Wu")
    popops.scaledAddTo(g, W, dW, -0.01, prog, "Dense/Wu/update")

    def setup(engine: Engine) -> None:
        engine.connectStream("input", np.zeros(x.numElements(), dtype=t.numpy))

    return Built(g, [prog], [0], setup=setup)


def _layer_norm(g: Graph, x, prog, name: str):
    """Normalise the last dimension of [rows, width] (mean and variance by reductions)."""
    rows, width = x.shape
    total = popops.reduce(g, x, [1], prog, "ADD", debugPrefix=f"{name}/mean")
    scale = g.addConstant(x.dtype, [1], [1.0 / width], f"{name}/inverseWidth")
    g.setTileMapping(scale, 0)
    mean = popops.mul(g, total, scale, prog, f"{name}/scaleMean")
    centred = popops.sub(g, x, mean.reshape((rows, 1)), prog, f"{name}/centre")
    sq = popops.reduce(g, centred, [1], prog, "SQUARE_ADD", debugPrefix=f"{name}/variance")
    inv = popops.map_unary(g, "RSQRT", sq, prog, f"{name}/rsqrt")
    popops.mulInPlace(g, centred, inv.reshape((rows, 1)), prog, f"{name}/normalise")
    return centred


def _transformer_layer(g: Graph, x, prog, name: str, heads: int, ffn: int, dtype):
    """One encoder layer: attention with `heads` heads, a feed-forward block, residuals, norms."""
    seq, hidden = x.shape
    dh = hidden // heads
    contexts = []
    for head in range(heads):
        q, _, _ = _dense(g, x, hidden, dh, prog, f"{name}/head{head}/Q", dtype)
        kk, _, _ = _dense(g, x, hidden, dh, prog, f"{name}/head{head}/K", dtype)
        v, _, _ = _dense(g, x, hidden, dh, prog, f"{name}/head{head}/V", dtype)
        scores = poplin.matMul(g, q, kk.transpose(), prog, f"{name}/head{head}/scores")
        top = popops.reduce(g, scores, [1], prog, "MAX", debugPrefix=f"{name}/head{head}/softmax/max")
        shifted = popops.sub(g, scores, top.reshape((seq, 1)), prog, f"{name}/head{head}/softmax/shift")
        e = popops.exp(g, shifted, prog, f"{name}/head{head}/softmax/exp")
        s = popops.reduce(g, e, [1], prog, "ADD", debugPrefix=f"{name}/head{head}/softmax/sum")
        popops.divInPlace(g, e, s.reshape((seq, 1)), prog, f"{name}/head{head}/softmax/normalise")
        contexts.append(poplin.matMul(g, e, v, prog, f"{name}/head{head}/context"))
    from ..tensor import concat

    ctx = concat(contexts, 1)
    ctx_in = poplin.createMatMulInputLHS(g, dtype, (seq, hidden), (hidden, hidden), f"{name}/context")
    prog.add(P.Copy(ctx, ctx_in))
    attn, _, _ = _dense(g, ctx_in, hidden, hidden, prog, f"{name}/projection", dtype)
    popops.addInPlace(g, attn, x, prog, f"{name}/residual1")
    normed = _layer_norm(g, attn, prog, f"{name}/norm1")
    n_in = poplin.createMatMulInputLHS(g, dtype, (seq, hidden), (hidden, ffn), f"{name}/ffnIn")
    prog.add(P.Copy(normed, n_in))
    f1, _, _ = _dense(g, n_in, hidden, ffn, prog, f"{name}/ffn1", dtype)
    popnn.nonLinearityInPlace(g, "GELU", f1, prog, f"{name}/ffn1/gelu")
    f2, _, _ = _dense(g, f1, ffn, hidden, prog, f"{name}/ffn2", dtype)
    popops.addInPlace(g, f2, normed, prog, f"{name}/residual2")
    out = _layer_norm(g, f2, prog, f"{name}/norm2")
    nxt = poplin.createMatMulInputLHS(g, dtype, (seq, hidden), (hidden, dh), f"{name}/output")
    prog.add(P.Copy(out, nxt))
    return nxt


@preset(
    "bert-encoder",
    "BERT-style encoder layers: multi-head attention, feed-forward, layer norm",
    _ARCH,
    _TILES,
    _DTYPE,
    Knob("layers", int, 2, "encoder layers", None, 1, MAX_LAYERS),
    Knob("seq", int, 128, "sequence length"),
    Knob("hidden", int, 256, "hidden size"),
    Knob("heads", int, 4, "attention heads", None, 1, MAX_HEADS),
    Knob("ipus", int, 1, "IPUs (layers are placed on consecutive IPUs)", None, 1, MAX_IPUS),
)
def _bert(arch, tiles_per_ipu, dtype, layers, seq, hidden, heads, ipus) -> Built:
    if hidden % heads:
        raise OptionError(f"knob --hidden ({hidden}) must be a multiple of --heads ({heads})")
    target = _target(arch, tiles_per_ipu, ipus)
    g = Graph(target)
    for lib_ in (popops, poplin, popnn):
        lib_.addCodelets(g)
    t = as_type(dtype)
    prog = P.Sequence(name="encoder")
    x = poplin.createMatMulInputLHS(g, t, (seq, hidden), (hidden, hidden // heads), "embeddings")
    stream = g.addHostToDeviceFIFO("embeddings", t, seq * hidden)
    prog.add(P.Copy(stream, x))
    per_ipu = -(-layers // ipus)
    for layer in range(layers):
        ipu = layer // per_ipu
        sub = g.createVirtualGraph(ipu * target.tiles_per_ipu, (ipu + 1) * target.tiles_per_ipu) if ipus > 1 else g
        x = _transformer_layer(sub, x, prog, f"encoder/layer{layer}", heads, 4 * hidden, t)

    def setup(engine: Engine) -> None:
        engine.connectStream("embeddings", np.zeros(seq * hidden, dtype=t.numpy))

    return Built(g, [prog], [0], setup=setup)


@preset(
    "large",
    "a deep model spread over several Mk2 IPUs for scale tests (tens of thousands of compute sets)",
    Knob("ipus", int, 4, "IPUs", None, 1, MAX_IPUS),
    Knob("layers", int, 150, "encoder layers", None, 1, MAX_LAYERS),
    Knob("steps", int, 1, "training-loop iterations per run", None, 1, MAX_STEPS),
    Knob("seq", int, 64, "sequence length"),
    Knob("hidden", int, 128, "hidden size"),
    Knob("heads", int, 8, "attention heads", None, 1, MAX_HEADS),
    Knob("tiles-per-layer", int, 32, "tiles each layer uses"),
    _ARCH,
    _TILES,
)
def _large(ipus, layers, steps, seq, hidden, heads, tiles_per_layer, arch, tiles_per_ipu) -> Built:
    if hidden % heads:
        raise OptionError(f"knob --hidden ({hidden}) must be a multiple of --heads ({heads})")
    target = _target(arch, tiles_per_ipu, ipus)
    g = Graph(target)
    for lib_ in (popops, poplin, popnn):
        lib_.addCodelets(g)
    t = HALF
    total_tiles = g.num_tiles
    span = max(1, min(tiles_per_layer, total_tiles))
    body = P.Sequence(name="step")
    x = poplin.createMatMulInputLHS(
        g.createVirtualGraph(0, span), t, (seq, hidden), (hidden, hidden // heads), "embeddings"
    )
    stream = g.addHostToDeviceFIFO("embeddings", t, seq * hidden)
    prep = P.Sequence(P.Copy(stream, x), name="input")
    prepare = g.addFunction(prep, "prepareInput")
    body.add(P.Call(prepare))
    for layer in range(layers):
        first = (layer * span) % total_tiles
        first = min(first, total_tiles - span)
        sub = g.createVirtualGraph(first, first + span)
        x = _transformer_layer(sub, x, body, f"layer{layer}", heads, 4 * hidden, t)
    prog = P.Sequence(P.Repeat(steps, body, name="loop"), name="main")

    def setup(engine: Engine) -> None:
        engine.connectStream("embeddings", np.zeros(seq * hidden, dtype=np.float16))

    return Built(g, [prog], [0], setup=setup)
