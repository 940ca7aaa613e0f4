"""Layers for the zoo: convolutions with batch-norm folded from measured statistics, pools, heads."""

from __future__ import annotations

import numpy as np

from runtime.ir.optypes import OpType
from runtime.ir.options import (Activation, ConcatenationOptions, Conv2DOptions, DepthwiseConv2DOptions,
                             FullyConnectedOptions, Padding, Pool2DOptions, ReshapeOptions, SoftmaxOptions)
from runtime.zoo.builder import GraphBuilder


def _fold(b: GraphBuilder, raw: np.ndarray, w: np.ndarray, cout_axis: int, beta_std: float = 0.2):
    """Fold a batch-norm whose statistics are the layer's own on the sample: each channel comes
    out with mean ~beta and std ~gamma, so activations stay in a healthy range layer after layer."""
    axes = tuple(range(raw.ndim - 1))
    mean, std = raw.mean(axis=axes), raw.std(axis=axes) + 1e-3
    gamma = b.rng.uniform(0.8, 1.2, mean.shape).astype(np.float32)
    beta = b.rng.normal(0.2, beta_std, mean.shape).astype(np.float32)
    shape = [1] * w.ndim
    shape[cout_axis] = -1
    w = (w * (gamma / std).reshape(shape)).astype(np.float32)
    bias = (beta - mean * gamma / std).astype(np.float32)
    return w, bias


def conv(b: GraphBuilder, x: int, cout: int, k: int = 1, stride: int = 1,
         act: Activation = Activation.RELU6, padding: Padding = Padding.SAME, name: str = "conv",
         beta_std: float = 0.2) -> int:
    """Convolution + folded batch-norm; a larger beta_std spreads channel means apart (for heads
    whose channels are class scores)."""
    cin = b.shape(x)[-1]
    w = b.rng.normal(0, np.sqrt(2.0 / (k * k * cin)), (cout, k, k, cin)).astype(np.float32)
    opts = Conv2DOptions(padding=padding, stride_w=stride, stride_h=stride)
    raw = b.evaluate(OpType.CONV_2D, [b.value(x), w], opts)[0]
    w, bias = _fold(b, raw, w, 0, beta_std)
    opts = Conv2DOptions(padding=padding, stride_w=stride, stride_h=stride, fused_activation_function=act)
    return b.op(OpType.CONV_2D, [x, b.const(f"{name}/weights", w), b.const(f"{name}/bias", bias)], opts, name)


def depthwise(b: GraphBuilder, x: int, k: int = 3, stride: int = 1, act: Activation = Activation.RELU6,
              padding: Padding = Padding.SAME, name: str = "dw") -> int:
    c = b.shape(x)[-1]
    w = b.rng.normal(0, np.sqrt(2.0 / (k * k)), (1, k, k, c)).astype(np.float32)
    opts = DepthwiseConv2DOptions(padding=padding, stride_w=stride, stride_h=stride)
    raw = b.evaluate(OpType.DEPTHWISE_CONV_2D, [b.value(x), w], opts)[0]
    w, bias = _fold(b, raw, w, 3)
    opts = DepthwiseConv2DOptions(padding=padding, stride_w=stride, stride_h=stride, depth_multiplier=1,
                                  fused_activation_function=act)
    return b.op(OpType.DEPTHWISE_CONV_2D, [x, b.const(f"{name}/weights", w), b.const(f"{name}/bias", bias)],
                opts, name)


def pool(b: GraphBuilder, x: int, k: int, stride: int, kind: OpType = OpType.MAX_POOL_2D,
         padding: Padding = Padding.VALID, name: str | None = None) -> int:
    opts = Pool2DOptions(padding=padding, stride_w=stride, stride_h=stride, filter_width=k, filter_height=k)
    return b.op(kind, [x], opts, name)


def global_avg_pool(b: GraphBuilder, x: int) -> int:
    _, h, w, _ = b.shape(x)
    opts = Pool2DOptions(padding=Padding.VALID, stride_w=1, stride_h=1, filter_width=w, filter_height=h)
    return b.op(OpType.AVERAGE_POOL_2D, [x], opts, "avg_pool")


def concat(b: GraphBuilder, xs: list[int], axis: int = 3, name: str | None = None) -> int:
    return b.op(OpType.CONCATENATION, xs, ConcatenationOptions(axis=axis), name)


def add(b: GraphBuilder, x: int, y: int, name: str | None = None) -> int:
    return b.op(OpType.ADD, [x, y], None, name)


def _logit_weights(b: GraphBuilder, features: np.ndarray, classes: int) -> np.ndarray:
    """Random weights scaled so the logits spread by ~2: softmax neither flat nor one-hot."""
    cin = features.shape[-1]
    w = b.rng.normal(0, 1.0 / np.sqrt(cin), (classes, cin)).astype(np.float32)
    spread = (features.reshape(-1, cin) @ w.T).std() + 1e-6
    return (w * (2.0 / spread)).astype(np.float32)


def conv_classifier(b: GraphBuilder, x: int, classes: int) -> int:
    """1x1 conv logits on a [1,1,1,C] feature map, reshaped to [1, classes], then softmax."""
    cin = b.shape(x)[-1]
    w = _logit_weights(b, b.value(x), classes).reshape(classes, 1, 1, cin)
    y = b.op(OpType.CONV_2D, [x, b.const("logits/weights", w), b.const("logits/bias", np.zeros(classes, np.float32))],
             Conv2DOptions(padding=Padding.SAME), "logits")
    y = b.op(OpType.RESHAPE, [y, b.const("logits/shape", np.array([1, classes], np.int32))],
             ReshapeOptions(new_shape=(1, classes)), "logits_flat")
    return b.op(OpType.SOFTMAX, [y], SoftmaxOptions(beta=1.0), "probabilities")


def dense_classifier(b: GraphBuilder, x: int, classes: int) -> int:
    """FULLY_CONNECTED logits on the flattened features, then softmax."""
    w = _logit_weights(b, b.value(x), classes)
    y = b.op(OpType.FULLY_CONNECTED, [x, b.const("fc/weights", w), b.const("fc/bias", np.zeros(classes, np.float32))],
             FullyConnectedOptions(), "logits")
    return b.op(OpType.SOFTMAX, [y], SoftmaxOptions(beta=1.0), "probabilities")
