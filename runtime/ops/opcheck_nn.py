"""Op rules of the core compute ops: arithmetic, activations, quantize/cast, convolutions, dense, pools, reductions, resize, LSTM, custom ops.

Each rule gets the op under check (runtime/ops/opcheck_base.py OpCheck) and returns its output shapes, None where
only the run can tell."""

from __future__ import annotations

import math

import numpy as np

from runtime.ir import options as opt
from runtime.ir.graph import DType
from runtime.ir.optypes import OpType
from runtime.ops.opcheck_base import (Shape, EIGHT_BIT, fmt, OpCheck, check_window, check_bias, check_hybrid,
                                      conv_groups, weights_type)
from runtime.ops.opcheck_math import float_in_out


# -- rules: each returns the op's output shapes (None where only the run can tell) ---------------


def binary(c: OpCheck):
    c.arity(2, 2, 1)
    a, b = c.shape(0), c.shape(1)
    x, y = c.tensor(0), c.tensor(1)
    # Float data with 8-bit constant weights is left to the plan, which names the missing hybrid kernel.
    if x.dtype is not y.dtype and not (x.dtype.np.kind == "f" and y.is_constant and y.dtype in EIGHT_BIT):
        c.same_type(0, 1)
    try:
        out = tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise c.fail(f"shapes {fmt(a)} of {c.graph.describe_tensor(c.slot(0))} and {fmt(b)} of "
                     f"{c.graph.describe_tensor(c.slot(1))} do not broadcast") from None
    if c.eight_bit:
        c.quantized(0, 1, "out")
        if c.op.type is OpType.ADD:
            check_add_multipliers(c)
    return [out]


def check_add_multipliers(c: OpCheck) -> None:
    """8-bit ADD: LiteRT's Prepare aborts the process unless each rescaling multiplier lies in
    (0, 1) (quantization_util.cc QuantizeMultiplierSmallerThanOneExp, TFLITE_CHECK): an output scale
    far below the inputs', or one so large that 2**20 times it overflows float32."""
    from runtime.ops.qelementwise import add_multipliers

    scales = [c.tensor(0).quant.scale[0], c.tensor(1).quant.scale[0], c.out_tensor().quant.scale[0]]
    for what, m in zip(("the first input's", "the second input's", "the output's"), add_multipliers(*scales)):
        if not 0 < m < 1:
            raise c.fail(f"the quantization scales (inputs {scales[0]:.7g} and {scales[1]:.7g}, output "
                         f"{scales[2]:.7g}) give {what} rescaling multiplier {m:.7g}; LiteRT's "
                         f"ADD needs each in (0, 1)")


def unary(c: OpCheck):
    c.arity(1, 1, 1)
    x = c.shape(0)
    if c.eight_bit:
        c.quantized(0, "out")
    return [x]


def rsqrt(c: OpCheck):
    """elementwise.cc IsRsqrtSupportedType: float32 or int8 (and int16), never uint8."""
    if c.tensor(0).dtype is DType.UINT8:
        raise c.fail(f"{c.name(0)} is UINT8; RSQRT takes FLOAT32 or INT8")
    return unary(c)


def check_softmax(c: OpCheck):
    c.arity(1, 1, 1)
    x = c.shape(0)
    if not x or x[-1] < 1:
        raise c.fail(f"{c.name(0)} has shape {fmt(x)}; softmax needs a last dimension of at least 1")
    if c.eight_bit:
        c.quantized(0)
        beta = c.opts.beta if c.opts is not None else 1.0
        if not (math.isfinite(beta) and beta > 0):
            raise c.fail(f"options.beta is {beta:.7g}; the 8-bit kernel needs a positive finite beta")
    return [x]


def leaky_relu(c: OpCheck):
    out = unary(c)
    if c.eight_bit and not math.isfinite(c.opts.alpha):
        raise c.fail(f"options.alpha is {c.opts.alpha}; the 8-bit kernel needs a finite alpha")
    return out


def dequantize(c: OpCheck):
    c.arity(1, 1, 1)
    x = c.tensor(0)
    if x.dtype.np.kind in "iu":
        if x.quant is None:
            raise c.fail(f"{c.name(0)} is {x.dtype.name} without quantization parameters")
    elif x.dtype is not DType.FLOAT16:
        raise c.fail(f"{c.name(0)} is {x.dtype.name}; DEQUANTIZE reads quantized integers or FLOAT16")
    c.out_type(DType.FLOAT32)
    return [c.shape(0)]


def check_quantize(c: OpCheck):
    c.arity(1, 1, 1)
    y = c.out_tensor()
    if y.dtype is DType.INT16:  # 16x8 quantization: the plan refuses it, naming the tensor
        return [c.shape(0)]
    if y.dtype not in EIGHT_BIT:
        raise c.fail(f"{c.out_name()} is {y.dtype.name}; QUANTIZE writes INT8 or UINT8")
    x = c.tensor(0)
    if x.dtype.np.kind == "f":
        if y.quant is None:
            raise c.fail(f"{c.out_name()} has no quantization parameters")
        if not all(math.isfinite(s) and s > 0 for s in y.quant.scale):
            raise c.fail(f"{c.out_name()} has a zero, negative or non-finite quantization scale")
    elif x.dtype in EIGHT_BIT:
        c.quantized(0, "out")
    else:
        raise c.fail(f"{c.name(0)} is {x.dtype.name}; QUANTIZE reads float or 8-bit data")
    return [c.shape(0)]


def check_cast(c: OpCheck):
    c.arity(1, 1, 1)
    return [c.shape(0)]


def conv(c: OpCheck):
    c.arity(2, 3, 1)
    x = c.rank(0, 4, positive=True)
    w = c.rank(1, 4, positive=True)
    cout, kh, kw, cin = w
    if conv_groups(x[3], cin, cout) is None:   # TFLite's grouped convolution: channels a multiple of the filter's
        raise c.fail(f"{c.name(0)} has {x[3]} channels, filter {c.name(1)} of shape {fmt(w)} expects {cin}, or a "
                     f"multiple of it that divides its {cout} filters into equal groups")
    check_bias(c, 2, cout)
    oh, ow = check_window(c, x, kh, kw, dilated=True)
    if c.eight_bit:
        weights_type(c, 0, 1)
        c.quantized(0, "out")
        # LiteRT's conv.cc refuses an int8 filter's nonzero zero points (its kernel subtracts none)
        c.weights(1, cout, 0, symmetric=c.tensor(1).dtype is DType.INT8)
    check_hybrid(c, 0, 1, cout, 0)
    return [(x[0], oh, ow, cout)]


def depthwise(c: OpCheck):
    c.arity(2, 3, 1)
    x = c.rank(0, 4, positive=True)
    w = c.rank(1, 4, positive=True)
    _, kh, kw, cout = w
    if w[0] != 1:
        raise c.fail(f"filter {c.name(1)} has shape {fmt(w)}; its first dimension must be 1")
    if cout % x[3]:
        raise c.fail(f"filter {c.name(1)} has {cout} channels, not a multiple of the {x[3]} channels of {c.name(0)}")
    check_bias(c, 2, cout)
    oh, ow = check_window(c, x, kh, kw, dilated=True)
    if c.eight_bit:
        weights_type(c, 0, 1)
        c.quantized(0, "out")
        c.weights(1, cout, 3)
    check_hybrid(c, 0, 1, cout, 3)
    # The integer kernels sum a filter's products exactly in float32 (runtime/ops/qconv.py, hybrid.py).
    product = (255 * 255 if c.tensor(0).dtype is DType.UINT8 else 128 * 128) if c.eight_bit else 255 * 128
    if (c.eight_bit or c.tensor(1).dtype in EIGHT_BIT) and kh * kw * product > 2**24:
        raise c.fail(f"filter {c.name(1)} of {kh}x{kw} is too large for exact float32 sums")
    return [(x[0], oh, ow, cout)]


def transpose_conv(c: OpCheck):
    c.arity(3, 4, 1)
    w = c.rank(1, 4, positive=True)
    x = c.rank(2, 4, positive=True)
    cout, kh, kw, cin = w
    if x[3] != cin:
        raise c.fail(f"{c.name(2)} has {x[3]} channels, filter {c.name(1)} of shape {fmt(w)} expects {cin}")
    check_bias(c, 3, cout)
    o = c.opts
    if not isinstance(o.padding, opt.Padding):
        raise c.fail(f"options.padding is {o.padding!r}, not SAME or VALID")
    c.option("stride_h", 1)
    c.option("stride_w", 1)
    if c.eight_bit:
        weights_type(c, 2, 1)
        c.quantized(2, "out")
        c.weights(1, cout, 0)
    check_hybrid(c, 2, 1, cout, 0)
    shape = c.ints(0, "output shape", size=4)
    if shape is None:
        return [None]
    if any(d < 1 for d in shape) or shape[0] != x[0] or shape[3] != cout:
        raise c.fail(f"{c.name(0)} asks for output shape {shape}; positive, batch {x[0]} and {cout} channels expected")
    return [tuple(shape)]


def fully_connected(c: OpCheck):
    c.arity(2, 3, 1)
    o = c.opts
    x = c.rank(0)
    w = c.rank(1, 2, positive=True)
    units, depth = w
    if o.weights_format != 0:
        raise c.fail(f"options.weights_format is {o.weights_format}; only the default layout (0) is supported")
    size = math.prod(x)
    if not x or size % depth:
        raise c.fail(f"{c.name(0)} of shape {fmt(x)} does not split into rows of {depth} for weights {c.name(1)}")
    if o.keep_num_dims and x[-1] != depth:
        raise c.fail(f"{c.name(0)} has shape {fmt(x)}; keep_num_dims needs its last dimension to be {depth}")
    check_bias(c, 2, units)
    if c.eight_bit:
        weights_type(c, 0, 1)
        c.quantized(0, "out")
        c.weights(1, units, 0)
    check_hybrid(c, 0, 1, units, 0)
    return [x[:-1] + (units,) if o.keep_num_dims else (size // depth, units)]


def batch_matmul(c: OpCheck):
    c.arity(2, 2, 1)
    o = c.opts
    a, b = c.shape(0), c.shape(1)
    if len(a) < 2 or len(b) < 2:
        raise c.fail(f"{c.name(0)} {fmt(a)} and {c.name(1)} {fmt(b)} must both have rank 2 or more")
    m, k = (a[-1], a[-2]) if o.adj_x else (a[-2], a[-1])
    k2, n = (b[-1], b[-2]) if o.adj_y else (b[-2], b[-1])
    if k != k2:
        raise c.fail(f"inner dimensions differ: {k} of {c.name(0)} {fmt(a)}, {k2} of {c.name(1)} {fmt(b)}")
    try:
        batch = tuple(np.broadcast_shapes(a[:-2], b[:-2]))
    except ValueError:
        raise c.fail(f"batch dimensions of {fmt(a)} and {fmt(b)} do not broadcast") from None
    if c.eight_bit:
        c.quantized(0, 1, "out")
    return [batch + (m, n)]


def pool(c: OpCheck):
    c.arity(1, 1, 1)
    x = c.rank(0, 4, positive=True)
    kh, kw = c.option("filter_height", 1), c.option("filter_width", 1)
    oh, ow = check_window(c, x, kh, kw, dilated=False)
    if c.eight_bit:
        c.quantized("out")
    return [(x[0], oh, ow, x[3])]


def l2_pool(c: OpCheck):
    out = pool(c)
    float_in_out(c)
    return out


def reduce(c: OpCheck):
    c.arity(2, 2, 1)
    x = c.shape(0)
    axes = c.ints(1, "axes")
    if axes is None:
        return [None]
    picked = {c.axis(a, len(x), "reduction axis") for a in axes}
    if c.op.type in (OpType.REDUCE_MAX, OpType.REDUCE_MIN) and any(x[a] == 0 for a in picked):
        raise c.fail(f"{c.name(0)} has shape {fmt(x)}; cannot take a maximum or minimum over an empty axis")
    if c.eight_bit:
        if c.op.type is OpType.MEAN and any(x[a] == 0 for a in picked):   # LiteRT's integer mean divides by 0
            raise c.fail(f"{c.name(0)} has shape {fmt(x)}; an 8-bit mean over an empty axis has no element to "
                         f"divide by")
        c.quantized(0, "out")
    if c.opts.keep_dims:
        return [tuple(1 if a in picked else d for a, d in enumerate(x))]
    return [tuple(d for a, d in enumerate(x) if a not in picked)]



def check_resize(c: OpCheck):
    c.arity(2, 2, 1)
    x = c.rank(0, 4, positive=True)
    o = c.opts
    if c.op.type is OpType.RESIZE_BILINEAR and o.align_corners and o.half_pixel_centers:
        raise c.fail("options.align_corners and options.half_pixel_centers cannot both be set")
    size = c.ints(1, "size", size=2)
    if size is None:
        return [None]
    if min(size) < 1:
        raise c.fail(f"{c.name(1)} asks for output size {size}; both must be positive")
    return [(x[0], size[0], size[1], x[3])]


# UNIDIRECTIONAL_SEQUENCE_LSTM input slots (tflite/kernels/lstm_shared.h).
_W_X, _W_H, _PEEP, _LSTM_BIAS = (1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11), (12, 13, 14, 15)
_PROJ_W, _PROJ_B, _H_STATE, _C_STATE, _NORM = 16, 17, 18, 19, (20, 21, 22, 23)


def lstm(c: OpCheck):
    c.arity(1, 24, 1)
    o = c.opts
    x = c.rank(0, 3)
    if c.tensor(0).dtype in EIGHT_BIT:  # lstm_eval's EvalInteger8x8_16 / 8x8_8: no kernel here yet
        raise c.fail(f"{c.name(0)} is {c.tensor(0).dtype.name}: full-integer LSTMs (8-bit activations, 16-bit "
                     f"cell state) are not supported; float32 and dynamic-range (int8 weights) LSTMs are")
    steps, batch, features = (x[0], x[1], x[2]) if o.time_major else (x[1], x[0], x[2])
    for k in (_H_STATE, _C_STATE):
        if not c.tensor(k).is_variable:
            raise c.fail(f"{c.name(k)} (the {'output' if k == _H_STATE else 'cell'} state) must be a variable tensor")
    h_state, c_state = c.rank(_H_STATE, 2), c.rank(_C_STATE, 2)
    units, out = c_state[1], h_state[1]
    if c_state[0] != batch or h_state[0] != batch:
        raise c.fail(f"state shapes {fmt(h_state)} and {fmt(c_state)} do not match batch {batch}")

    def need(k: int, shape: Shape, what: str) -> None:
        got = c.shape(k)
        if got != shape:
            raise c.fail(f"{c.name(k)} ({what}) has shape {fmt(got)}, {fmt(shape)} expected")

    gates = (1, 2, 3) if not c.has(_W_X[0]) else (0, 1, 2, 3)
    for g in gates:
        need(_W_X[g], (units, features), "input weights")
        need(_W_H[g], (units, out), "recurrent weights")
    for k in (*_PEEP, *_LSTM_BIAS, *(n for n in _NORM if n < len(c.op.inputs))):
        if c.has(k):
            need(k, (units,), "per-cell vector")
    if c.has(_PROJ_W):
        need(_PROJ_W, (out, units), "projection weights")
        if c.has(_PROJ_B):
            need(_PROJ_B, (out,), "projection bias")
    elif out != units:
        raise c.fail(f"output state has {out} units, the cell {units}, and there is no projection")
    if c.tensor(0).dtype.np.kind == "f":  # dynamic-range weights: int8, one scale each
        if c.opts.diagonal_recurrent_tensors and any(
                c.has(k) and c.tensor(k).is_constant and c.tensor(k).dtype in EIGHT_BIT for k in _W_H):
            raise c.fail("options.diagonal_recurrent_tensors: a hybrid LSTM with diagonal recurrent weights is "
                         "not supported")
        for k in (*_W_X, *_W_H, *_PEEP, _PROJ_W):
            w = c.tensor(k) if c.has(k) else None
            if w is not None and w.is_constant and w.dtype in EIGHT_BIT:
                if w.dtype is not DType.INT8 or w.quant is None or len(w.quant.scale) != 1:
                    raise c.fail(f"{c.name(k)} is {w.dtype.name} weights of a hybrid LSTM; INT8 with one "
                                 f"quantization scale expected")
    return [(steps, batch, out) if o.time_major else (batch, steps, out)]


def densify(c: OpCheck):
    c.arity(1, 1, 1)
    return [c.shape(0)]


def check_custom(c: OpCheck):
    """A registered custom op checks its inputs and parameters itself; an op no registry knows keeps
    the shapes the file declares (it runs only timing-only, costed from them)."""
    from runtime.ops import custom_ops as custom

    spec = custom.lookup(c.op.custom_code)
    if spec is None:
        return [None] * len(c.op.outputs)
    where = c.graph.describe_op(c.index)
    params = custom.params(spec, c.op.custom_options, where)
    if spec.input_types is not None:
        if len(c.op.inputs) != len(spec.input_types):
            raise c.fail(f"has {len(c.op.inputs)} inputs, {len(spec.input_types)} expected")
        for k, allowed in enumerate(spec.input_types):
            if c.tensor(k).dtype.np.name not in allowed:
                raise c.fail(f"{c.name(k)} is {c.tensor(k).dtype.name}; {' or '.join(sorted(allowed))} expected")
    if spec.output_types is not None:
        if len(c.op.outputs) != len(spec.output_types):
            raise c.fail(f"has {len(c.op.outputs)} outputs, {len(spec.output_types)} expected")
        for j, want in enumerate(spec.output_types):
            if c.out_tensor(j).dtype.np.name != want:
                raise c.fail(f"{c.out_name(j)} is {c.out_tensor(j).dtype.name}, {want} expected")
    if spec.shapes is None:
        return [None] * len(c.op.outputs)
    try:
        outs = [tuple(int(d) for d in s) for s in spec.shapes([c.shape(k) for k in range(len(c.op.inputs))], params)]
    except (ValueError, TypeError) as exc:
        raise c.fail(str(exc)) from None
    if len(outs) != len(c.op.outputs) or any(d < 0 for s in outs for d in s):
        raise c.fail(f"computes output shapes {[list(s) for s in outs]} for {len(c.op.outputs)} outputs")
    return outs
