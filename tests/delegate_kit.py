"""Hand-built phone profiles and one-op graphs for the delegate tests."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from runtime.ir.graph import DType, Graph, Op, QuantParams, Tensor
from runtime.ir.optypes import OpType
from sim.cost import Precision
from sim.spec import CopySpec, DramSpec, NnapiDeviceSpec, Profile, UnitKind, UnitSpec

ALL = frozenset(Precision)
FLOAT_OPS = frozenset({"CONV_2D", "DEPTHWISE_CONV_2D", "ADD", "AVERAGE_POOL_2D", "RESHAPE", "SOFTMAX",
                       "PAD", "DEQUANTIZE"})


def unit(name: str, kind: UnitKind) -> UnitSpec:
    rate = {p: 1e9 for p in Precision}
    return UnitSpec(name=name, kind=kind, macs_per_s=rate, elem_per_s=rate, bandwidth=1e10,
                    dispatch_s=1e-6, active_w={p: 1.0 for p in Precision}, idle_w=0.1)


def device(name: str, unit_name: str, level: int, ops, precisions, **kw) -> NnapiDeviceSpec:
    return NnapiDeviceSpec(name=name, unit=unit_name, feature_level=level, ops=frozenset(ops),
                           precisions=frozenset(precisions), **kw)


DEVICES = (
    device("test-gpu", "gpu", 3, FLOAT_OPS, {Precision.FLOAT32, Precision.FLOAT16}),
    device("test-npu", "npu", 4, FLOAT_OPS - {"SOFTMAX"}, {Precision.INT8, Precision.FLOAT16},
           compile_s=0.5, cached_compile_s=0.05,
           preference={"low_power": (0.5, 0.4), "fast_single_answer": (1.2, 1.1)}),
    device("nnapi-reference", "cpu_big", 7, FLOAT_OPS | {"MUL"}, ALL),
)


def android(api: int = 30, devices=DEVICES, units=("gpu", "dsp", "npu")) -> Profile:
    kinds = {"gpu": UnitKind.GPU, "dsp": UnitKind.DSP, "npu": UnitKind.NPU}
    return Profile(name=f"android{api}", description="test phone", os="android", api_level=api,
                   units=(unit("cpu_big", UnitKind.CPU), *(unit(u, kinds[u]) for u in units)),
                   dram=DramSpec(3e10, 1e-10), copy=CopySpec(1e10, 1e-5), nnapi_devices=tuple(devices))


def qualcomm(htp_arch: float | None = 75, fp16: bool = True, gpu: bool = True) -> Profile:
    """An Android phone whose DSP carries a Qualcomm HTP of `htp_arch` (None: a Hexagon without
    one), with a float16 rate when `fp16`; with or without a GPU."""
    dsp = unit("dsp", UnitKind.DSP)
    if not fp16:
        rates = {p: r for p, r in dsp.macs_per_s.items() if p is not Precision.FLOAT16}
        dsp = dataclasses.replace(dsp, macs_per_s=rates, elem_per_s=rates,
                                  active_w={p: 1.0 for p in rates})
    if htp_arch is not None:
        dsp = dataclasses.replace(dsp, extras={"htp_arch": float(htp_arch)})
    units = (unit("cpu_big", UnitKind.CPU), dsp) + ((unit("gpu", UnitKind.GPU),) if gpu else ())
    return Profile(name=f"qualcomm_v{htp_arch}" if htp_arch else "hexagon_only", description="test phone",
                   os="android", api_level=34, units=units, dram=DramSpec(3e10, 1e-10), copy=CopySpec(1e10, 1e-5))


def iphone(neural_engine: bool = True) -> Profile:
    units = (unit("cpu_big", UnitKind.CPU), unit("gpu", UnitKind.GPU))
    units += (unit("ane", UnitKind.ANE),) if neural_engine else ()
    return Profile(name="iphone", description="test phone", os="ios", api_level=0, units=units,
                   dram=DramSpec(3e10, 1e-10), copy=CopySpec(1e10, 1e-5), has_neural_engine=neural_engine)


def live(shape, dtype=DType.FLOAT32, name="x") -> Tensor:
    quant = QuantParams((0.1,), (0,)) if dtype in (DType.INT8, DType.UINT8) else None
    return Tensor(name, tuple(shape), dtype, quant=quant)


def const(values, dtype=DType.INT32, name="c") -> Tensor:
    data = np.asarray(values, dtype=dtype.np)
    quant = QuantParams((0.1,), (0,)) if dtype in (DType.INT8, DType.UINT8) else None
    return Tensor(name, data.shape, dtype, quant=quant, data=data)


def single_op(op_type: OpType, inputs, output: Tensor, options=None, version: int = 1):
    """A graph of one op; constant inputs are weights, the others model inputs."""
    tensors = (*inputs, output)
    op = Op(op_type, tuple(range(len(inputs))), (len(inputs),), options, version)
    model_inputs = tuple(i for i, t in enumerate(inputs) if not t.is_constant)
    return Graph(tensors, (op,), model_inputs, (len(inputs),)), op


@functools.lru_cache(maxsize=None)
def zoo(name: str, mode: str = "float") -> Graph:
    """Small zoo models: float, int8 (calibrated on two random samples) or float16 weights."""
    from runtime.zoo import build
    from runtime.zoo.quantize import to_float16, to_int8

    graph = build(name, alpha=0.25, resolution=32, classes=10)
    if mode == "int8":
        rng = np.random.default_rng(0)
        shape = graph.tensors[graph.inputs[0]].shape
        return to_int8(graph, [rng.standard_normal(shape).astype(np.float32) for _ in range(2)])
    return to_float16(graph) if mode == "float16" else graph


def verdicts(delegate, graph: Graph):
    return [delegate.is_node_supported(op, graph) for op in graph.ops]
