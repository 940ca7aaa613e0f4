"""RANDOM_UNIFORM, RANDOM_STANDARD_NORMAL and MULTINOMIAL draw from the Philox-4x32-10 counter-based
generator exactly as LiteRT's random_ops.cc does, so a seeded model gives LiteRT's numbers invoke after
invoke. Philox (Salmon et al., SC 2011, "Parallel random numbers: as easy as 1, 2, 3") turns a 128-bit
counter and a 64-bit key into four 32-bit words by ten rounds of multiply-and-xor; TensorFlow's
PhiloxRandom keys it with the op's seed and puts seed2 in the counter's upper half.
STABLEHLO_RNG_BIT_GENERATOR runs Philox or Threefry-2x32-20 (the same paper) on a state tensor it
is given and returns, as stablehlo_rng_bit_generator.cc does."""

from __future__ import annotations

import secrets

import numpy as np

from runtime.ops.base import Node

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)   # round multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85                        # key increments (golden ratio, sqrt(3) - 1)
_LOW = np.uint64(0xFFFFFFFF)
_MASK64 = (1 << 64) - 1


def philox_rounds(c: list[np.ndarray], k0: int, k1: int) -> list[np.ndarray]:
    """Philox-4x32-10 on counters given as four arrays of 32-bit words (held in uint64): ten rounds
    of two widening multiplies whose halves are xored with the other words and the key, the key
    raised by two Weyl constants between rounds."""
    for r in range(10):
        if r:
            k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
        p0, p1 = _M0 * c[0], _M1 * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & _LOW,
             (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & _LOW]
    return c


def _counter_run(start: int, n: int) -> np.ndarray:
    """start, start + 1, ... (n values) modulo 2**64, as uint64."""
    return np.uint64(start & _MASK64) + np.arange(n, dtype=np.uint64)   # uint64 arrays wrap silently


class Philox:
    """TensorFlow's PhiloxRandom: key (k0, k1) and a 128-bit counter; each block of four words
    advances the counter by one. Blocks are computed all at once for a run of counters."""

    def __init__(self, seed: int, seed2: int):
        seed, seed2 = seed & _MASK64, seed2 & _MASK64   # the op's int64 seeds, as uint64
        self.key = (seed & 0xFFFFFFFF, seed >> 32)
        self.counter = seed2 << 64                       # words 2 and 3 hold seed2; 0 and 1 count

    def copy(self) -> "Philox":
        other = Philox.__new__(Philox)
        other.key, other.counter = self.key, self.counter
        return other

    def skip(self, blocks: int) -> None:
        self.counter = (self.counter + blocks) & ((1 << 128) - 1)

    def blocks(self, n: int) -> np.ndarray:
        """The next n blocks as a [n, 4] uint32 array (word 0 first), advancing the counter."""
        start = self.counter
        self.skip(n)
        lo = _counter_run(start, n)
        hi = np.full(n, np.uint64(start >> 64), np.uint64) + (lo < np.uint64(start & _MASK64)).astype(np.uint64)
        c = philox_rounds([lo & _LOW, lo >> np.uint64(32), hi & _LOW, hi >> np.uint64(32)], *self.key)
        return np.stack(c, axis=1).astype(np.uint32)


def uint32_to_float(x: np.ndarray) -> np.ndarray:
    """23 random mantissa bits under exponent 0: a float in [1, 2), minus 1 (Uint32ToFloat)."""
    return ((x & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)


def uint64_to_double(x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """52 mantissa bits (20 from x0, 32 from x1) under exponent 0, minus 1 (Uint64ToDouble)."""
    bits = ((x0.astype(np.uint64) & np.uint64(0xFFFFF)) << np.uint64(32)) | x1.astype(np.uint64)
    return (bits | np.uint64(1023 << 52)).view(np.float64) - 1.0


def box_muller(x0: np.ndarray, x1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two standard normal float32 values per pair of words (BoxMullerFloat). The C code computes
    log, sqrt and sincos in float32; here each is computed in float64 and rounded once, which is
    what a correctly rounded float32 libm returns."""
    u1 = np.maximum(uint32_to_float(x0), np.float32(1e-7))
    v1 = (2.0 * np.pi * uint32_to_float(x1).astype(np.float64)).astype(np.float32)   # M_PI is a double
    u2 = np.sqrt(np.float32(-2.0) * np.log(u1.astype(np.float64)).astype(np.float32))
    return (np.sin(v1.astype(np.float64)).astype(np.float32) * u2,
            np.cos(v1.astype(np.float64)).astype(np.float32) * u2)


def _generator(node: Node) -> Philox:
    """The node's generator: made from the seeds on the first draw and kept across invokes, as
    LiteRT keeps it in the node from Prepare on. LiteRT's parameter struct holds each seed in a C
    int, so only its low 32 bits count (sign-extended back to 64); both 0 then asks for fresh
    system entropy."""
    rng = node.cache.get("philox")
    if rng is None:
        seed, seed2 = (_int32(v) for v in (node.options.seed, node.options.seed2))
        if not (seed or seed2):
            seed, seed2 = secrets.randbits(64), secrets.randbits(64)
        rng = node.cache["philox"] = Philox(seed, seed2)
    return rng


def restart_generators(nodes) -> None:
    """Forget the generators of these nodes: their next draw starts from the seeds again, as after
    LiteRT prepares a node anew (new input shapes allocated)."""
    for node in nodes:
        node.cache.pop("philox", None)


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _size(shape: np.ndarray) -> tuple[int, ...]:
    return tuple(int(d) for d in np.asarray(shape).reshape(-1))


def random_uniform(node: Node, shape: np.ndarray) -> np.ndarray:
    """Floats in [0, 1): one per generated word, four per block; a partial last block's spare
    words are dropped (GenerateRandomUniformNumbers)."""
    dims = _size(shape)
    n = int(np.prod(dims, dtype=np.int64))
    words = _generator(node).blocks(-(-n // 4)).reshape(-1)[:n]
    return uint32_to_float(words).reshape(dims)


def random_standard_normal(node: Node, shape: np.ndarray) -> np.ndarray:
    """Box-Muller on words (0, 1) and (2, 3) of each block, four values per block."""
    dims = _size(shape)
    n = int(np.prod(dims, dtype=np.int64))
    words = _generator(node).blocks(-(-n // 4))
    f0, f1 = box_muller(words[:, 0::2], words[:, 1::2])
    return np.stack([f0, f1], axis=2).reshape(-1)[:n].reshape(dims)


def multinomial(node: Node, logits: np.ndarray, num_samples: np.ndarray) -> np.ndarray:
    """Class indices drawn from each row's softmax (GenerateMultinomialNumbers): the row's cumulative
    sum of exp(logit - max) in double (non-finite logits add nothing), and for each sample the first
    class whose sum exceeds a uniform double (52 bits from two words) times the total. The samples
    come from a copy of the generator; the generator itself skips a fixed
    batch x ceil4(samples) x 2 x 256 blocks per invoke, as TensorFlow's op does."""
    rng = _generator(node)
    batch, classes = logits.shape
    samples = int(np.asarray(num_samples).reshape(-1)[0])
    draw = rng.copy()
    rng.skip(batch * ((samples + 3) // 4 * 4) * 2 * 256)
    words = draw.blocks(-(-(batch * samples) // 2)).reshape(-1, 2)[:batch * samples]
    uniform = uint64_to_double(words[:, 0], words[:, 1]).reshape(batch, samples)
    finite = np.isfinite(logits)
    top = np.where(finite, logits, -np.inf).max(axis=1, initial=np.finfo(np.float32).min).astype(np.float64)
    weights = np.where(finite, np.exp(np.where(finite, logits, 0).astype(np.float64) - top[:, None]), 0.0)
    cdf = np.cumsum(weights, axis=1)
    found = _upper_bounds(cdf, uniform * cdf[:, -1:])
    return found.astype(node.output(0).dtype.np)


def _upper_bounds(rows: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """For each target, how many entries of its row (sorted ascending) are <= it: std::upper_bound
    row by row, done for all rows at once by sorting every entry and target on (row, value), an
    entry before a target of the same value, and counting the entries ahead of each target."""
    batch, width = rows.shape
    samples = targets.shape[1]
    row = np.concatenate([np.repeat(np.arange(batch), width), np.repeat(np.arange(batch), samples)])
    value = np.concatenate([rows.reshape(-1), targets.reshape(-1)])
    is_target = np.concatenate([np.zeros(batch * width, bool), np.ones(batch * samples, bool)])
    order = np.lexsort((is_target, value, row))
    entries_before = np.cumsum(~is_target[order])
    found = np.empty(batch * samples, np.int64)
    found[order[is_target[order]] - batch * width] = entries_before[is_target[order]]
    return found.reshape(batch, samples) - np.arange(batch)[:, None] * width


# -- STABLEHLO_RNG_BIT_GENERATOR: stateless, the state is a uint64 tensor in and out ------------------

_PARITY = 0x1BD11BDA
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def threefry_rounds(c0: np.ndarray, c1: np.ndarray, k0: int, k1: int) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32-20 (the same paper) on uint32 counter pairs: five groups of four
    add-rotate-xor rounds, the three-word key schedule injected after each group."""
    ks = (np.uint32(k0), np.uint32(k1), np.uint32(k0 ^ k1 ^ _PARITY))
    c0, c1 = c0 + ks[0], c1 + ks[1]
    for g in range(5):
        for rot in _ROTATIONS[g % 2]:
            c0 = c0 + c1
            c1 = ((c1 << np.uint32(rot)) | (c1 >> np.uint32(32 - rot))) ^ c0
        c0, c1 = c0 + ks[(g + 1) % 3], c1 + ks[(g + 2) % 3] + np.uint32(g + 1)
    return c0, c1


def stablehlo_rng_bit_generator(node: Node, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Random bits filling the declared output, 32-bit word after word (a 64-bit element takes two,
    low first), and the state to pass on (stablehlo_rng_bit_generator.cc). The key is the first
    state word's halves; the 64-bit counter is the second word, bumped once per block (4 words for
    Philox, 2 for Threefry). Philox's upper counter words are the third state word when there is
    one, else the key again, as LiteRT reads them."""
    from runtime.ir.options import RngAlgorithm

    words = state.astype(np.uint64).view(np.uint32)
    out = node.output(1)
    n = int(np.prod(out.shape, dtype=np.int64)) * out.dtype.np.itemsize // 4
    k0, k1 = int(words[0]), int(words[1])
    start = int(words[2]) | int(words[3]) << 32
    if node.options.algorithm is RngAlgorithm.THREEFRY:
        ctr = _counter_run(start, -(-n // 2))
        bits = np.stack(threefry_rounds((ctr & _LOW).astype(np.uint32), (ctr >> np.uint64(32)).astype(np.uint32),
                                        k0, k1), axis=1)
    else:
        ctr = _counter_run(start, -(-n // 4))
        upper = (int(words[4]), int(words[5])) if len(words) >= 6 else (k0, k1)
        c = philox_rounds([ctr & _LOW, ctr >> np.uint64(32), np.full(len(ctr), np.uint64(upper[0])),
                           np.full(len(ctr), np.uint64(upper[1]))], k0, k1)
        bits = np.stack(c, axis=1).astype(np.uint32)
    new_state = state.astype(np.uint64).copy()
    new_state[1] = np.uint64((start + len(ctr)) & _MASK64)
    return new_state, bits.reshape(-1)[:n].view(out.dtype.np).reshape(out.shape)
