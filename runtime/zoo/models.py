"""Model builders: MobileNet v1 / v2, SqueezeNet 1.0 and a tiny CNN, with seeded weights."""

from __future__ import annotations

import numpy as np

from runtime.ir.graph import Graph
from runtime.ir.optypes import OpType
from runtime.ir.options import Activation, Padding, ReducerOptions
from runtime.zoo import layers as L
from runtime.zoo.builder import GraphBuilder


def tiny_cnn(resolution: int = 32, classes: int = 10, seed: int = 0) -> Graph:
    """A four-layer CNN for quick tests: conv, depthwise, pointwise, max pool, mean, dense."""
    b = GraphBuilder("tiny_cnn", seed)
    x = b.input("input", (1, resolution, resolution, 3))
    x = L.conv(b, x, 8, 3, 2, Activation.RELU, name="conv1")
    x = L.depthwise(b, x, 3, 1, name="dw2")
    x = L.conv(b, x, 16, 1, 1, Activation.RELU, name="pw2")
    x = L.pool(b, x, 2, 2, name="pool")
    x = b.op(OpType.MEAN, [x, b.const("mean/axes", np.array([1, 2], np.int32))], ReducerOptions(False), "mean")
    return b.build([L.dense_classifier(b, x, classes)])


# (stride, output channels before alpha) of the 13 depthwise-separable blocks (Howard et al., 2017).
_V1_BLOCKS = [(1, 64), (2, 128), (1, 128), (2, 256), (1, 256), (2, 512), (1, 512), (1, 512), (1, 512),
              (1, 512), (1, 512), (2, 1024), (1, 1024)]


def mobilenet_v1(alpha: float = 1.0, resolution: int = 224, classes: int = 1001, seed: int = 0) -> Graph:
    b = GraphBuilder(f"mobilenet_v1_{alpha}_{resolution}", seed)
    x = b.input("input", (1, resolution, resolution, 3))
    x = L.conv(b, x, int(32 * alpha), 3, 2, name="conv0")
    for i, (stride, c) in enumerate(_V1_BLOCKS, 1):
        x = L.depthwise(b, x, 3, stride, name=f"block{i}/dw")
        x = L.conv(b, x, int(c * alpha), 1, 1, name=f"block{i}/pw")
    x = L.global_avg_pool(b, x)
    return b.build([L.conv_classifier(b, x, classes)])


def _divisible(v: float, d: int = 8) -> int:
    """Round channels as the MobileNet v2 reference does (never down by more than 10%)."""
    new = max(d, int(v + d / 2) // d * d)
    return new + d if new < 0.9 * v else new


# (expansion t, channels c, repeats n, first stride s) from Sandler et al., 2018, table 2.
_V2_BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
              (6, 320, 1, 1)]


def mobilenet_v2(alpha: float = 1.0, resolution: int = 224, classes: int = 1001, seed: int = 0) -> Graph:
    b = GraphBuilder(f"mobilenet_v2_{alpha}_{resolution}", seed)
    x = b.input("input", (1, resolution, resolution, 3))
    x = L.conv(b, x, _divisible(32 * alpha), 3, 2, name="conv0")
    k = 0
    for t, c, n, s in _V2_BLOCKS:
        for r in range(n):
            k += 1
            x = _inverted_residual(b, x, t, _divisible(c * alpha), s if r == 0 else 1, f"block{k}")
    x = L.conv(b, x, _divisible(1280 * max(alpha, 1.0)), 1, 1, name="conv_last")
    x = L.global_avg_pool(b, x)
    return b.build([L.conv_classifier(b, x, classes)])


def _inverted_residual(b: GraphBuilder, x: int, t: int, cout: int, stride: int, name: str) -> int:
    cin = b.shape(x)[-1]
    y = L.conv(b, x, cin * t, 1, 1, name=f"{name}/expand") if t != 1 else x
    y = L.depthwise(b, y, 3, stride, name=f"{name}/dw")
    y = L.conv(b, y, cout, 1, 1, Activation.NONE, name=f"{name}/project")
    return L.add(b, x, y, f"{name}/add") if stride == 1 and cin == cout else y


def squeezenet(resolution: int = 224, classes: int = 1000, seed: int = 0) -> Graph:
    """SqueezeNet 1.0 (Iandola et al., 2016): fire modules of squeeze 1x1 then 1x1 || 3x3 expands."""
    b = GraphBuilder(f"squeezenet_{resolution}", seed)
    x = b.input("input", (1, resolution, resolution, 3))
    x = L.conv(b, x, 96, 7, 2, Activation.RELU, Padding.VALID, name="conv1")
    x = L.pool(b, x, 3, 2, name="pool1")
    for i, (s, e) in enumerate([(16, 64), (16, 64), (32, 128)], 2):
        x = _fire(b, x, s, e, f"fire{i}")
    x = L.pool(b, x, 3, 2, name="pool4")
    for i, (s, e) in enumerate([(32, 128), (48, 192), (48, 192), (64, 256)], 5):
        x = _fire(b, x, s, e, f"fire{i}")
    x = L.pool(b, x, 3, 2, name="pool8")
    x = _fire(b, x, 64, 256, "fire9")
    x = L.conv(b, x, classes, 1, 1, Activation.RELU, name="conv10", beta_std=1.5)
    x = L.global_avg_pool(b, x)
    x = b.op(OpType.RESHAPE, [x, b.const("flatten/shape", np.array([1, classes], np.int32))], None, "flatten")
    return b.build([b.op(OpType.SOFTMAX, [x], None, "probabilities")])


def _fire(b: GraphBuilder, x: int, squeeze: int, expand: int, name: str) -> int:
    s = L.conv(b, x, squeeze, 1, 1, Activation.RELU, name=f"{name}/squeeze")
    e1 = L.conv(b, s, expand, 1, 1, Activation.RELU, name=f"{name}/expand1x1")
    e3 = L.conv(b, s, expand, 3, 1, Activation.RELU, name=f"{name}/expand3x3")
    return L.concat(b, [e1, e3], 3, f"{name}/concat")
