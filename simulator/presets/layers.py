"""Presets of single layers as poplibs' benchmark tools run them: matmul, fc
(fully_connected_layer), gemm (general_matrix_multiply) and conv (single_conv_layer)."""

from __future__ import annotations

from .. import programs as P
from ..errors import GraphError, OptionError
from ..graph import Graph
from ..poplibs import fullyconnected, graphfn, planreport, poplin, popops
from ..poplibs._util import group_graphs, merge_parallel
from ..tensor import Tensor
from ..types import as_type
from .registry import _ARCH, _DTYPE, _TILES, MAX_HEADS, MAX_IPUS, Built, Knob, _target, flag, preset

_REPORT_PLAN = Knob(
    "report-plan", flag, False, "print the plans poplin's planner chose, as the tool's --report-plan", None, None
)


def _learning_rate(g: Graph, dtype) -> Tensor:
    """The weight update's scale, minus the learning rate, as poplibs' tools pass it: a constant
    tensor of the weights' type (tools/fully_connected_layer.cpp and single_conv_layer.cpp:
    graph.addConstant(weights.elementType(), {}, -learningRate)), which the scaled add's vertices
    read from the tile popops maps it to."""
    return g.addConstant(dtype, [], -0.05, "learningRate")


@preset(
    "matmul",
    "one matrix multiplication C[m,n] = A[m,k] B[k,n] planned by poplin",
    _ARCH,
    _TILES,
    _DTYPE,
    Knob("m", int, 1024, "rows of A and C"),
    Knob("k", int, 1024, "columns of A, rows of B"),
    Knob("n", int, 1024, "columns of B and C"),
    Knob("ipus", int, 1, "IPUs", None, 1, MAX_IPUS),
)
def _matmul(arch: str, tiles_per_ipu: int, dtype: str, m: int, k: int, n: int, ipus: int) -> Built:
    g = Graph(_target(arch, tiles_per_ipu, ipus))
    poplin.addCodelets(g)
    popops.addCodelets(g)
    t = as_type(dtype)
    A = poplin.createMatMulInputLHS(g, t, (m, k), (k, n), "A")
    B = poplin.createMatMulInputRHS(g, t, (m, k), (k, n), "B")
    prog = P.Sequence(name="matmul")
    C = poplin.matMul(g, A, B, prog, "matmul")
    g.createHostRead("C", C)
    return Built(g, [prog], [0], notes={"C": C})


_PHASE = Knob(
    "single-phase",
    str,
    "all",
    "passes to run, as poplibs' benchmark tools' --single-phase",
    ("all", "fwd", "bwd", "wu"),
    None,
)


@preset(
    "fc",
    "a fully-connected layer as poplibs' fully_connected_layer tool runs it (no bias): the forward pass, "
    "then the weight transpose, backward pass and weight update",
    _ARCH,
    _TILES,
    _DTYPE,
    Knob("batch-size", int, 1, "batch size"),
    Knob("input-size", int, 1000, "input features"),
    Knob("output-size", int, 1000, "output features"),
    _PHASE,
    Knob(
        "plan",
        str,
        "poplin",
        "how the passes are planned: poplin (one joint plan unless separate plans are cheaper, as poplin "
        "chooses; grouped layers each pass alone), separate (each pass alone) or joint",
        fullyconnected.PLAN_MODES,
        None,
    ),
    Knob(
        "num-groups",
        int,
        1,
        "independent layers side by side (the tool's grouped matMulGrouped), each on its share of the tiles",
        None,
        1,
        MAX_HEADS,
    ),
    Knob(
        "matmul-options",
        str,
        "",
        "poplin options of the passes, a JSON object such as "
        '{"availableMemoryProportion": 0.3, "partialsType": "half"}',
        None,
        None,
    ),
    _REPORT_PLAN,
)
def _fc(
    arch,
    tiles_per_ipu,
    dtype,
    batch_size,
    input_size,
    output_size,
    single_phase,
    plan,
    num_groups,
    matmul_options,
    report_plan,
) -> Built:
    options = _layer_options(matmul_options, "matmul-options")
    g = Graph(_target(arch, tiles_per_ipu))
    poplin.addCodelets(g)
    popops.addCodelets(g)
    t = as_type(dtype)
    b, i, o = batch_size, input_size, output_size
    if num_groups > 1:
        # poplin would weigh a joint plan of the grouped passes too; this simulator plans each alone
        if plan == "joint":
            raise OptionError("--num-groups plans each pass alone: it takes no --plan joint")
        # each group's layer on its share of the tiles, the groups' steps run side by side
        graphs = group_graphs(g, num_groups)
        # one learning rate for the whole layer, as the tool adds it to the graph when it runs the
        # weight update and matMulGroupedAcc adds all the groups' deltas in one scaledAddTo, which
        # leaves it on the graph's last tile
        scale = _learning_rate(g, t) if single_phase in ("all", "wu") else None
        passes = [_fc_separate_passes(vg, t, b, i, o, single_phase, options, scale) for vg in graphs]
        if scale is not None:
            g.setTileMapping(scale, g.num_tiles - 1)  # each group's scaled add mapped it to its own last tile
        fwd, bwd = (merge_parallel(g, [p[index] for p in passes]) for index in (0, 1))
        assert isinstance(fwd, P.Sequence) and isinstance(bwd, P.Sequence)  # as the passes are
        built = _fc_built(g, fwd, bwd, num_groups * b * i * o, {"jointPlan": False, "groups": num_groups})
        if report_plan:
            built.printed = [f"Each of the {num_groups} groups on {graphs[0].num_tiles:,} tiles:"]
            built.printed += _fc_plan_lines(graphs[0], b, i, o, t, "separate", options, single_phase)
        return built
    # as poplin plans them (--plan poplin, the default), the forward pass (fully_connected_layer
    # sets TRAINING_FWD whatever passes run) is planned jointly with the backward and weight-update
    # passes unless separate plans are cheaper, and the other passes' plans follow the forward
    # pass's (lib/poplin/ConvPlan.cpp, createPlan and getPlan); --plan separate plans each alone
    fc_plan = fullyconnected.plan_fully_connected(g, b, i, o, t, plan, options)
    fwd = P.Sequence(name="fwd")
    bwd = P.Sequence(name="bwd")
    if fc_plan.joint:
        prev_act = fullyconnected.createInput(g, fc_plan, "prevAct")
        weights = fullyconnected.createWeights(g, fc_plan, "weights")
        if single_phase in ("all", "fwd"):
            fullyconnected.forward(g, fc_plan, prev_act, weights, fwd, "Fwd")
        if single_phase in ("all", "bwd", "wu"):
            z_deltas = fullyconnected.createDeltas(g, fc_plan, "zDeltas")
            if single_phase in ("all", "bwd"):
                weights_t = fullyconnected.transposeWeights(g, fc_plan, weights, bwd, "Bwd/WeightsTranspose")
                fullyconnected.backward(g, fc_plan, z_deltas, weights_t, bwd, "Bwd")
            if single_phase in ("all", "wu"):
                scale = _learning_rate(g, t)
                fullyconnected.weightUpdate(g, fc_plan, weights, scale, prev_act, z_deltas, bwd, "Wu")
    else:
        fwd, bwd = _fc_separate_passes(g, t, b, i, o, single_phase, options)
    built = _fc_built(g, fwd, bwd, b * i * o, {"jointPlan": fc_plan.joint, "planCycles": fc_plan.cycles})
    if report_plan:
        built.printed = planreport.fully_connected_plan_lines(fc_plan, _bound(g, options), single_phase)
    return built


def _fc_plan_lines(g: Graph, b: int, i: int, o: int, t, mode: str, options: dict, passes: str) -> list[str]:
    plan = fullyconnected.plan_fully_connected(g, b, i, o, t, mode, options)
    return planreport.fully_connected_plan_lines(plan, _bound(g, options), passes)


def _fc_built(g: Graph, fwd: P.Sequence, bwd: P.Sequence, macs_per_pass: int, notes: dict) -> Built:
    """The fc preset's engine runs: the forward pass, then the backward pass and weight update."""
    programs = [p for p in (fwd, bwd) if p.programs]
    return Built(g, programs, list(range(len(programs))), notes={"macs": macs_per_pass * len(programs), **notes})


def _fc_separate_passes(
    g: Graph, t, b: int, i: int, o: int, single_phase: str, options: dict, scale: Tensor | None = None
) -> tuple[P.Sequence, P.Sequence]:
    """The passes of a layer planned each alone, with its fullyConnectedPass and the layer's poplin
    `options`, as fully_connected_layer passes them: the forward pass, then the backward pass and
    weight update, which scales by `scale` (default: a learning rate of its own)."""
    fwd, bwd = P.Sequence(name="fwd"), P.Sequence(name="bwd")
    fwd_opts, bwd_opts, wu_opts = (
        {**options, "fullyConnectedPass": p} for p in ("TRAINING_FWD", "TRAINING_BWD", "TRAINING_WU")
    )
    prev_act = poplin.createMatMulInputLHS(g, t, (b, i), (i, o), "prevAct", fwd_opts)
    weights = poplin.createMatMulInputRHS(g, t, (b, i), (i, o), "weights", fwd_opts)
    if single_phase in ("all", "fwd"):
        poplin.matMul(g, prev_act, weights, fwd, "Fwd", fwd_opts)
    if single_phase in ("all", "bwd", "wu"):
        z_deltas = poplin.createMatMulInputLHS(g, t, (b, o), (o, i), "zDeltas", bwd_opts)
        if single_phase in ("all", "bwd"):
            weights_t = poplin.transposeMatMulRHS(g, weights, (b, i), bwd, "Bwd/WeightsTranspose", bwd_opts)
            poplin.matMul(g, z_deltas, weights_t, bwd, "Bwd", bwd_opts)
        if single_phase in ("all", "wu"):
            if scale is None:
                scale = _learning_rate(g, t)
            poplin.matMulAcc(g, weights, scale, prev_act.transpose(), z_deltas, bwd, "Wu", wu_opts)
    return fwd, bwd


@preset(
    "gemm",
    "C = alpha A B + beta C as poplibs' general_matrix_multiply tool runs it",
    _ARCH,
    _TILES,
    _DTYPE,
    Knob("m", int, 1024, "rows of A and C"),
    Knob("k", int, 1024, "columns of A, rows of B"),
    Knob("n", int, 1024, "columns of B and C"),
    Knob("alpha", float, 1.0, "scale of A B", None, None),
    Knob("beta", float, 1.0, "scale of C", None, None),
    Knob("partials-type", str, "float", "type of the partial sums (poplin's partialsType)", ("half", "float"), None),
    Knob(
        "available-memory-proportion",
        float,
        poplin.AVAILABLE_MEMORY_PROPORTION,
        "share of a tile's memory the planner may give the product's temporaries (0: no bound)",
        None,
        None,
    ),
    Knob("plan-constraints", str, "", "poplin plan constraints of the product, a JSON object", None, None),
    _REPORT_PLAN,
)
def _gemm(
    arch,
    tiles_per_ipu,
    dtype,
    m,
    k,
    n,
    alpha,
    beta,
    partials_type,
    available_memory_proportion,
    plan_constraints,
    report_plan,
) -> Built:
    options = _checked_options(
        {"partialsType": partials_type, "availableMemoryProportion": available_memory_proportion},
        "available-memory-proportion",
    )
    options.update(_plan_constraints(plan_constraints, "plan-constraints", _PRODUCT_CONSTRAINTS) or {})
    g = Graph(_target(arch, tiles_per_ipu))
    poplin.addCodelets(g)
    popops.addCodelets(g)
    t = as_type(dtype)
    A = poplin.createMatMulInputLHS(g, t, (m, k), (k, n), "matA", options)
    B = poplin.createMatMulInputRHS(g, t, (m, k), (k, n), "matB", options)
    prog = P.Sequence(name="gemm")
    product = poplin.matMul(g, A, B, prog, "op(A) x op(B)", options)
    C = g.clone(product, "matC")
    popops.scaledAddTo(g, C, product, alpha, prog, "scaledAdd", scaleA=beta)
    g.createHostRead("C", C)
    printed = []
    if report_plan:
        plan = poplin.plan_product(g, m, k, n, t, options)
        printed = planreport.matmul_plan_lines("Plan of op(A) x op(B)", plan, _bound(g, options))
    return Built(g, [prog], [0], notes={"macs": m * k * n}, printed=printed)


#: The poplin options of a layer the simulator honours: single_conv_layer's --convolution-options
#: and fully_connected_layer's --matmul-options may set these.
_LAYER_OPTION_KEYS = ("availableMemoryProportion", "partialsType")


def _knob_json(text: str, knob: str):
    """The JSON value of knob --`knob`, which expects an object; bad JSON is an OptionError."""
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"knob --{knob} expects a JSON object, got {text!r}: {exc}") from None
    except RecursionError:
        raise OptionError(f"knob --{knob} expects a JSON object, got one nested too deeply to read") from None


def _layer_options(text: str, knob: str) -> dict:
    """poplin options from a knob: a JSON object as the tools take them, with only
    _LAYER_OPTION_KEYS, whose values poplin must accept; {} for an empty knob."""
    if not text.strip():
        return {}
    value = _knob_json(text, knob)
    if not isinstance(value, dict):
        raise OptionError(f"knob --{knob} expects a JSON object, got {text!r}")
    for key in value:
        if key not in _LAYER_OPTION_KEYS:
            raise OptionError(
                f"knob --{knob}: the simulator does not model option {key!r}; it honours {', '.join(_LAYER_OPTION_KEYS)}"
            )
    return _checked_options(value, knob)


def _checked_options(options: dict, knob: str) -> dict:
    """`options` once poplin accepts their partials type and memory proportion; a bad value is an
    OptionError naming the knob."""
    try:
        poplin.memory_bound(options, 1)
        poplin.partials_type(options)
    except GraphError as exc:
        raise OptionError(f"knob --{knob}: {exc}") from None
    return dict(options)


def _bound(g: Graph, options: dict | None) -> float:
    """The planner's memory bound per tile of `g` for these options."""
    return poplin.memory_bound(options, g.target.bytesPerTile)


def _nested(keys) -> dict:
    """Dotted constraint names as poplin reads them: {"outChanSplit": {"parallel": None}} for
    outChanSplit.parallel."""
    tree: dict = {}
    for key in keys:
        *parents, leaf = key.split(".")
        node = tree
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = None
    return tree


#: The plan constraints the simulator honours, by pass of the `conv` preset (None: a value): a
#: convolution's expanded dims and operand swap, and its weight update's method, operand swap and
#: splits (a matrix product, as the gemm preset's).
_CONV_TRANSFORMS = {"0": {"transform": {"swapOperands": None, "expandDims": None}}}
_PRODUCT_CONSTRAINTS = {
    "method": None,
    "0": {"transform": {"swapOperands": None}, "partition": _nested(poplin.PARTITION_KEYS)},
}
_CONV_CONSTRAINTS: dict[str, dict] = {"fwd": _CONV_TRANSFORMS, "bwd": _CONV_TRANSFORMS, "wu": _PRODUCT_CONSTRAINTS}


def _plan_constraints(text: str, name: str, allowed: dict) -> dict | None:
    """The options of a pass whose plan-constraints knob `name` is `text`, a JSON object as
    poplibs' tools take it; None when empty. Keys not in `allowed`, the tree of the keys the
    simulator honours, are refused."""
    if not text.strip():
        return None
    knob = f"--{name}"
    value = _knob_json(text, name)

    def check(obj, tree: dict, path: str) -> None:
        if not isinstance(obj, dict):
            raise OptionError(f"knob {knob} expects a JSON object at {path or 'the top'}, got {obj!r}")
        for key, sub in obj.items():
            where = f"{path}.{key}" if path else key
            if key not in tree:
                honoured = ", ".join(_paths(allowed))
                raise OptionError(f"knob {knob}: the simulator does not model {where!r}; it honours {honoured}")
            if tree[key] is not None:
                check(sub, tree[key], where)

    check(value, allowed, "")
    return {"planConstraints": value}


def _paths(allowed: dict, prefix: str = "") -> list[str]:
    """The dotted keys of a constraint tree: ["method", "0.transform.swapOperands"]."""
    out = []
    for key, sub in allowed.items():
        out += [f"{prefix}{key}"] if sub is None else _paths(sub, f"{prefix}{key}.")
    return out


def _pair(text: str, name: str) -> tuple[int, int]:
    parts = [p for p in str(text).strip("{}").replace(" ", "").split(",") if p]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if len(values) == 1:
        values = values * 2
    if len(values) != 2 or min(values) < 0:
        raise OptionError(
            f"knob --{name} expects one or two non-negative integers such as 7 or 7,7 or {{7,7}}, got {text!r}"
        )
    return values[0], values[1]


def _conv_padding(padding: str, lower: str, upper: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """The (lower, upper) padding of the conv preset's knobs, as single_conv_layer combines its
    options (tools/single_conv_layer.cpp): --padding sets both ends and may not be given with
    --padding-lower or --padding-upper; either of those alone leaves the other end at its default,
    0. With none of them given, the preset pads both ends by 1."""
    for name, value in (("padding-lower", lower), ("padding-upper", upper)):
        if padding and value:
            raise OptionError(f"knobs --padding and --{name} cannot both be given (single_conv_layer refuses it)")
    if padding or not (lower or upper):
        both = _pair(padding or "1", "padding")
        return both, both
    return (_pair(lower, "padding-lower") if lower else (0, 0)), (_pair(upper, "padding-upper") if upper else (0, 0))


def _conv_backward_params(params: poplin.ConvParams) -> poplin.ConvParams:
    """The convolution of the conv preset's backward pass: the deltas [b, o, oh, ow] with the
    transposed and flipped weights. The forward pass's valid convolution is a full one backwards:
    the deltas are padded by kernel - 1 less the forward padding, each end by its own end's
    (lib/poplin/ConvUtil.cpp, getGradientParams pads kernel - 1 at both ends and truncates the
    output by the forward padding at the same ends, which ConvParams::canonicalize takes off the
    padding). Where the forward padding is wider than the kernel less one, that padding is
    negative: the deltas of outputs that read padding only are left out. At stride 1 the gradient
    then has the input's field. For a strided convolution the deltas' field is convolved at stride
    1, not dilated: about the multiply-accumulates of poplin's dilated deltas, on a smaller field
    (at least one output)."""
    field, pads, uppers = [], [], []
    for size, k, stride, out, (lower, upper) in zip(
        params.field, params.kernel, params.stride, params.out_field, params.pad_widths
    ):
        first = max(0, -(-(lower - k + 1) // stride))  # deltas before it read the lower padding only
        last = min(out, -(-(size + lower) // stride))  # deltas from it on read the upper padding only
        # the padding before the first kept delta: kernel - 1 less the forward padding it skips
        before = min(k - 1, max(0, k - 1 - (lower - first * stride)))
        # (at least one delta, though where all of them read padding only, none reaches the input)
        kept = max(1, last - first)
        if stride == 1:
            after = size + k - 1 - kept - before  # the output is then `size`
        else:
            after = max(0, k - 1 - upper, k - kept - before)
        field.append(kept)
        pads.append(before)
        uppers.append(after)
    return poplin.ConvParams(
        params.batch,
        params.out_chans,
        params.in_chans,
        (field[0], field[1]),
        params.kernel,
        (1, 1),
        (pads[0], pads[1]),
        params.dtype,
        (uppers[0], uppers[1]),
    )


@preset(
    "conv",
    "one 2-D convolution planned by poplin; single_conv_layer's options (--field, --kernel-size, "
    "--input-channels, --output-channels, --batch-size, --single-phase) override the short ones",
    _ARCH,
    _TILES,
    _DTYPE,
    Knob("batch", int, 4, "batch size"),
    Knob("in-chans", int, 64, "input channels"),
    Knob("out-chans", int, 64, "output channels"),
    Knob("height", int, 28, "input height"),
    Knob("width", int, 28, "input width"),
    Knob("kernel", int, 3, "kernel height and width"),
    Knob("stride", str, "1", "stride (S or H,W)", None, None),
    Knob(
        "padding",
        str,
        "",
        "zero padding at both ends of each field dim (P or H,W); 1 when neither --padding-lower nor "
        "--padding-upper is given",
        None,
        None,
    ),
    Knob(
        "padding-lower",
        str,
        "",
        "zero padding at the start of each field dim (P or H,W; single_conv_layer)",
        None,
        None,
    ),
    Knob(
        "padding-upper", str, "", "zero padding at the end of each field dim (P or H,W; single_conv_layer)", None, None
    ),
    Knob("field", str, "", "input field H,W (single_conv_layer)", None, None),
    Knob("kernel-size", str, "", "kernel size K or H,W (single_conv_layer)", None, None),
    Knob("input-channels", int, 0, "input channels (single_conv_layer)", None, 0),
    Knob("output-channels", int, 0, "output channels (single_conv_layer)", None, 0),
    Knob("batch-size", int, 0, "batch size (single_conv_layer)", None, 0),
    _PHASE,
    *(
        Knob(f"{phase}-plan-constraints", str, "", f"poplin plan constraints of the {what}, a JSON object", None, None)
        for phase, what in (("fwd", "forward pass"), ("bwd", "backward pass"), ("wu", "weight update"))
    ),
    Knob(
        "convolution-options",
        str,
        "",
        "poplin options of every pass, a JSON object such as "
        '{"availableMemoryProportion": 0.3, "partialsType": "half"}',
        None,
        None,
    ),
    _REPORT_PLAN,
)
def _conv(
    arch,
    tiles_per_ipu,
    dtype,
    batch,
    in_chans,
    out_chans,
    height,
    width,
    kernel,
    stride,
    padding,
    padding_lower,
    padding_upper,
    field,
    kernel_size,
    input_channels,
    output_channels,
    batch_size,
    single_phase,
    fwd_plan_constraints,
    bwd_plan_constraints,
    wu_plan_constraints,
    convolution_options,
    report_plan,
) -> Built:
    # single_conv_layer's --convolution-options apply to every pass, each pass's plan constraints
    # beside them
    layer = _layer_options(convolution_options, "convolution-options")
    fwd_opts, bwd_opts, wu_opts = (
        {**layer, **(_plan_constraints(text, f"{phase}-plan-constraints", _CONV_CONSTRAINTS[phase]) or {})}
        for text, phase in (
            (fwd_plan_constraints, "fwd"),
            (bwd_plan_constraints, "bwd"),
            (wu_plan_constraints, "wu"),
        )
    )
    # the weight update is planned as the convolution pass it is (poplin's pass TRAINING_WU)
    wu_opts["pass"] = "TRAINING_WU"
    g = Graph(_target(arch, tiles_per_ipu))
    poplin.addCodelets(g)
    popops.addCodelets(g)
    h, w = _pair(field, "field") if field else (height, width)
    kh, kw = _pair(kernel_size, "kernel-size") if kernel_size else (kernel, kernel)
    sh, sw = _pair(stride, "stride")
    lower, upper = _conv_padding(padding, padding_lower, padding_upper)
    b = batch_size or batch
    c = input_channels or in_chans
    o = output_channels or out_chans
    if min(h, w, kh, kw, sh, sw) < 1:
        raise OptionError("knobs --field, --kernel-size and --stride must be positive")
    t = as_type(dtype)
    params = poplin.ConvParams(b, c, o, (h, w), (kh, kw), (sh, sw), lower, t, upper)
    oh, ow = params.out_field
    if oh < 1 or ow < 1:
        raise OptionError(
            f"the convolution's output field {oh}x{ow} is empty; check --field, --kernel-size, --stride and "
            "--padding (or --padding-lower and --padding-upper)"
        )
    x = poplin.createInput(g, params, "conv/in", fwd_opts)
    weights = poplin.createWeights(g, params, "conv/weights", fwd_opts)
    fwd = P.Sequence(name="fwd")
    bwd = P.Sequence(name="bwd")
    # the forward convolution is a graph function, built and called whatever the passes (the
    # forward program is dropped unless the forward pass runs), and called by the backward pass
    # too when that is the same convolution (tools/single_conv_layer.cpp: fwdConv, a
    # graphfn::TensorFunction; --enable-convolution-reuse defaults to true)
    fwd_conv = graphfn.TensorFunction(
        g,
        {"in": x, "weights": weights},
        lambda args, body: poplin.convolution(g, args[0], args[1], params, body, "Fwd", fwd_opts),
        "Fwd",
    )
    fwd_conv([x, weights], fwd if single_phase in ("all", "fwd") else P.Sequence(), "Fwd/nextAct")
    if single_phase in ("all", "bwd"):
        bp = _conv_backward_params(params)
        deltas = poplin.createInput(g, bp, "conv/deltas", bwd_opts)
        if bp == params:
            # the weights transposed and flipped into a tensor laid out for the forward plan, and
            # the forward function called on them and the deltas. poplin compares the canonical
            # parameters: at a stride above 1 it reuses a few convolutions (a strided dim of one
            # output, say) that are planned alone here
            bwd_weights = poplin.createWeights(g, bp, "Bwd/bwdWeights", fwd_opts)
            poplin.weightsTransposeChansFlipXY(g, weights, bwd_weights, bwd, "Bwd")
            fwd_conv([deltas, bwd_weights], bwd, "Bwd/prevDeltas")
        else:
            # input gradients: the deltas convolved with the transposed and flipped weights, a
            # tensor of the backward plan written by transpose vertices (poplin::convolution with
            # transposeAndFlipWeights)
            poplin.convolution(g, deltas, weights, bp, bwd, "Bwd", bwd_opts, transposeAndFlipWeights=True)
    if single_phase in ("all", "wu"):
        # weight gradients as poplin plans them: a product over batch and field positions
        rows, inner = c * kh * kw, b * oh * ow
        acts = poplin.createMatMulInputLHS(g, t, (rows, inner), (inner, o), "Wu/activations", wu_opts)
        zd = poplin.createMatMulInputRHS(g, t, (rows, inner), (inner, o), "Wu/deltas", wu_opts)
        # the deltas added to the weights in the weights' shape, [o, c, kh, kw], regrouped to the
        # weights' grouping first (lib/poplin/Convolution.cpp, convolutionWeightUpdate:
        # regroupIfBeneficial, then scaledAddTo, which regroups as well)
        product = poplin.matMul(g, acts, zd, bwd, "Wu", wu_opts)
        deltas_w = product.transpose().reshape((o, c, kh, kw))
        popops.scaledAddTo(g, weights, deltas_w, _learning_rate(g, t), bwd, "Wu/AddTo")
    programs = [p for p in (fwd, bwd) if p.programs]
    built = Built(g, programs, list(range(len(programs))), notes={"macs": params.macs})
    if report_plan:
        bound = _bound(g, layer)
        if single_phase in ("all", "fwd"):
            built.printed += planreport.convolution_plan_lines(
                "Forward plan", poplin.convolution_plan(g, params, fwd_opts), bound
            )
        if single_phase in ("all", "bwd"):
            built.printed += planreport.convolution_plan_lines(
                "Backward plan", poplin.convolution_plan(g, _conv_backward_params(params), bwd_opts), bound
            )
        if single_phase in ("all", "wu"):
            wu = poplin.plan_product(g, c * kh * kw, b * oh * ow, o, t, wu_opts)
            built.printed += planreport.matmul_plan_lines("Weight-update plan", wu, bound)
    return built
