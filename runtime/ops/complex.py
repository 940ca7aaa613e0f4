"""Complex-number kernels (RFFT2D, REAL, IMAG, COMPLEX_ABS) and BITCAST, which reads one element type's
bytes as another's. The checks (runtime/ops/opcheck_misc.py) have fixed every shape and type before these run."""

from __future__ import annotations

import numpy as np

from runtime.ops.base import Node


def rfft2d(node: Node, x: np.ndarray, fft_length: np.ndarray) -> np.ndarray:
    """The 2-D real FFT of each innermost [height, width] slice, cropped or zero-padded to
    fft_length. LiteRT's rfft2d.cc runs Ooura's rdft2d in double precision on the padded slice and
    reorders its packed result into the [height, width / 2 + 1] half spectrum; float64 here too, so
    the complex64 outputs round alike (NumPy would otherwise compute float32 input in float32)."""
    h, w = (int(v) for v in np.asarray(fft_length).reshape(-1)[:2])
    return np.fft.rfft2(x.astype(np.float64), s=(h, w)).astype(np.complex64)


def real(node: Node, x: np.ndarray) -> np.ndarray:
    """complex64 -> float32, complex128 -> float64 (complex_support.cc)."""
    return x.real.copy()


def imag(node: Node, x: np.ndarray) -> np.ndarray:
    return x.imag.copy()


def complex_abs(node: Node, x: np.ndarray) -> np.ndarray:
    """std::abs of each element: hypot in the component type, as NumPy's complex abs computes it."""
    return np.abs(x)


def bitcast(node: Node, x: np.ndarray) -> np.ndarray:
    """The input's bytes as the output's element type (bitcast.cc copies them unchanged): a wider
    input gains a last dimension of size in/out, a narrower one loses its last dimension."""
    out = node.output(0)
    return np.ascontiguousarray(x).reshape(-1).view(out.dtype.np).reshape(_shape(x, out))


def _shape(x: np.ndarray, out) -> tuple[int, ...]:
    a, b = x.dtype.itemsize, out.dtype.np.itemsize
    return x.shape + (a // b,) if a > b else x.shape[:-1] if a < b else x.shape
