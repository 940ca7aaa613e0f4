"""Full-integer (int8) quantization: calibration, parameter sharing, fixed outputs, op versions.

The rules mirror TFLite's converter; runtime/zoo/quantize.py documents them and holds the shared
rewriting machinery.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable

import numpy as np

from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Op, QuantParams, Tensor
from runtime.ir.optypes import OpType
from runtime.ops.evaluate import evaluate
from runtime.zoo.quant_base import (INT8_MIN, INT32, Rewriter, quantize_f32, round_half_away,
                                  swap_inputs, symmetric_weights, transpose_conv_version)


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
RESCALING = frozenset({
    OpType.CONV_2D, OpType.DEPTHWISE_CONV_2D, OpType.FULLY_CONNECTED, OpType.TRANSPOSE_CONV,
    OpType.BATCH_MATMUL, OpType.ADD, OpType.SUB, OpType.MUL, OpType.SQUARED_DIFFERENCE, OpType.RELU,
    OpType.RELU6, OpType.RELU_N1_TO_1, OpType.PRELU, OpType.LEAKY_RELU, OpType.HARD_SWISH,
    OpType.MEAN, OpType.SUM,
})

# Ops that read int8 values but write integers with no parameters (indices, shapes).
_INTEGER_RESULT = frozenset({OpType.SHAPE, OpType.ARG_MAX, OpType.ARG_MIN})

_INT8_OPS = _SAME_AS_INPUT | _ALL_SHARED | RESCALING | _INTEGER_RESULT | frozenset(_FIXED_OUTPUT)

# (activation input, weights input, bias input, per-channel axis) of the ops with weights.
_WEIGHTED = {
    OpType.CONV_2D: (0, 1, 2, 0),
    OpType.DEPTHWISE_CONV_2D: (0, 1, 2, 3),
    OpType.FULLY_CONNECTED: (0, 1, 2, 0),
    OpType.TRANSPOSE_CONV: (2, 1, 3, 0),
}

# Where the data input of a _SAME_AS_INPUT op is, when not input 0.
_DATA_INPUT = {OpType.SPLIT: 1}


def float_activation(tensor: Tensor) -> bool:
    return tensor.dtype is DType.FLOAT32 and not tensor.is_constant


def check_int8_support(graph: Graph, mode: str = "int8", lacking: frozenset[OpType] = frozenset()) -> None:
    """Every op that touches float activations has a `mode` form in TFLite (the int8 set minus
    `lacking`) and constant weights."""
    for i, op in enumerate(graph.ops):
        touches_float = any(t >= 0 and float_activation(graph.tensors[t]) for t in (*op.inputs, *op.outputs))
        if touches_float and (op.type not in _INT8_OPS or op.type in lacking):
            raise ModelError(f"{graph.describe_op(i)} has no {mode} form in TFLite; the model cannot be "
                             f"fully integer-quantized")
        if op.type in _WEIGHTED:
            _, w, _, _ = _WEIGHTED[op.type]
            if w >= len(op.inputs) or op.inputs[w] < 0 or not graph.tensors[op.inputs[w]].is_constant:
                raise ModelError(f"{graph.describe_op(i)} has non-constant weights; {mode} quantization "
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


def calibrate(graph: Graph, representative_data: Any) -> dict[int, tuple[float, float]]:
    """Min and max of every float activation over all samples, running the float graph (the
    converter's calibrator keeps the overall min and max the same way)."""
    watched = [t for t, tensor in enumerate(graph.tensors) if float_activation(tensor)]
    lo = np.full(len(graph.tensors), np.inf)
    hi = np.full(len(graph.tensors), -np.inf)
    count = 0
    for values in evaluate(graph, _samples(graph, representative_data)):
        for t in watched:
            v = values[t]
            if v is not None and v.size:
                lo[t] = min(lo[t], float(v.min()))
                hi[t] = max(hi[t], float(v.max()))
        count += 1
    if count == 0:
        raise ModelError("the representative dataset gave no samples; calibration needs at least one")
    return {t: (lo[t], hi[t]) for t in watched if np.isfinite(lo[t]) and np.isfinite(hi[t])}


def activation_params(lo: float, hi: float, qmin: int = INT8_MIN) -> tuple[float, int]:
    """Asymmetric 8-bit (codes qmin..qmin+255) over [min(lo, 0), max(hi, 0)]: scale = range / 255
    and the zero point from the minimum, rounded and clamped (the converter's nudged-zero-point
    formula, TF's FakeQuant nudging)."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    if hi == lo:
        # An all-zero tensor: the converter writes a range of +-1e-6 centred on the middle code.
        return float(np.float32(2e-6 / 255)), qmin + 128
    scale = (hi - lo) / 255.0
    zp = int(np.clip(round_half_away(qmin - lo / scale), qmin, qmin + 255))
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


class Int8Rewriter(Rewriter):
    """Decides every activation's parameters, then rewrites tensors and ops as int8. The class
    attributes and _weights/_version are what an 8-bit variant (uint8) changes."""

    dtype = DType.INT8
    qmin = INT8_MIN
    fixed_outputs = _FIXED_OUTPUT

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
            self.tensors[t] = dataclasses.replace(tensor, dtype=self.dtype, quant=QuantParams((scale,), (zp,)))
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
        if op.type in self.fixed_outputs:
            for t in outs:
                self.fixed[self.groups.find(t)] = self.fixed_outputs[op.type]
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
            op = swap_inputs(op, swap)
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
            if float_activation(tensor) or t in self.joined:
                members.setdefault(self.groups.find(t), []).append(t)
        for root, ts in members.items():
            if root in self.fixed:
                params = self.fixed[root]
            else:
                params = activation_params(*self._group_range(ts), self.qmin)
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
            weights = self._const(("w", inputs[w], axis), lambda: self._weights(self.graph.tensors[inputs[w]], axis))
            inputs[w] = weights
            s_w = self.tensors[weights].quant.scale
            s_in = self.tensors[inputs[x]].quant.scale[0]
            if b < len(inputs) and inputs[b] >= 0:
                inputs[b] = self._bias(inputs[b], s_in, s_w)
            elif op.type in (OpType.CONV_2D, OpType.DEPTHWISE_CONV_2D):
                # The 8-bit conv kernels require a bias; the converter adds a zero one.
                cout = self.tensors[weights].shape[axis]
                inputs[b:b + 1] = [self._bias(None, s_in, s_w, cout, f"{self.tensors[op.outputs[0]].name}/bias")]
        for k, t in enumerate(inputs):
            if t >= 0 and self.tensors[t].is_constant and self.tensors[t].dtype is DType.FLOAT32:
                inputs[k] = self._other_const(op, k, t)
        op = dataclasses.replace(op, inputs=tuple(inputs))
        return dataclasses.replace(op, version=max(op.version, self._version(op)))

    def _weights(self, tensor: Tensor, axis: int | None) -> Tensor:
        return symmetric_weights(tensor, axis)

    def _version(self, op: Op) -> int:
        return int8_version(op, self.tensors)

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
        if scale.size > 1:  # per-channel weights; one scale stays one (per-tensor uint8)
            scale = np.broadcast_to(scale, data.shape).copy()

        def make() -> Tensor:
            q = np.clip(quantize_f32(data, scale), INT32.min, INT32.max)
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
            return self._const(("sym", t), lambda: self._weights(tensor, None))
        else:
            params = activation_params(*self._range(t), self.qmin)

        def make() -> Tensor:
            q = quantize_f32(tensor.data, np.float32(params[0])) + params[1]
            return Tensor(tensor.name, tensor.shape, self.dtype, QuantParams((params[0],), (params[1],)),
                          np.clip(q, self.qmin, self.qmin + 255).astype(self.dtype.np))
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
INT8_VERSION = {
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


def int8_version(op: Op, tensors: list[Tensor]) -> int:
    o = op.options
    t = op.type
    if t is OpType.FULLY_CONNECTED:
        if len(op.inputs) == 2:
            return 6
        return 5 if o is not None and o.keep_num_dims else 4
    if t is OpType.TRANSPOSE_CONV:
        return transpose_conv_version(op, 2)
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
    return INT8_VERSION.get(t, 1)
