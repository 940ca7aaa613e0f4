"""A small hand-written phone profile for simulator tests, independent of the shipped YAML files."""

from __future__ import annotations

from sim.cost import OpClass, Precision
from sim.spec import CopySpec, DramSpec, NnapiDeviceSpec, Profile, UnitKind, UnitSpec

F32, F16, I8 = Precision.FLOAT32, Precision.FLOAT16, Precision.INT8


def unit(name, kind, macs, bandwidth=10e9, *, cores=1, active=2.0, idle=0.1, **kw) -> UnitSpec:
    return UnitSpec(name=name, kind=kind, macs_per_s=dict(macs), elem_per_s=dict(macs), bandwidth=bandwidth,
                    dispatch_s=kw.pop("dispatch_s", 1e-6), active_w={p: active for p in macs}, idle_w=idle,
                    cores=cores, **kw)


def tiny_profile(dram_bandwidth=12e9, **overrides) -> Profile:
    units = (
        unit("cpu_big", UnitKind.CPU, {F32: 8e9, I8: 32e9}, cores=4, active=4.0, idle=0.2,
             efficiency={OpClass.DEPTHWISE: 0.5}),
        unit("cpu_little", UnitKind.CPU, {F32: 2e9, I8: 8e9}, cores=4, active=1.0, idle=0.05),
        unit("gpu", UnitKind.GPU, {F32: 200e9, F16: 400e9}, channel_align=4, init_s=0.2, cached_init_s=0.02,
             convert_per_s=8e9, active=3.0, idle=0.1, extras={"opengl_rate_scale": 0.5}),
        unit("dsp", UnitKind.DSP, {I8: 300e9}, invoke_s=300e-6, init_s=0.05, active=0.8, idle=0.02),
        unit("ane", UnitKind.ANE, {F16: 1000e9}, init_s=0.1, convert_per_s=10e9, active=1.5, idle=0.02),
        unit("npu", UnitKind.NPU, {I8: 1000e9}, init_s=0.05, active=1.0, idle=0.02),
    )
    fields = dict(name="tiny", description="test phone", os="android", api_level=29, units=units,
                  dram=DramSpec(dram_bandwidth, 30e-12, 0.05), copy=CopySpec(8e9, 50e-6, 1),
                  nnapi_devices=(NnapiDeviceSpec("test-npu", "npu", 3, frozenset({"CONV_2D", "ADD"}),
                                                 frozenset({I8})),),
                  has_neural_engine=True)
    fields.update(overrides)
    return Profile(**fields)


def calibrated_int8(graph, seed: int, samples: int):
    """The graph fully int8-quantized, calibrated on seeded Gaussian samples of its input."""
    import numpy as np

    from runtime.zoo.quantize import to_int8

    rng = np.random.default_rng(seed)
    shape = graph.tensors[graph.inputs[0]].shape
    return to_int8(graph, [rng.standard_normal(shape).astype(np.float32) for _ in range(samples)])
