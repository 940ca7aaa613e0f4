"""Predicted latency of large float models on the old phones, with a mechanism switched on and off.

Usage: python benchmarks/old_phones.py [--device pixel3] [--model resnet101] [--resolution 224]

Builds a float model from shapes alone (ResNet v1 50/101/152 bottlenecks, VGG-16; zero weights,
timing only: the simulated time does not depend on the values) and prints its simulated latency
on the CPU (4 threads), the GPU delegate, NNAPI and NNAPI's reference CPU device, first with the
profile as shipped, then with the GPU's Winograd rule switched off (winograd_min_slices 0). Public
reference points to compare with (not fitted): TFLite's hosted-models page, Pixel 3 on Android 10,
ResNet v2 101: CPU 526 ms, GPU 92 ms, NNAPI 1572 ms; Inception v3: 249, 56, 148 ms.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from runtime.ir.graph import DType, Graph, Op, Tensor  # noqa: E402
from runtime.ir.optypes import OpType  # noqa: E402
from runtime.ir.options import (Activation, Conv2DOptions, FullyConnectedOptions, Padding,  # noqa: E402
                                Pool2DOptions, ReducerOptions, SoftmaxOptions)


class ShapeBuilder:
    """Ops added by shape only (SAME padding), weights zero: enough for a timing-only run."""

    def __init__(self, name: str):
        self.name, self.tensors, self.ops = name, [], []

    def tensor(self, name, shape, data=None) -> int:
        self.tensors.append(Tensor(name, tuple(shape), DType.FLOAT32 if data is None or data.dtype == np.float32
                                   else DType.INT32, data=data))
        return len(self.tensors) - 1

    def shape(self, t):
        return self.tensors[t].shape

    def conv(self, x, cout, k=1, stride=1, act=Activation.RELU) -> int:
        n, h, w, cin = self.shape(x)
        wt = self.tensor(f"w{len(self.ops)}", (cout, k, k, cin), np.zeros((cout, k, k, cin), np.float32))
        b = self.tensor(f"b{len(self.ops)}", (cout,), np.zeros(cout, np.float32))
        y = self.tensor(f"conv{len(self.ops)}", (n, -(-h // stride), -(-w // stride), cout))
        self.ops.append(Op(OpType.CONV_2D, (x, wt, b), (y,), Conv2DOptions(
            padding=Padding.SAME, stride_w=stride, stride_h=stride, fused_activation_function=act)))
        return y

    def unary(self, op_type, x, shape, options) -> int:
        y = self.tensor(f"{op_type.name.lower()}{len(self.ops)}", shape)
        self.ops.append(Op(op_type, (x,), (y,), options))
        return y

    def add(self, a, b) -> int:
        y = self.tensor(f"add{len(self.ops)}", self.shape(a))
        self.ops.append(Op(OpType.ADD, (a, b), (y,), None))
        return y

    def head(self, x, classes=1000) -> int:
        n, _, _, c = self.shape(x)
        axes = self.tensor("axes", (2,), np.array([1, 2], np.int32))
        y = self.tensor("pooled", (n, c))
        self.ops.append(Op(OpType.MEAN, (x, axes), (y,), ReducerOptions(False)))
        w = self.tensor("fc/w", (classes, c), np.zeros((classes, c), np.float32))
        b = self.tensor("fc/b", (classes,), np.zeros(classes, np.float32))
        logits = self.tensor("logits", (n, classes))
        self.ops.append(Op(OpType.FULLY_CONNECTED, (y, w, b), (logits,), FullyConnectedOptions()))
        return self.unary(OpType.SOFTMAX, logits, (n, classes), SoftmaxOptions(beta=1.0))

    def build(self, x, out) -> Graph:
        return Graph(tuple(self.tensors), tuple(self.ops), (x,), (out,), name=self.name)


_RESNET = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


def resnet(depth: int = 101, resolution: int = 224) -> Graph:
    """ResNet v1 with bottleneck blocks (He et al., 2016), batch-norm folded into the convolutions."""
    b = ShapeBuilder(f"resnet{depth}_{resolution}")
    x0 = x = b.tensor("input", (1, resolution, resolution, 3))
    x = b.conv(x, 64, 7, 2)
    x = b.unary(OpType.MAX_POOL_2D, x, (1, -(-b.shape(x)[1] // 2), -(-b.shape(x)[2] // 2), 64),
                Pool2DOptions(padding=Padding.SAME, stride_w=2, stride_h=2, filter_width=3, filter_height=3))
    for stage, blocks in enumerate(_RESNET[depth]):
        width = 64 << stage
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 0 else 1
            y = b.conv(x, width, 1, stride)
            y = b.conv(y, width, 3, 1)
            y = b.conv(y, 4 * width, 1, 1, Activation.NONE)
            short = b.conv(x, 4 * width, 1, stride, Activation.NONE) if i == 0 else x
            x = b.add(short, y)
    return b.build(x0, b.head(x))


def vgg16(resolution: int = 224) -> Graph:
    """VGG-16 (Simonyan and Zisserman, 2015): thirteen 3x3 convolutions, 64 to 512 channels."""
    b = ShapeBuilder(f"vgg16_{resolution}")
    x0 = x = b.tensor("input", (1, resolution, resolution, 3))
    for width, convs in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
        for _ in range(convs):
            x = b.conv(x, width, 3, 1)
        _, h, w, c = b.shape(x)
        x = b.unary(OpType.MAX_POOL_2D, x, (1, h // 2, w // 2, c),
                    Pool2DOptions(padding=Padding.VALID, stride_w=2, stride_h=2, filter_width=2, filter_height=2))
    return b.build(x0, b.head(x))


RUNS = {"cpu": [], "gpu": ["--use_gpu"], "nnapi": ["--use_nnapi"],
        "nnapi-reference": ["--use_nnapi", "--nnapi_accelerator_name=nnapi-reference", "--disable_nnapi_cpu=false"]}


def latency_ms(graph: Graph, profile, flags: list[str]) -> float:
    from delegates.registry import parse_flags
    from runtime.interpreter.api import Interpreter

    delegates, _ = parse_flags(list(flags), profile)
    it = Interpreter(graph=graph, experimental_delegates=delegates, num_threads=4, device=profile, timing_only=True)
    it.allocate_tensors()
    return it.simulation.invoke() * 1e3


def without_winograd(profile):
    units = tuple(dataclasses.replace(u, mech=dataclasses.replace(u.mech, winograd_min_slices=0))
                  for u in profile.units)
    return dataclasses.replace(profile, units=units)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="pixel3")
    ap.add_argument("--model", default="resnet101", choices=["resnet50", "resnet101", "resnet152", "vgg16"])
    ap.add_argument("--resolution", type=int, default=224)
    args = ap.parse_args(argv)
    from sim.profile import load_profile

    graph = vgg16(args.resolution) if args.model == "vgg16" else resnet(int(args.model[6:]), args.resolution)
    macs = sum(o.macs for o in _works(graph))
    profile = load_profile(args.device)
    print(f"{graph.name}: {macs / 1e9:.2f} G MACs, {len(graph.ops)} ops, on {profile.name}")
    print(f"{'run':<16} {'shipped ms':>11} {'no Winograd ms':>15}")
    for run, flags in RUNS.items():
        print(f"{run:<16} {latency_ms(graph, profile, flags):>11.1f} "
              f"{latency_ms(graph, without_winograd(profile), flags):>15.1f}")
    return 0


def _works(graph: Graph):
    from sim.cost import Precision
    from sim.work import describe

    shapes = [t.shape for t in graph.tensors]
    return [describe(op, graph, shapes, Precision.FLOAT32) for op in graph.ops]


if __name__ == "__main__":
    sys.exit(main())
