"""Fuzzing damaged .tflite files: structure-aware mutations of the fixture models, each fed through
the API and the CLI; the only allowed outcomes are a run or one ModelError line naming the file.

    python -m tests.fuzz_models --cases 10000 --measure          # the long run (docs/robustness.md)
    python -m tests.fuzz_models --replay out/fuzz/failures/3141.tflite

The mutations know the flatbuffer's layout: they rewrite shape dimensions, strides and other
options fields, op code indices and builtin codes, tensor and buffer indices, quantization
parameters, option table types, vtable entries, offsets and vector lengths in place, and at the
graph level they give ops another type's options, drop quantization, change op types and shapes
(written back with runtime.model.tflite_write); besides, files are truncated and bits flipped at random.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import io
import json
import math
import os
import random
import signal
import struct
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

FIXTURES = Path(__file__).parent / "fixtures"
CASE_SECONDS = 60            # a case running longer is a hang (a bound no busy host reaches; the work is bounded by the checks)
LIMIT_MB = 256               # the memory limit every case runs under
# Allowance over the limit for what no plan estimate covers: the file's bytes read and copied,
# Python objects of the graph and simulation, NumPy's small temporaries.
SLACK_BYTES = 48 << 20


# -- the corpus ---------------------------------------------------------------------------------


def corpus() -> list[Path]:
    """Every fixture model the reader accepts unchanged (the malformed ones are their own tests)."""
    from runtime.model import tflite_read as tflite_io
    from runtime.ir.errors import ModelError

    paths = []
    for path in sorted(FIXTURES.rglob("*.tflite")):
        try:
            tflite_io.load(path)
        except ModelError:
            continue
        paths.append(path)
    return paths


def pick_fixture(rng, paths: list[Path]) -> Path:
    """Mostly single-op fixtures (fast, and every op type's fields); whole models one case in five."""
    small = [p for p in paths if p.stat().st_size < 40_000]
    large = [p for p in paths if p.stat().st_size >= 40_000]
    return rng.choice(large if large and rng.random() < 0.2 else small)


# -- flatbuffer sites ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Site:
    """A place in the file a mutation can rewrite: its byte position, kind, and what it is."""

    pos: int
    kind: str   # int32 uint32 uint16(vtable) uint8 float32 int64 uoffset veclen
    what: str
    role: str = ""  # e.g. "tensor-index", "shape", "opcode-index", "options", "enum"


class _Layout:
    """Walks the model through the generated accessors and records every field's position."""

    def __init__(self, buf: bytes):
        import tflite

        self.buf = buf
        self.sites: list[Site] = []
        self.tensors = 0
        self.opcodes = 0
        self.buffers = 0
        model = tflite.Model.GetRootAs(buf, 0)
        self._table(model, "model", {1: "operator_codes", 2: "subgraphs", 4: "buffers", 7: "signature_defs"})
        self.buffers = model.BuffersLength()
        self.opcodes = model.OperatorCodesLength()
        for i in range(self.opcodes):
            oc = model.OperatorCodes(i)
            self._table(oc, f"opcode #{i}", {1: "custom_code"})
            self._scalar(oc, 0, "uint8", f"opcode #{i}.deprecated_builtin_code", "builtin-code")
            self._scalar(oc, 2, "int32", f"opcode #{i}.version", "version")
            self._scalar(oc, 3, "int32", f"opcode #{i}.builtin_code", "builtin-code")
        for i in range(min(model.BuffersLength(), 512)):
            b = model.Buffers(i)
            self._table(b, f"buffer #{i}", {0: "data"})
        if model.SubgraphsLength() < 1:
            return
        sg = model.Subgraphs(0)
        self._table(sg, "subgraph", {0: "tensors", 1: "inputs", 2: "outputs", 3: "operators", 4: "name"})
        self.tensors = sg.TensorsLength()
        self._ints(sg, 1, "subgraph.inputs", "tensor-index")
        self._ints(sg, 2, "subgraph.outputs", "tensor-index")
        for j in range(sg.TensorsLength()):
            t = sg.Tensors(j)
            name = f"tensor #{j}"
            self._table(t, name, {0: "shape", 3: "name", 4: "quantization", 6: "sparsity", 7: "shape_signature"})
            self._ints(t, 0, f"{name}.shape", "shape")
            self._ints(t, 7, f"{name}.shape_signature", "shape")
            self._scalar(t, 1, "uint8", f"{name}.type", "enum")
            self._scalar(t, 2, "uint32", f"{name}.buffer", "buffer-index")
            self._scalar(t, 5, "uint8", f"{name}.is_variable", "bool")
            q = t.Quantization()
            if q is not None:
                self._table(q, f"{name}.quantization", {2: "scale", 3: "zero_point"})
                self._vector(q, 2, 4, "float32", f"{name}.quantization.scale", "scale")
                self._vector(q, 3, 8, "int64", f"{name}.quantization.zero_point", "zero-point")
                self._scalar(q, 6, "int32", f"{name}.quantization.quantized_dimension", "axis")
                self._scalar(q, 4, "uint8", f"{name}.quantization.details_type", "enum")
        for j in range(sg.OperatorsLength()):
            op = sg.Operators(j)
            name = f"op #{j}"
            self._table(op, name, {1: "inputs", 2: "outputs", 4: "builtin_options"})
            self._scalar(op, 0, "uint32", f"{name}.opcode_index", "opcode-index")
            self._ints(op, 1, f"{name}.inputs", "tensor-index")
            self._ints(op, 2, f"{name}.outputs", "tensor-index")
            self._scalar(op, 3, "uint8", f"{name}.builtin_options_type", "options-type")
            table = op.BuiltinOptions()
            if table is not None:
                self._options(table, f"{name}.builtin_options")

    # -- primitives ----------------------------------------------------------------------------

    def _u32(self, pos: int) -> int:
        return struct.unpack_from("<I", self.buf, pos)[0]

    def _vtable(self, tab) -> tuple[int, int, int]:
        """(vtable position, vtable size, table inline size)."""
        vt = tab.Pos - struct.unpack_from("<i", self.buf, tab.Pos)[0]
        size, inline = struct.unpack_from("<HH", self.buf, vt)
        return vt, size, inline

    def _field(self, obj, slot: int) -> int | None:
        tab = obj._tab
        o = tab.Offset(4 + 2 * slot)
        return tab.Pos + o if o else None

    def _table(self, obj, name: str, offsets: dict[int, str]) -> None:
        """The table's vtable entries, and its offset fields (to vectors, strings, sub-tables)."""
        vt, size, _ = self._vtable(obj._tab)
        for k in range((size - 4) // 2):
            self.sites.append(Site(vt + 4 + 2 * k, "uint16", f"{name} vtable slot {k}", "vtable"))
        self.sites.append(Site(obj._tab.Pos, "int32", f"{name} vtable offset", "soffset"))
        for slot, what in offsets.items():
            pos = self._field(obj, slot)
            if pos is not None:
                self.sites.append(Site(pos, "uoffset", f"{name}.{what} offset", "uoffset"))
                target = pos + self._u32(pos)
                if target + 4 <= len(self.buf) and what not in ("builtin_options", "quantization", "sparsity"):
                    self.sites.append(Site(target, "veclen", f"{name}.{what} length", "veclen"))

    def _scalar(self, obj, slot: int, kind: str, what: str, role: str) -> None:
        pos = self._field(obj, slot)
        if pos is not None:
            self.sites.append(Site(pos, kind, what, role))

    def _vector(self, obj, slot: int, width: int, kind: str, what: str, role: str, most: int = 64) -> None:
        pos = self._field(obj, slot)
        if pos is None:
            return
        start = pos + self._u32(pos)
        n = self._u32(start)
        for k in range(min(n, most)):
            self.sites.append(Site(start + 4 + width * k, kind, f"{what}[{k}]", role))

    def _ints(self, obj, slot: int, what: str, role: str) -> None:
        self._vector(obj, slot, 4, "int32", what, role)

    def _options(self, table, name: str) -> None:
        """An options table of any type: each present field, its width guessed from the layout
        (fields are aligned and laid out largest first), so every type is covered alike."""
        vt, size, inline = self._vtable(table)
        offsets = sorted({o for k in range((size - 4) // 2)
                          if (o := struct.unpack_from("<H", self.buf, vt + 4 + 2 * k)[0])})
        for k in range((size - 4) // 2):
            self.sites.append(Site(vt + 4 + 2 * k, "uint16", f"{name} vtable slot {k}", "vtable"))
            o = struct.unpack_from("<H", self.buf, vt + 4 + 2 * k)[0]
            if not o:
                continue
            later = [x for x in offsets if x > o]
            gap = (later[0] if later else inline) - o
            kind = "int32" if gap >= 4 and (table.Pos + o) % 4 == 0 else "uint8"
            self.sites.append(Site(table.Pos + o, kind, f"{name} field {k}", "options"))


# -- mutations ----------------------------------------------------------------------------------

_FORMATS = {"int32": "<i", "uint32": "<I", "uint16": "<H", "uint8": "<B", "float32": "<f", "int64": "<q",
            "uoffset": "<I", "veclen": "<I"}
_INT_EXTREMES = (0, 1, 2, 3, -1, -2, 7, 255, 256, 65535, 65536, 2**20, 2**24, 2**31 - 1, -(2**31), 1 << 30)


def _pack(kind: str, value) -> bytes:
    fmt = _FORMATS[kind]
    if kind in ("float32",):
        return struct.pack(fmt, value)
    bits = struct.calcsize(fmt) * 8
    value = int(value)
    if fmt[1].isupper():
        value %= 1 << bits
    else:
        value = (value + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
    return struct.pack(fmt, value)


def _new_value(rng, site: Site, old, layout: _Layout):
    """A value for the site: its role's boundary cases, extremes, or a random one."""
    if site.kind == "float32":
        # Doubling a value near float32's top gives one struct cannot pack: infinity stands in.
        doubled = old * 2 if math.isfinite(old) else 1.0
        doubled = doubled if abs(doubled) <= 3.4e38 else math.copysign(math.inf, doubled)
        return rng.choice([0.0, -1.0, math.nan, math.inf, -math.inf, 1e-38, 3e38, doubled,
                           -old if math.isfinite(old) else 0.0])
    if site.kind == "int64":
        return rng.choice([0, -1, 127, 128, -129, 255, 256, 2**31, -(2**63), rng.randrange(-(2**40), 2**40)])
    if site.role == "tensor-index":
        return rng.choice([-1, -2, layout.tensors, layout.tensors + 5, rng.randrange(max(1, layout.tensors)),
                           2**31 - 1])
    if site.role == "opcode-index":
        return rng.choice([layout.opcodes, layout.opcodes + 1, 2**32 - 1, rng.randrange(max(1, layout.opcodes))])
    if site.role == "buffer-index":
        return rng.choice([layout.buffers, layout.buffers + 3, 2**32 - 1, 0, rng.randrange(max(1, layout.buffers))])
    if site.role == "builtin-code":
        from runtime.ops import KERNELS

        return rng.choice([rng.choice([t.value for t in KERNELS]), 255, 127, 200, 9999, -1, 0, rng.randrange(256)])
    if site.role == "options-type":
        return rng.randrange(0, 140)
    if site.role == "vtable":
        return rng.choice([0, old ^ (1 << rng.randrange(16)), old + 4, max(0, old - 4), rng.randrange(1 << 16)])
    if site.role in ("uoffset", "soffset"):
        return rng.choice([old ^ (1 << rng.randrange(32)), old + 4, old - 4, old + 1, 0, rng.randrange(1 << 32)])
    if site.role == "veclen":
        return rng.choice([0, old + 1, max(0, old - 1), old * 2, 2**31 - 1, 2**32 - 1, 1 << 20])
    if site.kind == "uint8":
        return rng.choice([0, 1, 2, 3, 5, 6, 7, 17, 19, 127, 255, rng.randrange(256)])
    return rng.choice([*_INT_EXTREMES, old + 1, old - 1, old * 2, -old, rng.randrange(-(2**31), 2**31)])


_STRUCTURAL = {"vtable", "soffset", "uoffset", "veclen"}


def mutate_field(rng, data: bytes) -> tuple[bytes, str]:
    try:
        layout = _Layout(data)
    except Exception:  # an earlier mutation left no layout to walk
        return flip_bits(rng, data)
    if not layout.sites:
        return flip_bits(rng, data)
    roles = sorted({s.role for s in layout.sites})
    structural = [r for r in roles if r in _STRUCTURAL]
    semantic = [r for r in roles if r not in _STRUCTURAL]
    # Every role alike, not by how many sites it has; fields that mean something 3 times in 4.
    role = rng.choice(semantic if semantic and (rng.random() < 0.75 or not structural) else structural)
    site = rng.choice([s for s in layout.sites if s.role == role])
    fmt = _FORMATS[site.kind]
    width = struct.calcsize(fmt)
    if site.pos < 0 or site.pos + width > len(data):
        return truncate(rng, data)
    old = struct.unpack_from(fmt, data, site.pos)[0]
    new = _new_value(rng, site, old, layout)
    out = bytearray(data)
    out[site.pos:site.pos + width] = _pack(site.kind, new)
    return bytes(out), f"{site.what} ({site.kind} at byte {site.pos}): {old!r} -> {new!r}"


def truncate(rng, data: bytes) -> tuple[bytes, str]:
    if len(data) <= 9:
        return flip_bits(rng, data)
    cut = rng.choice([rng.randrange(8, len(data)), len(data) - rng.randrange(1, 64), len(data) // 2])
    cut = max(8, min(cut, len(data) - 1))
    return data[:cut], f"truncated to {cut} of {len(data)} bytes"


def flip_bits(rng, data: bytes) -> tuple[bytes, str]:
    out = bytearray(data)
    spots = []
    for _ in range(rng.randrange(1, 9)):
        pos = rng.randrange(min(8, len(out) - 1), len(out))
        bit = rng.randrange(8)
        out[pos] ^= 1 << bit
        spots.append(f"{pos}.{bit}")
    return bytes(out), f"bits flipped at {', '.join(spots)}"


def mutate_graph(rng, data: bytes) -> tuple[bytes, str]:
    """Graph-level damage written back as a valid flatbuffer: what byte edits cannot express
    (an options table of another type, quantization removed, a field the file left at its default)."""
    from runtime.ir import options as opt
    from runtime.model import tflite_read as tflite_io
    from runtime.ir.graph import Tensor
    from runtime.ops import KERNELS
    from runtime.model.tflite_write import dumps

    try:
        graph = tflite_io.loads(data)
    except Exception:
        return mutate_field(rng, data)
    tensors, ops = list(graph.tensors), list(graph.ops)
    if not ops:
        return mutate_field(rng, data)
    i = rng.randrange(len(ops))
    op = ops[i]
    kind = rng.choice(["options-type", "options-value", "drop-quant", "op-type", "shape", "input", "drop-input",
                       "bad-quant", "input-shape", "input-shape"])
    what = ""
    if kind == "options-type":
        cls = rng.choice(list(opt.TABLES.values()))
        ops[i] = dataclasses.replace(op, options=cls())
        what = f"op #{i} {op.type.name} given {cls.__name__}"
    elif kind == "options-value" and op.options is not None and not isinstance(op.options, opt.GenericOptions):
        fields = [f for f in dataclasses.fields(op.options)
                  if isinstance(getattr(op.options, f.name), (int, float, tuple))
                  and not isinstance(getattr(op.options, f.name), (bool, enum.Enum))]
        if not fields:
            return mutate_field(rng, data)
        f = rng.choice(fields)
        old = getattr(op.options, f.name)
        if isinstance(old, tuple):
            new = tuple(rng.choice([-1, 0, 2**31 - 1, 3, 1 << 20]) for _ in range(rng.randrange(0, 5)))
        elif isinstance(old, float):
            new = rng.choice([math.nan, math.inf, -1.0, 0.0, 1e30])
        else:
            new = rng.choice([0, -1, -5, 2**31 - 1, 1 << 16, old + 1, 1000])
        ops[i] = dataclasses.replace(op, options=dataclasses.replace(op.options, **{f.name: new}))
        what = f"op #{i} {op.type.name} options.{f.name}: {old!r} -> {new!r}"
    elif kind == "drop-quant":
        quantized = [t for t, x in enumerate(tensors) if x.quant is not None]
        if not quantized:
            return mutate_field(rng, data)
        t = rng.choice(quantized)
        tensors[t] = dataclasses.replace(tensors[t], quant=None)
        what = f"tensor #{t} quantization removed"
    elif kind == "bad-quant":
        quantized = [t for t, x in enumerate(tensors) if x.quant is not None]
        if not quantized:
            return mutate_field(rng, data)
        t = rng.choice(quantized)
        q = tensors[t].quant
        q2 = dataclasses.replace(q, scale=tuple(rng.choice([0.0, -1.0, 1e-45, 1e38]) for _ in q.scale),
                                 zero_point=tuple(rng.choice([0, 300, -300, 127]) for _ in q.zero_point),
                                 axis=rng.choice([q.axis, -1, 7]))
        tensors[t] = dataclasses.replace(tensors[t], quant=q2)
        what = f"tensor #{t} quantization {q} -> {q2}"
    elif kind == "op-type":
        new_type = rng.choice(sorted(KERNELS, key=lambda t: t.value))
        ops[i] = dataclasses.replace(op, type=new_type, options=opt.options_or_default(new_type.name, None)
                                     if rng.random() < 0.5 else op.options)
        what = f"op #{i} {op.type.name} -> {new_type.name}"
    elif kind == "shape":
        t = rng.randrange(len(tensors))
        x = tensors[t]
        if x.is_constant or not x.shape:
            shape = tuple(rng.choice([0, 1, 3, 1 << 20]) for _ in range(rng.randrange(0, 5)))
        else:
            shape = list(x.shape)
            shape[rng.randrange(len(shape))] = rng.choice([0, 1, 2, 5, 1 << 16, 1 << 30, 2**31 - 1])
            shape = tuple(shape)
        if x.is_constant:
            return mutate_field(rng, data)
        tensors[t] = Tensor(x.name, shape, x.dtype, x.quant, None, x.shape_signature, x.is_variable)
        what = f"tensor #{t} shape {list(x.shape)} -> {list(shape)}"
    elif kind == "input-shape" and graph.inputs:
        t = rng.choice(graph.inputs)
        x = tensors[t]
        shape = tuple(rng.choice([d, d, 1, 2, 3, 7, 64, 1000, 5000, 1 << 16]) for d in x.shape)
        tensors[t] = Tensor(x.name, shape, x.dtype, x.quant, x.data, x.shape_signature, x.is_variable)
        what = f"input tensor #{t} shape {list(x.shape)} -> {list(shape)}"
    elif kind == "input" and op.inputs:
        k = rng.randrange(len(op.inputs))
        t = rng.randrange(len(tensors))
        ins = list(op.inputs)
        ins[k] = t
        ops[i] = dataclasses.replace(op, inputs=tuple(ins))
        what = f"op #{i} {op.type.name} input {k} -> tensor #{t}"
    elif kind == "drop-input" and op.inputs:
        k = rng.randrange(len(op.inputs))
        ins = list(op.inputs)
        ins[k] = -1
        ops[i] = dataclasses.replace(op, inputs=tuple(ins))
        what = f"op #{i} {op.type.name} input {k} removed"
    else:
        return mutate_field(rng, data)
    damaged = dataclasses.replace(graph, tensors=tuple(tensors), ops=tuple(ops))
    if rng.random() < 0.5:  # declare the shapes the ops now compute: the damage then reaches further
        damaged, what = _rederive(damaged), what + " (shapes re-derived)"
    try:
        return dumps(damaged), what
    except Exception:  # the writer cannot express it (a value outside its field's type)
        return mutate_field(rng, data)


def _rederive(graph):
    """The graph with every computed tensor declared at the shape its op now computes (as far as
    the checks get); unchanged where they refuse it."""
    from runtime.ops import opcheck
    from runtime.ir.graph import Tensor

    try:
        shapes = opcheck.check_graph(graph, strict=False).shapes
    except Exception:
        return graph
    tensors = [x if x.is_constant or x.shape == s else
               Tensor(x.name, s, x.dtype, x.quant, None, x.shape_signature, x.is_variable)
               for x, s in zip(graph.tensors, shapes)]
    return dataclasses.replace(graph, tensors=tuple(tensors))


MUTATIONS: list[tuple[float, Callable]] = [(0.55, mutate_field), (0.31, mutate_graph), (0.07, truncate),
                                            (0.07, flip_bits)]


def mutate(rng, data: bytes) -> tuple[bytes, list[str]]:
    """One to three mutations, each chosen by weight."""
    steps = []
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
        r, acc = rng.random(), 0.0
        for weight, fn in MUTATIONS:
            acc += weight
            if r < acc:
                break
        data, what = fn(rng, data)
        steps.append(what)
        if len(data) <= 16:  # nothing left worth damaging further
            break
    return data, steps


# -- running a case -----------------------------------------------------------------------------


class CaseTimeout(BaseException):
    """Raised from SIGALRM when a case runs past its time bound (BaseException: no handler swallows it)."""


@contextlib.contextmanager
def time_bound(seconds: float):
    """In the main thread, interrupt the block after `seconds` (elsewhere, no bound)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def alarm(signum, frame):
        raise CaseTimeout(f"over {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Outcome:
    """What one case did: per path (api, sim, cli) 'ok', 'rejected', or a failure kind."""

    name: str
    steps: list[str]
    results: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    late: list[str] = field(default_factory=list)        # rejected only when a kernel raised
    messages: list[str] = field(default_factory=list)
    peak_bytes: int = 0
    seconds: float = 0.0
    cli_stderr: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


def _feed(it, rng: np.random.Generator) -> None:
    """Random inputs, made in their own type (no float64 copy: the input may be hundreds of MB)."""
    for d in it.get_input_details():
        dtype = np.dtype(d["dtype"])
        shape = tuple(int(s) for s in d["shape"])
        if dtype in (np.float32, np.float64):
            value = rng.standard_normal(shape, dtype=dtype)
        elif dtype.kind in "iu" or dtype.kind == "b":
            value = rng.integers(0, 2 if dtype.kind == "b" else 4, shape, dtype=np.uint8).astype(dtype, copy=False)
        elif dtype.kind == "f":
            value = rng.standard_normal(shape, dtype=np.float32).astype(dtype)
        else:
            continue
        it.set_tensor(d["index"], value)


def _check_message(out: Outcome, where: str, text: str, path: str) -> None:
    out.messages.append(f"{where}: {text}")
    if "\n" in text.strip():
        out.failures.append(f"message: {where}: not one line: {text!r}")
    if path not in text:
        out.failures.append(f"message: {where}: does not name the file: {text!r}")


_PHONES: dict[str, object] = {}
# The phone each delegate is tried on: the QNN delegate needs a Hexagon NPU (an HTP), the rest the Pixel 4.
QNN_PHONE = "galaxy_s24"


def _phone(delegate: str | None = None):
    """The profile a case runs on, loaded once (profiles are immutable)."""
    name = QNN_PHONE if delegate == "qnn" else "pixel4"
    if name not in _PHONES:
        from sim.profile import load_profile

        _PHONES[name] = load_profile(name)
    return _PHONES[name]


def cli_flags(delegate: str | None) -> tuple[str, ...]:
    """dtb benchmark's flags for a case's delegate (none for the CPU or NNAPI: the CLI's own phone)."""
    return {"gpu": ("--use_gpu",), "qnn": ("--use_qnn", "--device", QNN_PHONE)}.get(delegate or "", ())


def run_api(out: Outcome, path: str, limit: int, simulated: bool, delegate: str | None = None) -> None:
    from runtime.ir.errors import DelegateError, ModelError
    from runtime.interpreter.api import Interpreter

    where = "sim" if simulated else "api"
    stage = "load"
    try:
        if simulated:
            delegates = []
            phone = _phone(delegate)
            if delegate:
                from delegates.registry import make_delegate

                delegates = [make_delegate(delegate, phone)]
            it = Interpreter(model_path=path, device=phone, timing_only=True, memory_limit=limit,
                             experimental_delegates=delegates, num_threads=2)
            refused = [r.error for r in it.simulation.delegation.per_delegate if r.error]
            if refused:  # TFLite restored the plan: the CLI then stops with benchmark_model's message
                out.notes.append(f"sim: {delegate} not applied: {refused[0]}")
        else:
            it = Interpreter(model_path=path, memory_limit=limit)
        stage = "allocate"
        it.allocate_tensors()
        if not simulated:
            _feed(it, np.random.default_rng(0))
        stage = "invoke"
        it.invoke()
        for d in it.get_output_details():
            it.get_tensor(d["index"])
        out.results[where] = "ok"
    except ModelError as exc:
        out.results[where] = "rejected"
        _check_message(out, where, str(exc), path)
        cause = exc.__cause__
        if cause is not None and not isinstance(cause, ModelError):
            out.late.append(f"{where}: a kernel raised {type(cause).__name__}: {cause}")
        elif stage == "invoke":  # a kernel's own check: fine, but the reader could have said it
            out.late.append(f"{where}: refused while running: {exc}")
    except DelegateError as exc:  # a failure of the delegate: judged against the unmutated model
        out.results[where] = "delegate-error"
        out.messages.append(f"{where}: DelegateError: {exc}")
    except CaseTimeout:
        raise
    except Exception as exc:  # noqa: BLE001 - anything else is what the fuzzer looks for
        import traceback

        frame = traceback.extract_tb(exc.__traceback__)[-1]
        out.results[where] = "crash"
        out.failures.append(f"crash: {where}: {type(exc).__name__}: {exc} (at {Path(frame.filename).name}:"
                            f"{frame.lineno})")


def run_cli(out: Outcome, path: str, limit_mb: int, extra: tuple[str, ...] = ()) -> None:
    from runtime.cli.main import main

    err, sink = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(err):
            code = main(["benchmark", "--graph", path, "--num_runs", "1", "--memory_limit_mb", str(limit_mb), *extra])
    except CaseTimeout:
        raise
    except SystemExit as exc:  # argparse
        code = exc.code
    except Exception as exc:  # noqa: BLE001 - a traceback on the command line
        import traceback

        frame = traceback.extract_tb(exc.__traceback__)[-1]
        out.results["cli"] = "crash"
        out.failures.append(f"crash: cli: {type(exc).__name__}: {exc} (at {Path(frame.filename).name}:"
                            f"{frame.lineno})")
        return
    text = err.getvalue()
    out.cli_stderr = text.replace(path, "<model>")
    if code == 0:
        out.results["cli"] = "ok"
        return
    out.results["cli"] = "rejected" if code == 1 else f"exit {code}"
    if code != 1:
        out.failures.append(f"exit: cli: exit status {code}: {text.strip()!r}")
    lines = text.strip().splitlines()
    if len(lines) != 1:
        out.failures.append(f"message: cli: {len(lines)} lines on stderr: {text!r}")
    elif path not in lines[0]:
        if extra:  # a delegate's failure, not the model's: judged against the unmutated model
            out.results["cli"] = "delegate-error"
            out.messages.append(f"cli: {lines[0]}")
        else:
            out.failures.append(f"message: cli: stderr does not name the file: {lines[0]!r}")
    else:
        out.messages.append(f"cli: {lines[0]}")


_BASELINES: dict[tuple[str, str], Outcome] = {}


def _baseline(source: Path, delegate: str, limit_mb: int) -> Outcome:
    """The unmutated fixture through the same delegate paths, once per (fixture, delegate)."""
    key = (str(source), delegate)
    if key not in _BASELINES:
        scratch = Path(tempfile.mkdtemp(prefix="dtb-fuzz-base-"))
        path = str(scratch / source.name)
        Path(path).write_bytes(source.read_bytes())
        out = Outcome(f"baseline {source.name} {delegate}", [])
        run_api(out, path, limit_mb << 20, True, delegate)
        if cli_flags(delegate):
            run_cli(out, path, limit_mb, cli_flags(delegate))
        _BASELINES[key] = out
    return _BASELINES[key]


def _judge_delegate(out: Outcome, source: Path | None, delegate: str | None, limit_mb: int) -> None:
    """A delegate error is the fuzzer's business only when the unmutated model runs clean
    through the same delegate; otherwise it is the delegate's own failure, noted apart."""
    for where in ("sim", "cli"):
        if out.results.get(where) != "delegate-error":
            continue
        said = " ".join(m for m in out.messages if m.startswith(where))
        if where == "cli" and "Failed to apply" in said and any("not applied" in n for n in out.notes):
            out.notes.append("cli: benchmark_model's message for a delegate TFLite could not apply")
            continue
        values = [m.split(": ", 2)[-1] for m in out.late if "refused while running" in m]
        if any(v.split(": ", 1)[-1] in said for v in values):  # the inputs' values, refused on the CPU too
            out.notes.append(f"{where}: the delegate met the value the CPU refused")
            continue
        base = _baseline(source, delegate, limit_mb) if source is not None and delegate else None
        if base is not None and base.results.get(where) in ("delegate-error", "crash"):
            out.notes.append(f"{where}: {delegate} fails on the unmutated {source.name} too")
        else:
            out.failures.append(f"crash: {where}: delegate error on a model the checks passed: "
                                f"{[m for m in out.messages if m.startswith(where)]}")


def check_mutations(sources, ops: set[str], tmp, seed: int, cases: int) -> None:
    """Mutate the given single-op models `cases` times (skipping mutations that turn an op into one
    outside `ops`): each case runs, or ends in one ModelError line naming the file, found by the
    checks before a kernel raises anything. For op families' own test files."""
    import re

    rng = random.Random(seed)
    ran = 0
    while ran < cases:
        source = rng.choice(sources)
        data, steps = mutate(rng, source.read_bytes())
        turned = [m.group(1) for s in steps for m in [re.search(r"op #\d+ \w+ -> ([A-Z_0-9]+)", s)] if m]
        if any(t not in ops for t in turned):
            continue
        out = run_case(data, str(tmp / "case.tflite"), source.name, steps, rng, cli=False, source=source)
        raised = [m for m in out.late if "a kernel raised" in m]
        assert out.ok and not raised, f"{source.name} after {steps}: {out.failures} {raised}"
        ran += 1


def run_case(data: bytes, path: str, name: str, steps: list[str], rng, limit_mb: int = LIMIT_MB,
             cli: bool = True, seconds: float = CASE_SECONDS, source: Path | None = None) -> Outcome:
    """Write the mutated bytes to `path` and run them through the API (plain, then timing-only on
    a simulated phone, sometimes with the GPU, NNAPI or QNN delegate, the QNN one on an HTP phone)
    and, with `cli`, `dtb benchmark`; each path under the time bound and, when tracemalloc is on,
    its peak allocation measured."""
    out = Outcome(name, steps)
    Path(path).write_bytes(data)
    limit = limit_mb << 20
    tracing = tracemalloc.is_tracing()
    start = time.perf_counter()
    delegate = rng.choice([None, None, "gpu", "nnapi", "qnn"])
    try:
        with time_bound(seconds):
            runs = [lambda: run_api(out, path, limit, False), lambda: run_api(out, path, limit, True, delegate)]
            if cli:
                runs.append(lambda: run_cli(out, path, limit_mb, cli_flags(delegate)))
            for run in runs:
                if tracing:
                    base = tracemalloc.get_traced_memory()[0]
                    tracemalloc.reset_peak()
                run()
                if tracing:
                    peak = tracemalloc.get_traced_memory()[1] - base
                    out.peak_bytes = max(out.peak_bytes, peak)
                    allowed = limit + SLACK_BYTES + 2 * len(data)
                    if peak > allowed and peak > allowed + _input_bytes(data):
                        out.failures.append(f"memory: allocated {peak >> 20} MiB, above the {limit_mb} MiB limit")
            _judge_delegate(out, source, delegate, limit_mb)
    except CaseTimeout:
        out.failures.append(f"hang: over {seconds} s (after {sorted(out.results)})")
    out.seconds = time.perf_counter() - start
    return out


def _input_bytes(data: bytes) -> int:
    """The model's input tensors' bytes: the caller's own input arrays (the interpreter copies
    them in, as LiteRT's set_tensor does) are outside the plan the limit holds."""
    from runtime.model import tflite_read as tflite_io

    try:
        graph = tflite_io.loads(data, memory_limit=LIMIT_MB << 20)
    except Exception:
        return 0
    return sum(math.prod(graph.tensors[t].shape) * graph.tensors[t].dtype.np.itemsize for t in graph.inputs)


def make_case(rng, paths: list[Path]) -> tuple[Path, bytes, list[str]]:
    source = pick_fixture(rng, paths)
    data, steps = mutate(rng, source.read_bytes())
    return source, data, steps


# -- the long run -------------------------------------------------------------------------------


def _subprocess_check(path: str, limit_mb: int) -> str | None:
    """`dtb benchmark` as a user runs it: exit 0, or 1 with one line naming the file; None when so."""
    try:
        proc = subprocess.run([sys.executable, "-m", "runtime.cli.main", "benchmark", "--graph", path, "--num_runs", "1",
                               "--memory_limit_mb", str(limit_mb)], capture_output=True, text=True,
                              timeout=CASE_SECONDS + 10)
    except subprocess.TimeoutExpired:
        return "hang: dtb subprocess"
    lines = proc.stderr.strip().splitlines()
    if "Traceback" in proc.stderr:
        return f"crash: dtb subprocess: {proc.stderr[-400:]!r}"
    if proc.returncode == 0:
        return None
    if proc.returncode != 1 or len(lines) != 1 or path not in lines[0]:
        return f"message: dtb subprocess: exit {proc.returncode}: {proc.stderr[-400:]!r}"
    return None


def worker(first: int, count: int, out_dir: Path, limit_mb: int, cli: bool, measure: bool,
           subprocess_every: int, corpus_file: Path | None = None) -> None:
    """Run cases first..first+count-1 (case k from seed k); one JSON line per case on stdout. The corpus
    is the one long_run listed in corpus_file (reading every fixture to find it takes seconds a worker)."""
    paths = [Path(line) for line in corpus_file.read_text().splitlines()] if corpus_file else corpus()
    scratch = Path(tempfile.mkdtemp(prefix="dtb-fuzz-"))
    if measure:
        tracemalloc.start()
    for k in range(first, first + count):
        print(json.dumps({"start": k}), flush=True)
        rng = random.Random(k)
        source, data, steps = make_case(rng, paths)
        path = str(scratch / f"case{k}.tflite")
        out = run_case(data, path, f"case {k}", steps, rng, limit_mb, cli, source=source)
        if subprocess_every and k % subprocess_every == 0:
            problem = _subprocess_check(path, limit_mb)
            out.results["dtb"] = "ok" if problem is None else "fail"
            if problem:
                out.failures.append(problem)
        if out.failures:
            (out_dir / "failures").mkdir(parents=True, exist_ok=True)
            (out_dir / "failures" / f"{k}.tflite").write_bytes(data)
        print(json.dumps({"case": k, "source": str(source.relative_to(FIXTURES)), "steps": steps,
                          "results": out.results, "failures": out.failures, "late": out.late, "notes": out.notes,
                          "message": out.messages[0] if out.messages else "",
                          "peak_mb": round(out.peak_bytes / 2**20, 2), "seconds": round(out.seconds, 3)}),
              flush=True)
        Path(path).unlink(missing_ok=True)


def long_run(cases: int, seed: int, workers: int, out_dir: Path, limit_mb: int, cli: bool, measure: bool,
             subprocess_every: int, chunk: int = 250, paths: list[Path] | None = None) -> dict:
    """Run `cases` cases in worker processes (a hang that no signal interrupts kills only its
    worker: the case is recorded and the worker restarted past it); summary in out_dir/summary.json.
    The corpus (`paths`, or corpus()) is found once here and handed to every worker."""
    out_dir.mkdir(parents=True, exist_ok=True)
    corpus_file = out_dir / "corpus.txt"
    corpus_file.write_text("".join(f"{p}\n" for p in (corpus() if paths is None else paths)))
    log = open(out_dir / "cases.jsonl", "a", encoding="utf-8")
    pending = [(s, min(chunk, seed + cases - s)) for s in range(seed, seed + cases, chunk)]
    running: list[tuple[subprocess.Popen, int, int, float, list]] = []
    records: list[dict] = []
    started = time.time()
    reported = 0

    def spawn(first: int, count: int):
        cmd = [sys.executable, "-m", "tests.fuzz_models", "--worker", "--first", str(first), "--count", str(count),
               "--out", str(out_dir), "--limit-mb", str(limit_mb), "--subprocess-every", str(subprocess_every),
               "--corpus", str(corpus_file)]
        cmd += [] if cli else ["--no-cli"]
        cmd += ["--measure"] if measure else []
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent.parent,
                                env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
        os.set_blocking(proc.stdout.fileno(), False)
        running.append((proc, first, count, time.time(), [None, "", 0]))  # case in progress, output, done

    import selectors

    def take(entry, text: str) -> None:
        """A worker's output so far: one JSON line per case started and per case done."""
        state = entry[4]
        state[1] += text
        *lines, state[1] = state[1].split("\n")
        for line in lines:
            if not line.strip():
                continue
            msg = json.loads(line)
            if "start" in msg:
                state[0] = (msg["start"], time.time())
                continue
            state[0] = None
            state[2] += 1
            records.append(msg)
            log.write(line + "\n")

    def lost(entry, why: str) -> None:
        """The case a worker was in when it had to go; the worker's rest goes to a new one."""
        proc, first, count, _, state = entry
        k = state[0][0]
        msg = {"case": k, "results": {}, "failures": [why], "late": [], "steps": [], "peak_mb": 0,
               "seconds": time.time() - state[0][1]}
        records.append(msg)
        log.write(json.dumps(msg) + "\n")
        running.remove(entry)
        proc.stdout.close()
        if k + 1 < first + count:
            pending.insert(0, (k + 1, first + count - k - 1))

    while pending or running:
        while pending and len(running) < workers:
            spawn(*pending.pop(0))
        sel = selectors.DefaultSelector()
        for entry in running:
            sel.register(entry[0].stdout, selectors.EVENT_READ, entry)
        for key, _ in sel.select(timeout=5):
            take(key.data, key.data[0].stdout.read() or "")
        sel.close()
        for entry in list(running):
            proc, first, count, _, state = entry
            current = state[0]
            if current and time.time() - current[1] > CASE_SECONDS * 3:  # a hang no signal interrupted
                proc.kill()
                proc.wait()
                lost(entry, f"hang: killed after {CASE_SECONDS * 3} s")
            elif proc.poll() is not None:
                take(entry, (proc.stdout.read() or "") + "\n")  # the last lines, then the worker is done
                if state[0]:  # it died inside a case (a crash no Python handler saw)
                    lost(entry, f"crash: the worker process died (exit status {proc.returncode})")
                else:
                    running.remove(entry)
                    proc.stdout.close()
                    if state[2] < count:  # it stopped early: the rest of its cases go to another
                        pending.insert(0, (first + state[2], count - state[2]))
        log.flush()
        if len(records) // 500 > reported:
            reported = len(records) // 500
            print(f"{len(records)}/{cases} cases, {time.time() - started:.0f} s", flush=True)
    log.close()
    summary = summarize(records, time.time() - started)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def summarize(records: list[dict], seconds: float) -> dict:
    def count(path: str, result: str) -> int:
        return sum(1 for r in records if r.get("results", {}).get(path) == result)

    failures = [r for r in records if r.get("failures")]
    return {
        "cases": len(records),
        "seconds": round(seconds, 1),
        "failures": len(failures),
        "hangs": sum(1 for r in failures if any(f.startswith("hang") for f in r["failures"])),
        "over_memory": sum(1 for r in failures if any(f.startswith("memory") for f in r["failures"])),
        "tracebacks": sum(1 for r in failures if any(f.startswith("crash") for f in r["failures"])),
        "bad_messages": sum(1 for r in failures if any(f.startswith(("message", "exit")) for f in r["failures"])),
        # Validation gaps: a kernel raised before the checks refused the file (none allowed in CI).
        "kernel_raised": sum(1 for r in records if any("a kernel raised" in m for m in r.get("late", []))),
        # A kernel's own check on values (a GATHER index out of range): allowed, counted.
        "refused_while_running": sum(1 for r in records
                                     if any("refused while running" in m for m in r.get("late", []))),
        "delegate_notes": sum(1 for r in records if r.get("notes")),
        "api": {k: count("api", k) for k in ("ok", "rejected", "crash")},
        "sim": {k: count("sim", k) for k in ("ok", "rejected", "crash")},
        "cli": {k: count("cli", k) for k in ("ok", "rejected", "crash")},
        "dtb_subprocess": {k: count("dtb", k) for k in ("ok", "fail")},
        "max_peak_mb": max((r.get("peak_mb", 0) for r in records), default=0),
        "slowest_s": max((r.get("seconds", 0) for r in records), default=0),
        "failed_cases": [r["case"] for r in failures][:100],
    }


def replay(path: str, limit_mb: int) -> int:
    """Run one file (e.g. a saved failure) through every path and print what happened."""
    data = Path(path).read_bytes()
    scratch = Path(tempfile.mkdtemp(prefix="dtb-fuzz-"))
    target = str(scratch / Path(path).name)
    tracemalloc.start()
    out = run_case(data, target, path, [], random.Random(0), limit_mb)
    print(json.dumps(dataclasses.asdict(out), indent=1))
    return 0 if out.ok else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz_models", description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0, help="first case's seed; case k is seed + k")
    p.add_argument("--workers", type=int, default=1, help="worker processes (each single-threaded)")
    p.add_argument("--out", default="out/fuzz", help="folder for cases.jsonl, summary.json, failures/")
    p.add_argument("--limit-mb", type=int, default=LIMIT_MB, help="memory limit every case runs under")
    p.add_argument("--no-cli", action="store_true", help="the API paths only")
    p.add_argument("--measure", action="store_true", help="measure each case's peak allocation (tracemalloc)")
    p.add_argument("--subprocess-every", type=int, default=100,
                   help="also run every Nth case through a real `dtb benchmark` process (0: never)")
    p.add_argument("--replay", metavar="FILE", help="run one .tflite through every path and report")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.replay:
        return replay(args.replay, args.limit_mb)
    if args.worker:
        worker(args.first, args.count, Path(args.out), args.limit_mb, not args.no_cli, args.measure,
               args.subprocess_every, args.corpus)
        return 0
    summary = long_run(args.cases, args.seed, args.workers, Path(args.out), args.limit_mb, not args.no_cli,
                       args.measure, args.subprocess_every)
    print(json.dumps(summary, indent=1))
    return 0 if not summary["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
