"""Post-training quantizers (float16 weights, dynamic range, full int8) that rewrite a float Graph
the way TFLite's converter does, so LiteRT loads and runs the result.

Conventions copied from TFLite's converter (TF 2.21, checked on models it converted):
- float16: every float32 constant is stored as FLOAT16 (clamped to +-65504, round to nearest even)
  and widened back by a DEQUANTIZE (version 3) placed before the first op.
- dynamic range: constant weights of CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV
  (per channel, axis 0 / 3 / 0 / 0), BATCH_MATMUL and UNIDIRECTIONAL_SEQUENCE_LSTM (per tensor) with
  >= 1024 elements become symmetric int8 in [-127, 127]; FULLY_CONNECTED, BATCH_MATMUL and the LSTM
  get asymmetric_quantize_inputs.
- int8: activations per tensor, asymmetric over the calibrated range widened to include 0; weights
  symmetric per channel; biases int32 at s_in * s_w[c]; fixed outputs for SOFTMAX, LOGISTIC, TANH
  and LOG_SOFTMAX; ops that move values without rescaling share one scale and zero point across
  their inputs and outputs; a requantizing QUANTIZE goes in front of a shared group's input whose
  parameters are already fixed.
- op versions as tflite/tools/versioning/op_version.cc gives them, then raised to the largest
  version among ops of the same type, since the converter writes one operator code per builtin.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable

import numpy as np

from runtime.errors import ModelError
from runtime.graph import DType, Graph, Op, QuantParams, Signature, Tensor
from runtime.optypes import OpType

__all__ = ["MODES", "quantize", "to_float16", "to_dynamic_range", "to_int8"]

MODES = ("float16", "dynamic_range", "int8")

_FP16_MAX = 65504.0
_HYBRID_MIN_ELEMENTS = 1024  # the converter leaves smaller weights in float
_INT8_MIN, _INT8_MAX = -128, 127
_INT32 = np.iinfo(np.int32)


# -- public API ---------------------------------------------------------------------------------


def quantize(graph: Graph, mode: str, representative_data: Any = None, **kw: Any) -> Graph:
    """Quantize `graph` in one of MODES; int8 needs a representative dataset (and takes io=)."""
    if mode not in MODES:
        raise ModelError(f"unknown quantization mode '{mode}'; known: {', '.join(MODES)}")
    if mode == "int8":
        if representative_data is None:
            raise ModelError("int8 quantization needs a representative dataset (representative_data=) "
                             "to calibrate activation ranges")
        return to_int8(graph, representative_data, **kw)
    if representative_data is not None or kw:
        extra = ["representative_data"] * (representative_data is not None) + sorted(kw)
        raise ModelError(f"quantization mode '{mode}' takes no {', '.join(extra)}")
    return to_float16(graph) if mode == "float16" else to_dynamic_range(graph)


def to_float16(graph: Graph) -> Graph:
    """Store every float32 constant as float16 followed by a DEQUANTIZE to float32."""
    _require_float(graph, "float16")
    rw = _Rewriter(graph)
    widened: dict[int, int] = {}
    for op in graph.ops:
        for t in op.inputs:
            tensor = graph.tensors[t] if t >= 0 else None
            if (tensor is None or t in widened or not tensor.is_constant or tensor.is_variable
                    or tensor.dtype is not DType.FLOAT32):
                continue
            half = np.clip(tensor.data, -_FP16_MAX, _FP16_MAX).astype(np.float16)
            rw.tensors[t] = dataclasses.replace(tensor, dtype=DType.FLOAT16, data=half)
            widened[t] = rw.add(Tensor(f"{tensor.name}/dequantize", tensor.shape, DType.FLOAT32))
            rw.prologue.append(Op(OpType.DEQUANTIZE, (t,), (widened[t],), version=3))
    rw.ops = [_swap_inputs(op, widened) for op in graph.ops]
    return rw.finish()


# (weight inputs, per-channel axis or None for per tensor) of the ops with hybrid kernels.
_HYBRID_WEIGHTS = {
    OpType.CONV_2D: ((1,), 0),
    OpType.DEPTHWISE_CONV_2D: ((1,), 3),
    OpType.FULLY_CONNECTED: ((1,), 0),
    OpType.TRANSPOSE_CONV: ((1,), 0),
    OpType.BATCH_MATMUL: ((1,), None),
    # input-to-gate and recurrent-to-gate matrices, peepholes, projection
    OpType.UNIDIRECTIONAL_SEQUENCE_LSTM: ((1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 16), None),
}

# Ops whose options carry the flag; the converter sets it on every hybrid op that has one.
_ASYMMETRIC_INPUTS = frozenset({OpType.FULLY_CONNECTED, OpType.BATCH_MATMUL, OpType.UNIDIRECTIONAL_SEQUENCE_LSTM})


def to_dynamic_range(graph: Graph) -> Graph:
    """Weights of >= 1024 elements become symmetric int8; activations stay float32. An LSTM is
    converted only when all its weights qualify (its hybrid kernel takes all int8 or none)."""
    _require_float(graph, "dynamic range")
    rw = _Rewriter(graph)
    made: dict[tuple[int, int | None], int] = {}
    for op in graph.ops:
        slots = _hybrid_slots(op, graph)
        if not slots:
            rw.ops.append(op)
            continue
        axis = _HYBRID_WEIGHTS[op.type][1]
        inputs = list(op.inputs)
        for k in slots:
            w = op.inputs[k]
            if (w, axis) not in made:
                made[w, axis] = rw.add(_symmetric_weights(graph.tensors[w], axis, rounding=_quantize_f64_even))
            inputs[k] = made[w, axis]
        options = op.options
        if op.type in _ASYMMETRIC_INPUTS:
            options = dataclasses.replace(options, asymmetric_quantize_inputs=True)
        op = dataclasses.replace(op, inputs=tuple(inputs), options=options)
        rw.ops.append(dataclasses.replace(op, version=max(op.version, _hybrid_version(op, rw.tensors))))
    return rw.finish()


def _hybrid_slots(op: Op, graph: Graph) -> list[int]:
    """Input positions of the weights to quantize (empty: the op stays float)."""
    if op.type not in _HYBRID_WEIGHTS:
        return []
    present = [k for k in _HYBRID_WEIGHTS[op.type][0] if k < len(op.inputs) and op.inputs[k] >= 0]
    big = [k for k in present if graph.tensors[op.inputs[k]].is_constant
           and graph.tensors[op.inputs[k]].dtype is DType.FLOAT32
           and graph.tensors[op.inputs[k]].data.size >= _HYBRID_MIN_ELEMENTS]
    if op.type is OpType.UNIDIRECTIONAL_SEQUENCE_LSTM and big != present:
        return []
    return big


def to_int8(graph: Graph, representative_data: Any, io: str = "int8") -> Graph:
    """Full-integer quantization calibrated on `representative_data` (an iterable of samples, or
    a callable returning one; a sample is an array, a list of arrays, or a dict by input name).
    io="int8" makes the model's inputs and outputs int8; io="float" keeps them float32 with a
    QUANTIZE in front and a DEQUANTIZE behind."""
    if io not in ("int8", "float"):
        raise ModelError(f"io must be 'int8' or 'float', not '{io}'")
    _require_float(graph, "int8")
    _check_int8_support(graph)
    ranges = _calibrate(graph, representative_data)
    return _Int8Rewriter(graph, ranges, io).run()


# -- shared machinery ---------------------------------------------------------------------------


class _Rewriter:
    """Tensors and ops of the graph being built: prologue ops, then the body; finish() drops
    tensors nothing uses any more, renumbers, and settles op versions."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.tensors: list[Tensor] = list(graph.tensors)
        self.prologue: list[Op] = []
        self.ops: list[Op] = []
        self.epilogue: list[Op] = []

    def add(self, tensor: Tensor) -> int:
        self.tensors.append(tensor)
        return len(self.tensors) - 1

    def finish(self) -> Graph:
        g = self.graph
        inputs, outputs = g.inputs, g.outputs
        ops = _unify_versions(self.prologue + self.ops + self.epilogue)
        used = sorted({t for op in ops for t in (*op.inputs, *op.outputs) if t >= 0} | set(inputs) | set(outputs))
        new = {old: k for k, old in enumerate(used)}
        new[-1] = -1

        def sig_map(pairs):
            return tuple((n, new[t]) for n, t in pairs)

        return Graph(
            tensors=tuple(self.tensors[t] for t in used),
            ops=tuple(dataclasses.replace(op, inputs=tuple(new[t] for t in op.inputs),
                                          outputs=tuple(new[t] for t in op.outputs)) for op in ops),
            inputs=tuple(new[t] for t in inputs), outputs=tuple(new[t] for t in outputs), name=g.name,
            signatures=tuple(Signature(s.key, sig_map(s.inputs), sig_map(s.outputs)) for s in g.signatures),
        ).validate()


def _swap_inputs(op: Op, swap: dict[int, int]) -> Op:
    return dataclasses.replace(op, inputs=tuple(swap.get(t, t) for t in op.inputs))


def _unify_versions(ops: list[Op]) -> list[Op]:
    """One operator code per builtin, at the largest version any of its ops needs (what
    op_version.cc's UpdateOpVersion leaves in a converted model)."""
    top: dict[OpType, int] = {}
    for op in ops:
        top[op.type] = max(top.get(op.type, 1), op.version)
    return [dataclasses.replace(op, version=top[op.type]) for op in ops]


def _require_float(graph: Graph, mode: str) -> None:
    for t, tensor in enumerate(graph.tensors):
        if tensor.quant is not None or tensor.dtype is DType.FLOAT16:
            raise ModelError(f"{mode} quantization needs a float model, but {graph.describe_tensor(t)} is "
                             f"already {tensor.dtype.name}{' quantized' if tensor.quant else ''}")


def _round_half_away(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return np.trunc(x + np.copysign(0.5, x))


def _quantize_f32(values: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """round(v / s) as the converter computes it: v times the float32 reciprocal of s, in float32,
    ties away from zero. Every weight and bias of six converter-made int8 models matches this
    (a float32 or float64 division each miss one value in a few thousand)."""
    inverse = np.float32(1) / np.asarray(scale, np.float32)
    return _round_half_away(np.asarray(values, np.float32) * inverse)


def _channel_shape(ndim: int, axis: int | None) -> tuple[int, ...]:
    shape = [1] * ndim
    if axis is not None:
        shape[axis] = -1
    return tuple(shape)


def _quantize_f64_even(values: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """round(v / s) as the converter's dynamic-range pass computes it (MLIR's quantizer): a float64
    division, ties to even. Its weights match this and not _quantize_f32 (94.5 in float32 is
    94.49999... in float64)."""
    return np.rint(np.asarray(values, np.float64) / np.asarray(scale, np.float32).astype(np.float64))


def _symmetric_weights(tensor: Tensor, axis: int | None,
                       rounding: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None) -> Tensor:
    """int8 in [-127, 127] with zero point 0; scale = max|w| / 127 per channel along `axis`
    (per tensor when None), as the converter computes it (matches its scales bit for bit).
    `rounding` maps values and scales to steps (default: the full-integer path's)."""
    w = np.asarray(tensor.data, np.float64)
    reduce = tuple(d for d in range(w.ndim) if d != axis) if axis is not None else None
    peak = np.abs(w).max(axis=reduce) if w.size else np.zeros(w.shape[axis] if axis is not None else ())
    scale = np.atleast_1d((peak / 127.0).astype(np.float32))
    # An all-zero channel needs some positive scale; any works for its weights, and a small one
    # keeps that channel's bias precise.
    positive = scale[scale > 0]
    scale[scale == 0] = positive.min() if positive.size else np.float32(1.0)
    q = np.clip((rounding or _quantize_f32)(tensor.data, scale.reshape(_channel_shape(w.ndim, axis))), -127, 127)
    quant = QuantParams(tuple(float(s) for s in scale), (0,) * scale.size, axis if axis is not None else 0)
    return Tensor(tensor.name, tensor.shape, DType.INT8, quant, q.astype(np.int8))


def _hybrid_version(op: Op, tensors: list[Tensor]) -> int:
    """op_version.cc for float input, int8 weights, float output."""
    weights = tensors[op.inputs[1]]
    per_channel = weights.quant is not None and weights.quant.per_channel
    if op.type is OpType.CONV_2D:
        return 5 if per_channel else 2
    if op.type is OpType.DEPTHWISE_CONV_2D:
        return 6 if per_channel else 4
    if op.type is OpType.FULLY_CONNECTED:
        return 12 if per_channel else 9
    if op.type is OpType.TRANSPOSE_CONV:
        return _transpose_conv_version(op, 2)
    if op.type is OpType.UNIDIRECTIONAL_SEQUENCE_LSTM:
        return 4 if op.options.diagonal_recurrent_tensors else 3
    return 4  # BATCH_MATMUL with asymmetric_quantize_inputs


def _transpose_conv_version(op: Op, base: int) -> int:
    if op.options is not None and getattr(op.options, "fused_activation_function", 0):
        return 4
    return 3 if len(op.inputs) > 3 and op.inputs[3] >= 0 else base


# -- int8: which ops, calibration, parameters -------------------------------------------------------

# Output parameters the int8 kernels require (SOFTMAX/LOGISTIC check them in Prepare).
_FIXED_OUTPUT = {
    OpType.SOFTMAX: (1 / 256, -128),
    OpType.LOGISTIC: (1 / 256, -128),
    OpType.TANH: (1 / 128, 0),
    OpType.LOG_SOFTMAX: (16 / 256, 127),
}

# Ops that copy or pick raw values: output(s) keep the first input's scale and zero point.
_SAME_AS_INPUT = frozenset({
    OpType.RESHAPE, OpType.SQUEEZE, OpType.EXPAND_DIMS, OpType.TRANSPOSE, OpType.STRIDED_SLICE,
    OpType.SLICE, OpType.GATHER, OpType.DEPTH_TO_SPACE, OpType.SPACE_TO_DEPTH, OpType.PAD,
    OpType.PADV2, OpType.MIRROR_PAD, OpType.MAX_POOL_2D, OpType.AVERAGE_POOL_2D, OpType.REDUCE_MAX,
    OpType.REDUCE_MIN, OpType.RESIZE_BILINEAR, OpType.RESIZE_NEAREST_NEIGHBOR, OpType.UNPACK,
    OpType.SPLIT, OpType.SPLIT_V,
})

# Ops whose every value input shares the output's parameters (int8 CONCATENATION checks it).
_ALL_SHARED = frozenset({OpType.CONCATENATION, OpType.PACK, OpType.MAXIMUM, OpType.MINIMUM})

# Ops with their own output parameters (they rescale).
_RESCALING = frozenset({
    OpType.CONV_2D, OpType.DEPTHWISE_CONV_2D, OpType.FULLY_CONNECTED, OpType.TRANSPOSE_CONV,
    OpType.BATCH_MATMUL, OpType.ADD, OpType.SUB, OpType.MUL, OpType.SQUARED_DIFFERENCE, OpType.RELU,
    OpType.RELU6, OpType.RELU_N1_TO_1, OpType.PRELU, OpType.LEAKY_RELU, OpType.HARD_SWISH,
    OpType.MEAN, OpType.SUM,
})

# Ops that read int8 values but write integers with no parameters (indices, shapes).
_INTEGER_RESULT = frozenset({OpType.SHAPE, OpType.ARG_MAX, OpType.ARG_MIN})

_INT8_OPS = _SAME_AS_INPUT | _ALL_SHARED | _RESCALING | _INTEGER_RESULT | frozenset(_FIXED_OUTPUT)

# (activation input, weights input, bias input, per-channel axis) of the ops with weights.
_WEIGHTED = {
    OpType.CONV_2D: (0, 1, 2, 0),
    OpType.DEPTHWISE_CONV_2D: (0, 1, 2, 3),
    OpType.FULLY_CONNECTED: (0, 1, 2, 0),
    OpType.TRANSPOSE_CONV: (2, 1, 3, 0),
}

# Where the data input of a _SAME_AS_INPUT op is, when not input 0.
_DATA_INPUT = {OpType.SPLIT: 1}


def _float_activation(tensor: Tensor) -> bool:
    return tensor.dtype is DType.FLOAT32 and not tensor.is_constant


def _check_int8_support(graph: Graph) -> None:
    for i, op in enumerate(graph.ops):
        touches_float = any(t >= 0 and _float_activation(graph.tensors[t]) for t in (*op.inputs, *op.outputs))
        if touches_float and op.type not in _INT8_OPS:
            raise ModelError(f"{graph.describe_op(i)} has no int8 form in TFLite; the model cannot be "
                             f"fully integer-quantized")
        if op.type in _WEIGHTED:
            _, w, _, _ = _WEIGHTED[op.type]
            if w >= len(op.inputs) or op.inputs[w] < 0 or not graph.tensors[op.inputs[w]].is_constant:
                raise ModelError(f"{graph.describe_op(i)} has non-constant weights; int8 quantization "
                                 f"needs constant weights")


def _samples(graph: Graph, representative_data: Any) -> Iterable[list[np.ndarray]]:
    """Each representative sample as one float32 array per graph input, in input order."""
    data = representative_data() if callable(representative_data) else representative_data
    names = {graph.tensors[t].name: k for k, t in enumerate(graph.inputs)}
    for n, sample in enumerate(data):
        if isinstance(sample, dict):
            arrays = [None] * len(graph.inputs)
            for key, value in sample.items():
                k = names.get(key) if isinstance(key, str) else (list(graph.inputs).index(key)
                                                                 if key in graph.inputs else None)
                if k is None:
                    raise ModelError(f"representative sample {n} names input '{key}', which the model "
                                     f"does not have")
                arrays[k] = value
        elif isinstance(sample, (list, tuple)):
            arrays = list(sample)
        else:
            arrays = [sample]
        if len(arrays) != len(graph.inputs) or any(a is None for a in arrays):
            raise ModelError(f"representative sample {n} gives {len(arrays)} arrays; the model has "
                             f"{len(graph.inputs)} inputs")
        out = []
        for k, (t, a) in enumerate(zip(graph.inputs, arrays)):
            a = np.asarray(a, np.float32)
            want = graph.tensors[t].shape
            if a.shape != want:
                raise ModelError(f"representative sample {n}: array of shape {list(a.shape)} for "
                                 f"{graph.describe_tensor(t)} of shape {list(want)}")
            out.append(a)
        yield out


def _calibrate(graph: Graph, representative_data: Any) -> dict[int, tuple[float, float]]:
    """Min and max of every float activation over all samples, running the float graph (the
    converter's calibrator keeps the overall min and max the same way)."""
    from runtime.interpreter import Interpreter  # the interpreter imports the zoo's neighbours

    it = Interpreter(graph=graph)
    it.allocate_tensors()
    watched = [t for t, tensor in enumerate(graph.tensors) if _float_activation(tensor)]
    lo = np.full(len(graph.tensors), np.inf)
    hi = np.full(len(graph.tensors), -np.inf)
    count = 0
    for arrays in _samples(graph, representative_data):
        for t, a in zip(graph.inputs, arrays):
            it.set_tensor(t, a)
        it.invoke()
        for t in watched:
            v = it.tensor(t)()
            if v is not None and v.size:
                lo[t] = min(lo[t], float(v.min()))
                hi[t] = max(hi[t], float(v.max()))
        count += 1
    if count == 0:
        raise ModelError("the representative dataset gave no samples; int8 calibration needs at least one")
    return {t: (lo[t], hi[t]) for t in watched if np.isfinite(lo[t]) and np.isfinite(hi[t])}


def _activation_params(lo: float, hi: float) -> tuple[float, int]:
    """Asymmetric int8 over [min(lo, 0), max(hi, 0)]: scale = range / 255 and the zero point
    from the minimum, rounded and clamped (the converter's nudged-zero-point formula)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi == lo:
        # An all-zero tensor: the converter writes a range of +-1e-6 centred on zero point 0.
        return float(np.float32(2e-6 / 255)), 0
    scale = (hi - lo) / 255.0
    zp = int(np.clip(_round_half_away(_INT8_MIN - lo / scale), _INT8_MIN, _INT8_MAX))
    return float(np.float32(scale)), zp


class _Groups:
    """Union-find over tensors that must share quantization parameters."""

    def __init__(self):
        self.parent: dict[int, int] = {}

    def find(self, t: int) -> int:
        root = t
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        while self.parent.get(t, t) != root:
            self.parent[t], t = root, self.parent[t]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


class _Int8Rewriter(_Rewriter):
    """Decides every activation's parameters, then rewrites tensors and ops as int8."""

    def __init__(self, graph: Graph, ranges: dict[int, tuple[float, float]], io: str):
        super().__init__(graph)
        self.ranges = dict(ranges)
        self.io = io
        self.groups = _Groups()
        self.fixed: dict[int, tuple[float, int]] = {}  # group root -> required (scale, zp)
        self.params: dict[int, tuple[float, int]] = {}
        self.requant_before: dict[int, list[tuple[int, int]]] = {}  # op index -> [(src, new tensor)]
        self.chain_outputs: set[int] = set()  # outputs of ops that keep their input's params
        self.multi_results: set[int] = set()  # outputs of ops whose several inputs share params
        self.multi_operands: set[int] = set()  # the inputs of those
        self.const_cache: dict[tuple, int] = {}
        self.const_params: dict[int, tuple[float, int]] = {}  # float constants inside a shared group
        self.joined: set[int] = set()

    def run(self) -> Graph:
        ops = [self._plan_groups(i, op) for i, op in enumerate(self.graph.ops)]
        self._settle_params()
        for t, (scale, zp) in self.params.items():
            tensor = self.tensors[t]
            self.tensors[t] = dataclasses.replace(tensor, dtype=DType.INT8, quant=QuantParams((scale,), (zp,)))
        for i, op in enumerate(ops):
            for src, new in self.requant_before.get(i, []):
                self.ops.append(Op(OpType.QUANTIZE, (src,), (new,), version=1))
            self.ops.append(self._rewrite_op(op))
        if self.io == "float":
            self._float_io()
        return self.finish()

    # -- which tensors share parameters --

    def _plan_groups(self, i: int, op: Op) -> Op:
        """Record sharing for one op; returns it with inputs swapped for requantized copies."""
        tensors = self.graph.tensors
        values = [t for t in op.inputs if t >= 0 and tensors[t].dtype is DType.FLOAT32]
        outs = [t for t in op.outputs if tensors[t].dtype is DType.FLOAT32]
        if op.type in _FIXED_OUTPUT:
            for t in outs:
                self.fixed[self.groups.find(t)] = _FIXED_OUTPUT[op.type]
        elif op.type in _SAME_AS_INPUT or (op.type in _ALL_SHARED and len(values) == 1):
            data = op.inputs[_DATA_INPUT.get(op.type, 0)]
            for t in outs:
                self._join(data, t)
                self.chain_outputs.add(t)
            if op.type is OpType.PADV2 and len(op.inputs) > 2 and op.inputs[2] >= 0:
                self._join(data, op.inputs[2])  # the fill value is stored with the output's params
        elif op.type in _ALL_SHARED:
            swap = {}
            for t in values:
                if self.groups.find(t) in self.fixed and not tensors[t].is_constant:
                    # Its parameters are pinned elsewhere: requantize a copy into the shared group.
                    new = self.add(dataclasses.replace(tensors[t], name=f"{tensors[t].name}/requantized"))
                    self.ranges[new] = self.ranges.get(t, (0.0, 0.0))
                    self.requant_before.setdefault(i, []).append((t, new))
                    swap[t] = new
            for t in values:
                self._join(outs[0], swap.get(t, t))
                self.multi_operands.add(swap.get(t, t))
            self.multi_results.add(outs[0])
            op = _swap_inputs(op, swap)
        return op

    def _join(self, a: int, b: int) -> None:
        self.joined.update((a, b))
        ra, rb = self.groups.find(a), self.groups.find(b)
        if ra == rb:
            return
        fa, fb = self.fixed.pop(ra, None), self.fixed.pop(rb, None)
        self.groups.union(a, b)
        if fa or fb:
            self.fixed[self.groups.find(a)] = fa or fb

    def _settle_params(self) -> None:
        """One (scale, zp) per group, chosen as the converter's RemoveRedundantStatsOps leaves it:
        fixed if an op requires it; else the range of the last CONCATENATION/MAXIMUM/... result
        (a multi-input op's inputs take its output's parameters, back through ops that keep
        parameters); else the range of the chain's first tensor (a pool or reshape takes its
        input's parameters)."""
        members: dict[int, list[int]] = {}
        for t, tensor in enumerate(self.tensors):
            if _float_activation(tensor) or t in self.joined:
                members.setdefault(self.groups.find(t), []).append(t)
        for root, ts in members.items():
            if root in self.fixed:
                params = self.fixed[root]
            else:
                params = _activation_params(*self._group_range(ts))
            for t in ts:
                (self.const_params if self.tensors[t].is_constant else self.params)[t] = params

    def _group_range(self, ts: list[int]) -> tuple[float, float]:
        live = [t for t in ts if not self.tensors[t].is_constant]
        deciders = ([t for t in live if t in self.multi_results and t not in self.multi_operands]
                    or [t for t in live if t not in self.chain_outputs and t not in self.multi_operands]
                    or live or ts)
        spans = [self._range(t) for t in deciders]
        return min(lo for lo, _ in spans), max(hi for _, hi in spans)

    def _range(self, t: int) -> tuple[float, float]:
        tensor = self.tensors[t]
        if tensor.is_constant:
            return float(np.min(tensor.data, initial=0.0)), float(np.max(tensor.data, initial=0.0))
        return self.ranges.get(t, (0.0, 0.0))

    # -- rewriting ops --

    def _rewrite_op(self, op: Op) -> Op:
        if not any(t in self.params for t in (*op.inputs, *op.outputs)):
            return op  # integer bookkeeping (shapes, indices) stays as it is
        inputs = list(op.inputs)
        if op.type in _WEIGHTED:
            x, w, b, axis = _WEIGHTED[op.type]
            weights = self._const(("w", inputs[w], axis),
                                  lambda: _symmetric_weights(self.graph.tensors[inputs[w]], axis))
            inputs[w] = weights
            s_w = self.tensors[weights].quant.scale
            s_in = self.tensors[inputs[x]].quant.scale[0]
            if b < len(inputs) and inputs[b] >= 0:
                inputs[b] = self._bias(inputs[b], s_in, s_w)
            elif op.type in (OpType.CONV_2D, OpType.DEPTHWISE_CONV_2D):
                # The int8 conv kernels require a bias; the converter adds a zero one.
                cout = self.tensors[weights].shape[axis]
                inputs[b:b + 1] = [self._bias(None, s_in, s_w, cout, f"{self.tensors[op.outputs[0]].name}/bias")]
        for k, t in enumerate(inputs):
            if t >= 0 and self.tensors[t].is_constant and self.tensors[t].dtype is DType.FLOAT32:
                inputs[k] = self._other_const(op, k, t)
        op = dataclasses.replace(op, inputs=tuple(inputs))
        return dataclasses.replace(op, version=max(op.version, _int8_version(op, self.tensors)))

    def _const(self, key: tuple, make: Callable[[], Tensor]) -> int:
        if key not in self.const_cache:
            self.const_cache[key] = self.add(make())
        return self.const_cache[key]

    def _bias(self, t: int | None, s_in: float, s_w: tuple[float, ...], n: int = 0, name: str = "") -> int:
        """int32 bias at scale s_in * s_w[c] (float32 scales multiplied, stored as float32)."""
        scale = (np.float64(np.float32(s_in)) * np.asarray(s_w, np.float32).astype(np.float64)).astype(np.float32)
        if t is None:
            data = np.zeros(n, np.float32)
        else:
            data = np.asarray(self.graph.tensors[t].data, np.float32)
            name = self.graph.tensors[t].name
        scale = np.broadcast_to(scale, data.shape).copy()

        def make() -> Tensor:
            q = np.clip(_quantize_f32(data, scale), _INT32.min, _INT32.max)
            quant = QuantParams(tuple(float(s) for s in scale), (0,) * scale.size, 0)
            return Tensor(name, data.shape, DType.INT32, quant, q.astype(np.int32))
        return self._const(("b", t if t is not None else name, tuple(scale.tolist())), make)

    def _other_const(self, op: Op, k: int, t: int) -> int:
        """A float constant that is not a conv/FC weight: shared-group constants take the group's
        parameters, PRELU's alpha and BATCH_MATMUL's right side are symmetric like weights,
        anything else (an ADD or MUL operand) is asymmetric over its own values."""
        tensor = self.graph.tensors[t]
        if t in self.const_params:
            params = self.const_params[t]
        elif op.type in (OpType.PRELU, OpType.BATCH_MATMUL):
            return self._const(("sym", t), lambda: _symmetric_weights(tensor, None))
        else:
            params = _activation_params(*self._range(t))

        def make() -> Tensor:
            q = _quantize_f32(tensor.data, np.float32(params[0])) + params[1]
            return Tensor(tensor.name, tensor.shape, DType.INT8, QuantParams((params[0],), (params[1],)),
                          np.clip(q, _INT8_MIN, _INT8_MAX).astype(np.int8))
        return self._const(("asym", t, params), make)

    def _float_io(self) -> None:
        """Keep float32 tensors at the model's edges: QUANTIZE after each input, DEQUANTIZE
        before each output; inside, ops use int8 twins."""
        original = self.graph.tensors
        swap: dict[int, int] = {}
        for t in (*self.graph.inputs, *self.graph.outputs):
            if t in swap or t not in self.params:
                continue
            twin = self.add(dataclasses.replace(self.tensors[t], name=f"{original[t].name}/int8"))
            self.tensors[t] = original[t]
            swap[t] = twin
        self.ops = [dataclasses.replace(op, inputs=tuple(swap.get(t, t) for t in op.inputs),
                                        outputs=tuple(swap.get(t, t) for t in op.outputs)) for op in self.ops]
        self.prologue = [Op(OpType.QUANTIZE, (t,), (swap[t],), version=1)
                         for t in self.graph.inputs if t in swap]
        self.epilogue = [Op(OpType.DEQUANTIZE, (swap[t],), (t,), version=2)
                         for t in dict.fromkeys(self.graph.outputs) if t in swap]


# int8 versions from tflite/tools/versioning/op_version.cc (int8 input and output).
_INT8_VERSION = {
    OpType.CONV_2D: 3, OpType.DEPTHWISE_CONV_2D: 3, OpType.FULLY_CONNECTED: 4, OpType.TRANSPOSE_CONV: 2,
    OpType.BATCH_MATMUL: 2, OpType.ADD: 2, OpType.SUB: 2, OpType.MUL: 2, OpType.SQUARED_DIFFERENCE: 2,
    OpType.AVERAGE_POOL_2D: 2, OpType.MAX_POOL_2D: 2, OpType.CONCATENATION: 2, OpType.SOFTMAX: 2,
    OpType.LOG_SOFTMAX: 2, OpType.MEAN: 2, OpType.SUM: 2, OpType.REDUCE_MAX: 2, OpType.REDUCE_MIN: 2,
    OpType.LOGISTIC: 2, OpType.TANH: 2, OpType.RELU: 2, OpType.RELU6: 2, OpType.PAD: 2, OpType.PADV2: 2,
    OpType.MIRROR_PAD: 2, OpType.STRIDED_SLICE: 2, OpType.SLICE: 2, OpType.TRANSPOSE: 2, OpType.SPLIT: 2,
    OpType.SPLIT_V: 2, OpType.PACK: 2, OpType.UNPACK: 2, OpType.GATHER: 2, OpType.MAXIMUM: 2,
    OpType.MINIMUM: 2, OpType.DEPTH_TO_SPACE: 2, OpType.SPACE_TO_DEPTH: 2, OpType.RESIZE_BILINEAR: 2,
    OpType.RESIZE_NEAREST_NEIGHBOR: 2, OpType.DEQUANTIZE: 2, OpType.ARG_MAX: 2, OpType.ARG_MIN: 2,
}


def _int8_version(op: Op, tensors: list[Tensor]) -> int:
    o = op.options
    t = op.type
    if t is OpType.FULLY_CONNECTED:
        if len(op.inputs) == 2:
            return 6
        return 5 if o is not None and o.keep_num_dims else 4
    if t is OpType.TRANSPOSE_CONV:
        return _transpose_conv_version(op, 2)
    if t is OpType.CONV_2D:
        x, w = tensors[op.inputs[0]].shape, tensors[op.inputs[1]].shape
        return 6 if len(x) == 4 and len(w) == 4 and x[3] != w[3] else 3
    if t in (OpType.RESIZE_BILINEAR, OpType.RESIZE_NEAREST_NEIGHBOR):
        if o is not None and (o.half_pixel_centers or (t is OpType.RESIZE_NEAREST_NEIGHBOR and o.align_corners)):
            return 3
    if t is OpType.STRIDED_SLICE and o is not None:
        if o.offset:
            return 8
        if o.ellipsis_mask or o.new_axis_mask:
            return 6
        if len(tensors[op.inputs[0]].shape) > 4:
            return 4
    if t is OpType.MUL:
        a, b, y = (tensors[k].quant.scale[0] for k in (*op.inputs[:2], op.outputs[0]))
        if a * b / y >= 1.0:
            return 3
    if t in (OpType.SUB, OpType.MAXIMUM, OpType.MINIMUM):
        shapes = [tensors[k].shape for k in op.inputs[:2]]
        if shapes[0] != shapes[1] and max(map(len, shapes)) > 4:
            return 3
    if t in (OpType.PAD, OpType.PADV2) and len(tensors[op.inputs[0]].shape) > 4:
        return 4
    return _INT8_VERSION.get(t, 1)
