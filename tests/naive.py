"""Plain-loop reference versions of the vectorised kernels, written for clarity, used only by tests."""

from __future__ import annotations

import numpy as np

ACT = {0: (-np.inf, np.inf), 1: (0, np.inf), 2: (-1, 1), 3: (0, 6)}


def _pad(size, k, stride, dil, same):
    eff = (k - 1) * dil + 1
    out = -(-size // stride) if same else (size - eff) // stride + 1
    total = max((out - 1) * stride + eff - size, 0)
    return out, total // 2


def conv2d(x, w, b, stride, dil, same, act=0):
    n, h, wd, cin = x.shape
    cout, kh, kw, _ = w.shape
    oh, pt = _pad(h, kh, stride[0], dil[0], same)
    ow, pl = _pad(wd, kw, stride[1], dil[1], same)
    out = np.zeros((n, oh, ow, cout), np.float64)
    for y in range(oh):
        for xx in range(ow):
            for ky in range(kh):
                for kx in range(kw):
                    iy, ix = y * stride[0] - pt + ky * dil[0], xx * stride[1] - pl + kx * dil[1]
                    if 0 <= iy < h and 0 <= ix < wd:
                        out[:, y, xx, :] += x[:, iy, ix, :].astype(np.float64) @ w[:, ky, kx, :].T
    if b is not None:
        out += b
    return np.clip(out, *ACT[act])


def depthwise(x, w, b, stride, dil, same, mult, act=0):
    n, h, wd, cin = x.shape
    _, kh, kw, cout = w.shape
    oh, pt = _pad(h, kh, stride[0], dil[0], same)
    ow, pl = _pad(wd, kw, stride[1], dil[1], same)
    out = np.zeros((n, oh, ow, cout), np.float64)
    src = np.repeat(np.arange(cin), mult)
    for y in range(oh):
        for xx in range(ow):
            for ky in range(kh):
                for kx in range(kw):
                    iy, ix = y * stride[0] - pt + ky * dil[0], xx * stride[1] - pl + kx * dil[1]
                    if 0 <= iy < h and 0 <= ix < wd:
                        out[:, y, xx, :] += x[:, iy, ix, src] * w[0, ky, kx, :]
    if b is not None:
        out += b
    return np.clip(out, *ACT[act])


def pool(x, k, stride, same, kind):
    n, h, wd, c = x.shape
    oh, pt = _pad(h, k[0], stride[0], 1, same)
    ow, pl = _pad(wd, k[1], stride[1], 1, same)
    out = np.zeros((n, oh, ow, c), np.float64)
    for y in range(oh):
        for xx in range(ow):
            y0, x0 = y * stride[0] - pt, xx * stride[1] - pl
            win = x[:, max(y0, 0):min(y0 + k[0], h), max(x0, 0):min(x0 + k[1], wd), :]
            out[:, y, xx] = win.max(axis=(1, 2)) if kind == "max" else win.astype(np.float64).mean(axis=(1, 2))
    return out


def transpose_conv(x, w, b, out_hw, stride, same):
    n, h, wd, cin = x.shape
    cout, kh, kw, _ = w.shape
    oh, ow = out_hw
    _, pt = _pad(oh, kh, stride[0], 1, same)
    _, pl = _pad(ow, kw, stride[1], 1, same)
    out = np.zeros((n, oh, ow, cout), np.float64)
    for iy in range(h):
        for ix in range(wd):
            for ky in range(kh):
                for kx in range(kw):
                    oy, ox = iy * stride[0] - pt + ky, ix * stride[1] - pl + kx
                    if 0 <= oy < oh and 0 <= ox < ow:
                        out[:, oy, ox, :] += x[:, iy, ix, :].astype(np.float64) @ w[:, ky, kx, :].T
    if b is not None:
        out += b
    return out
