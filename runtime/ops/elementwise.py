"""Float kernels for binary arithmetic (with TFLite broadcasting and fused activations) and unary maths."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node, activate

# -- binary ops: NumPy broadcasting is the same rule TFLite's broadcast kernels apply -------------


def _act(node: Node):
    return getattr(node.options, "fused_activation_function", None)


def _binary(fn):
    def kernel(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = fn(a, b)
        act = _act(node)
        return activate(out, act) if act is not None and out.dtype.kind == "f" else out

    kernel.__name__ = fn.__name__
    return kernel


def _int_div(a, b):
    # TFLite's int32 DIV is C++ integer division, which truncates toward zero (FLOOR_DIV is
    # a separate op); NumPy's // floors, so divide magnitudes and restore the sign.
    if a.dtype.kind not in "iu":
        return np.divide(a, b)
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) ^ (b < 0), -q, q).astype(a.dtype)


def _squared_difference(a, b):
    d = np.asarray(np.subtract(a, b))  # two scalars subtract to a NumPy scalar, which cannot be `out`
    return np.multiply(d, d, out=d)


add = _binary(np.add)
sub = _binary(np.subtract)
mul = _binary(np.multiply)
div = _binary(_int_div)
maximum = _binary(np.maximum)
minimum = _binary(np.minimum)
squared_difference = _binary(_squared_difference)

# -- unary activations and maths -----------------------------------------------------------------


def relu(node: Node, x: np.ndarray) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0))


def relu_n1_to_1(node: Node, x: np.ndarray) -> np.ndarray:
    return np.clip(x, -1, 1).astype(x.dtype, copy=False)


def relu6(node: Node, x: np.ndarray) -> np.ndarray:
    return np.clip(x, 0, 6).astype(x.dtype, copy=False)


def leaky_relu(node: Node, x: np.ndarray) -> np.ndarray:
    alpha = np.float32(node.options.alpha)
    return np.where(x > 0, x, x * alpha).astype(x.dtype, copy=False)


def prelu(node: Node, x: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, x, x * alpha).astype(x.dtype, copy=False)


def elu(node: Node, x: np.ndarray) -> np.ndarray:
    return np.where(x < 0, np.expm1(np.minimum(x, 0)), x).astype(x.dtype, copy=False)


def logistic(node: Node, x: np.ndarray) -> np.ndarray:
    # reference/logistic.h saturates to exactly 1 above this cutoff and uses exp(x) below -9.
    cutoff = np.float32(16.619047164916992)
    with np.errstate(over="ignore"):  # exp(-x) of x < -88 is inf, and 1 / (1 + inf) the 0 wanted
        y = np.float32(1) / (np.float32(1) + np.exp(-x))
    # exp of the clipped x: the same value wherever it is kept, and no overflow where it is not
    y = np.where(x < -9, np.exp(np.minimum(x, np.float32(-9))), y)
    return np.where(x > cutoff, np.float32(1), y).astype(x.dtype, copy=False)


def tanh(node: Node, x: np.ndarray) -> np.ndarray:
    return np.tanh(x)


def exp(node: Node, x: np.ndarray) -> np.ndarray:
    return np.exp(x)


def log(node: Node, x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(x)


def sqrt(node: Node, x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.sqrt(x)


def rsqrt(node: Node, x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.float32(1) / np.sqrt(x)).astype(x.dtype, copy=False)


def abs_(node: Node, x: np.ndarray) -> np.ndarray:
    return np.abs(x)


def neg(node: Node, x: np.ndarray) -> np.ndarray:
    return np.negative(x)


def hard_swish(node: Node, x: np.ndarray) -> np.ndarray:
    # Evaluated left to right, as TFLite: x * min(6, max(0, x + 3)) / 6.
    return (x * np.minimum(np.float32(6), np.maximum(np.float32(0), x + np.float32(3)))) / np.float32(6)


def cast(node: Node, x: np.ndarray) -> np.ndarray:
    return x.astype(node.output().dtype.np)


def dequantize(node: Node, x: np.ndarray) -> np.ndarray:
    if x.dtype == np.float16:
        return x.astype(np.float32)
    q = node.input(0).quant
    if q is None:
        raise node.fail(f"input of type {x.dtype} has no quantization parameters")
    scale = np.asarray(q.scale, np.float32)
    zero = np.asarray(q.zero_point, np.int32)
    if q.per_channel:
        shape = [1] * x.ndim
        shape[q.axis] = -1
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    return (scale * (x.astype(np.int32) - zero).astype(np.float32)).astype(np.float32)
