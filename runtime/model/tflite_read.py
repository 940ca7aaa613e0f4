"""Read a .tflite flatbuffer (every subgraph) into a Graph, with every failure a ModelError naming the spot."""

from __future__ import annotations

import dataclasses
import enum
import importlib
import lzma
import math
import os
import struct

import flatbuffers
import numpy as np

from runtime.ir.errors import ModelError
from runtime.ir.files import read_bytes
from runtime.ir.graph import DType, Graph, Op, QuantParams, Signature, Tensor, printable
from runtime.ir.optypes import OpType
from runtime.ir.options import FOR_OP, TABLES, GenericOptions
from runtime.ops.validate import validate_graph

# OperatorCode's builtin_code: field 3 of the table, at vtable slot 4 + 2 x 3.
_BUILTIN_CODE_SLOT = 10


def builtin_code(oc) -> int:
    """An operator code's op, as TFLite's GetBuiltinCode reads it: the larger of builtin_code and
    deprecated_builtin_code (codes >= 127 live only in the first). The field is read directly: the
    tflite package's BuiltinCode() returns the deprecated field for any code under 127, so a file
    that writes only builtin_code (ai-edge-quantizer's files do) would read as ADD (0)."""
    tab = oc._tab   # the generated accessor's table; the field is read as the accessor would
    offset = tab.Offset(_BUILTIN_CODE_SLOT)
    code = tab.Get(flatbuffers.number_types.Int32Flags, offset + tab.Pos) if offset else 0
    return max(int(code), int(oc.DeprecatedBuiltinCode()))

try:  # The generated schema classes; a core dependency, imported lazily for a clear message.
    import flatbuffers
    import tflite
    from tflite.BuiltinOptions import BuiltinOptions as _UNION
    from tflite.BuiltinOptions2 import BuiltinOptions2 as _UNION2
except ImportError as exc:  # pragma: no cover - install problem
    raise ImportError("the 'tflite' package is required to read .tflite files: pip install tflite") from exc

_UNION_NAMES = {v: k for k, v in vars(_UNION).items() if not k.startswith("_")}
# The second options union (builtin_options_2) holds the tables of StableHLO-era ops.
_UNION2_NAMES = {v: k for k, v in vars(_UNION2).items() if not k.startswith("_")}
# What the generated accessors raise on a damaged flatbuffer (offsets past the end, garbled vtables).
_PARSE_ERRORS = (IndexError, KeyError, struct.error, ValueError, TypeError, UnicodeDecodeError, AttributeError,
                 OverflowError)
# TFLite's kernels handle up to 6 dimensions; NumPy stops at 64. Beyond this a shape is damage.
MAX_RANK = 16
# Converted models hold a handful of subgraphs (one per branch or loop body); more is damage.
MAX_SUBGRAPHS = 10_000
# OperatorCode's builtin_code: its fourth field (schema.fbs), at vtable offset 4 + 2 * 3.
_BUILTIN_CODE_FIELD = 10
# A model stored xz-compressed (the rebuilt AI Hub models in sim/profiles/measurements/aihub/).
XZ_SUFFIX = ".xz"
# FlatBuffers' FLATBUFFERS_MAX_BUFFER_SIZE (flatbuffers/base.h): offsets are signed 32-bit, so no
# .tflite flatbuffer exceeds 2 GiB - 1; a compressed file that expands further is damage.
MAX_FLATBUFFER_BYTES = 2**31 - 1
_XZ_STEP = 16 << 20   # decompressed bytes per step


def load(path: str | os.PathLike, memory_limit: int | None = None) -> Graph:
    """Read a .tflite file (or an xz-compressed .tflite.xz) from disk. `memory_limit` (bytes) bounds
    what densifying sparse constants and decompressing may allocate; None: runtime.limits.memory's default."""
    path = os.fspath(path)
    return loads(model_bytes(path, memory_limit), source=path, memory_limit=memory_limit)


def model_bytes(path: str | os.PathLike, memory_limit: int | None = None) -> bytes:
    """The .tflite flatbuffer at `path`, decompressed in memory when the name ends in .xz."""
    from runtime.limits.memory import resolve_limit

    path = os.fspath(path)
    try:
        content = read_bytes(path)   # a FIFO or a device is refused, not read forever
    except OSError as exc:
        raise ModelError(f"cannot read model file {path}: {exc.strerror}") from None
    if not path.endswith(XZ_SUFFIX):
        return content
    return unxz(content, path, min(resolve_limit(memory_limit), MAX_FLATBUFFER_BYTES))


def unxz(content: bytes, source: str, limit: int) -> bytes:
    """An xz stream decompressed in steps, never past `limit` bytes (a small file may expand to
    gigabytes); a damaged stream or one that expands beyond the limit is a ModelError naming `source`."""
    decompressor = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    out, data = bytearray(), content
    try:
        while not decompressor.eof:
            chunk = decompressor.decompress(data, max_length=min(_XZ_STEP, limit + 1 - len(out)))
            data = b""
            out += chunk
            if len(out) > limit:
                raise ModelError(f"{source}: the xz stream expands to more than {limit} bytes, "
                                 f"above the limit for a model")
            if not chunk and decompressor.needs_input:
                raise ModelError(f"{source} is a truncated xz stream (it ends before its end marker)")
    except lzma.LZMAError as exc:
        raise ModelError(f"{source} is not a valid xz stream: {exc}") from None
    return bytes(out)


def loads(content: bytes, source: str = "<model content>", memory_limit: int | None = None) -> Graph:
    """Read a .tflite model from bytes; `source` names it in error messages."""
    from runtime.limits.memory import resolve_limit

    buf = bytearray(content) if not isinstance(content, bytearray) else content
    if len(buf) < 8 or bytes(buf[4:8]) != b"TFL3":
        raise ModelError(f"{source} is not a TFLite model (no 'TFL3' file identifier; "
                         f"{len(buf)} bytes)")
    try:
        return _Reader(buf, source, resolve_limit(memory_limit)).graph()
    except ModelError:
        raise
    except _PARSE_ERRORS as exc:
        raise ModelError(f"{source} is truncated or malformed: {type(exc).__name__}: {exc}") from None


def _numpy(vector) -> np.ndarray:
    """The generated *AsNumpy accessors return 0 for an absent vector."""
    return vector if isinstance(vector, np.ndarray) else np.zeros(0, np.int32)


def _empty_constants(tensors: tuple[Tensor, ...], ops, inputs) -> tuple[Tensor, ...]:
    """A tensor of zero elements that no op writes and no one feeds (MEAN's empty axes list) has
    no bytes to store, so the file gives it no buffer; TFLite reads it as empty, and so do we."""
    written = {t for op in ops for t in op.outputs} | set(inputs)
    fixed = list(tensors)
    for t, tensor in enumerate(tensors):
        if (tensor.data is None and not tensor.is_variable and t not in written and 0 in tensor.shape
                and tensor.dtype.np != np.object_):
            fixed[t] = dataclasses.replace(tensor, data=np.zeros(tensor.shape, tensor.dtype.np))
    return tuple(fixed)


def builtin_code(oc) -> int:
    """An OperatorCode's op, as TFLite's GetBuiltinCode (tensorflow/lite/schema/schema_utils.cc) reads it:
    the larger of `builtin_code` and `deprecated_builtin_code` (codes >= 127 live only in the first).
    The tflite package's BuiltinCode() answers the deprecated field whenever the code is below 127,
    so a file that sets only `builtin_code` (ai-edge-quantizer writes its QUANTIZE and DEQUANTIZE
    that way) would read as ADD (0); the field is read raw instead."""
    field = oc._tab.Offset(_BUILTIN_CODE_FIELD)
    raw = oc._tab.Get(flatbuffers.number_types.Int32Flags, field + oc._tab.Pos) if field else 0
    return max(raw, oc.DeprecatedBuiltinCode())


def camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


class _Reader:
    def __init__(self, buf: bytearray, source: str, memory_limit: int):
        self.buf, self.source, self.memory_limit = buf, source, memory_limit
        self.model = tflite.Model.GetRootAs(buf, 0)
        self.buffers = 0

    def _count(self, n: int, what: str) -> int:
        """A vector length read from the file: each entry takes at least 4 bytes of it, so a longer
        one is damage (and would otherwise make the reader loop for a long time)."""
        if not 0 <= n <= len(self.buf) // 4:
            raise ModelError(f"{self.source} is malformed: {what} claims {n} entries, more than its "
                             f"{len(self.buf)} bytes can hold")
        return n

    def _each(self, n: int, what: str, read):
        """read(i) for each entry; a damaged one is a ModelError naming it."""
        out = []
        for i in range(self._count(n, what)):
            try:
                out.append(read(i))
            except ModelError:
                raise
            except _PARSE_ERRORS as exc:
                raise ModelError(f"{self.source} is truncated or malformed at {what} #{i}: "
                                 f"{type(exc).__name__}: {exc}") from None
        return out

    def graph(self) -> Graph:
        m = self.model
        count = m.SubgraphsLength()
        if count < 1:
            raise ModelError(f"{self.source} has no subgraph")
        self._count(count, "the subgraph list")
        if count > MAX_SUBGRAPHS:
            raise ModelError(f"{self.source} has {count} subgraphs; at most {MAX_SUBGRAPHS} are supported")
        self.buffers = self._count(m.BuffersLength(), "the buffer list")
        codes = self._each(m.OperatorCodesLength(), "operator code", self._opcode)
        main, *others = self._each(count, "subgraph", lambda k: self._subgraph(k, codes))
        graph = dataclasses.replace(main, signatures=self._signatures(), subgraphs=tuple(others))
        try:  # every subgraph, and the calls between them (indices in range, no recursion)
            return validate_graph(graph)
        except ModelError as exc:
            raise ModelError(f"{self.source}: {exc}") from None

    def _subgraph(self, k: int, codes) -> Graph:
        """Subgraph k (0: the main graph); a fault in another one names it after the file."""
        sg = self.model.Subgraphs(k)
        name = (sg.Name() or b"").decode("utf-8", "replace")
        try:
            tensors = tuple(self._each(sg.TensorsLength(), "tensor", lambda i: self._tensor(sg, i)))
            ops = tuple(self._each(sg.OperatorsLength(), "op", lambda i: self._op(sg.Operators(i), i, codes)))
            inputs = tuple(int(t) for t in _numpy(sg.InputsAsNumpy()))
            tensors = _empty_constants(tensors, ops, inputs)
            return Graph(tensors=tensors, ops=ops, inputs=inputs,
                         outputs=tuple(int(t) for t in _numpy(sg.OutputsAsNumpy())),
                         name=name or (os.path.basename(self.source) if k == 0 else ""), source=self.source)
        except ModelError as exc:
            if k == 0:
                raise
            raise ModelError(self._in_subgraph(str(exc), k, name)) from None

    def _in_subgraph(self, text: str, k: int, name: str) -> str:
        """A reader's message about subgraph k's content, naming the subgraph after the file."""
        where = f"subgraph {k}" + (f" '{printable(name)}'" if name else "")
        if text.startswith(f"{self.source}: "):
            return f"{self.source}: {where}: {text[len(self.source) + 2:]}"
        if text.startswith(self.source):
            return f"{self.source}: {where}{text[len(self.source):]}"
        return f"{self.source}: {where}: {text}"

    def _opcode(self, i: int) -> tuple[int, int, str | None]:
        oc = self.model.OperatorCodes(i)
        code = builtin_code(oc)
        custom = oc.CustomCode()
        if oc.Version() < 1:  # delegates choose by version; schema versions start at 1
            raise ModelError(f"{self.source}: operator code #{i} has version {oc.Version()}; versions start at 1")
        return code, oc.Version(), custom.decode("utf-8", "replace") if custom else None

    def _buffer(self, index: int, what: str) -> np.ndarray | None:
        if index >= self.buffers and (index or self.buffers):  # LiteRT refuses it too
            raise ModelError(f"{self.source}: {what} refers to buffer {index}, but the model has "
                             f"{self.buffers} buffers")
        if index == 0:  # buffer 0 is the empty sentinel
            return None
        b = self.model.Buffers(index)
        if b.Offset() > 1:  # large models keep buffers after the flatbuffer
            start, size = b.Offset(), b.Size()
            if start + size > len(self.buf):
                raise ModelError(f"{self.source} is truncated: buffer {index} of {what} "
                                 f"ends at byte {start + size}, file has {len(self.buf)}")
            return np.frombuffer(bytes(self.buf[start:start + size]), np.uint8)
        data = _numpy(b.DataAsNumpy())
        return data if data.size else None

    def _tensor(self, sg, i: int) -> Tensor:
        t = sg.Tensors(i)
        name = (t.Name() or b"").decode("utf-8", "replace")
        what = f"tensor #{i} '{printable(name)}'"
        try:
            dtype = DType.from_code(t.Type())
        except ModelError:
            raise ModelError(f"{self.source}: {what} has unknown type code {t.Type()}") from None
        shape = tuple(int(d) for d in _numpy(t.ShapeAsNumpy()))
        if len(shape) > MAX_RANK or any(d < 0 for d in shape):
            raise ModelError(f"{self.source}: {what} has shape {list(shape) if len(shape) <= 64 else '...'} "
                             f"(rank {len(shape)}); dimensions must be >= 0, at most {MAX_RANK} of them")
        sig = _numpy(t.ShapeSignatureAsNumpy())
        raw = self._buffer(t.Buffer(), what)
        data = None
        if t.Sparsity() is not None:
            data = densify_sparse(t.Sparsity(), shape, dtype, raw, f"{self.source}: {what}", self.memory_limit)
        elif raw is not None and dtype.np != np.object_ and dtype is not DType.INT4:
            count = math.prod(shape)
            if raw.size != count * dtype.np.itemsize:
                raise ModelError(f"{self.source}: {what} has {raw.size} bytes of data, "
                                 f"shape {list(shape)} of {dtype.name} needs {count * dtype.np.itemsize}")
            data = raw.view(dtype.np.newbyteorder("<")).astype(dtype.np, copy=False).reshape(shape)
        return Tensor(name=name, shape=shape, dtype=dtype, quant=self._quant(t, i, name), data=data,
                      shape_signature=tuple(int(d) for d in sig) if sig.size else None,
                      is_variable=bool(t.IsVariable()))

    def _quant(self, t, i: int, name: str) -> QuantParams | None:
        q = t.Quantization()
        if q is None:
            return None
        if q.DetailsType() != 0:
            raise ModelError(f"{self.source}: tensor #{i} '{printable(name)}' uses custom quantization details "
                             f"(type {q.DetailsType()}), which the testbed does not support")
        scale, zero = _numpy(q.ScaleAsNumpy()), _numpy(q.ZeroPointAsNumpy())
        if not scale.size:
            return None
        if zero.size not in (0, scale.size):
            raise ModelError(f"{self.source}: tensor #{i} '{printable(name)}' has {scale.size} scales but "
                             f"{zero.size} zero points")
        zero = zero if zero.size else np.zeros(scale.size, np.int64)
        return QuantParams(scale=tuple(float(s) for s in scale), zero_point=tuple(int(z) for z in zero),
                           axis=int(q.QuantizedDimension()))

    def _op(self, o, i: int, codes) -> Op:
        idx = o.OpcodeIndex()
        if not 0 <= idx < len(codes):
            raise ModelError(f"{self.source}: op #{i} refers to operator code {idx}, "
                             f"but the model has {len(codes)}")
        code, version, custom = codes[idx]
        try:
            op_type = OpType(code)
        except ValueError:
            raise ModelError(f"{self.source}: op #{i} has builtin code {code}, unknown to this "
                             f"schema version") from None
        # A custom op's parameters live in its own bytes (a FlexBuffer map, or a raw C struct in
        # MediaPipe's ops); builtin ops carry none that a kernel reads.
        blob = bytes(_numpy(o.CustomOptionsAsNumpy()).astype(np.uint8)) if op_type is OpType.CUSTOM else b""
        return Op(type=op_type, inputs=tuple(int(t) for t in _numpy(o.InputsAsNumpy())),
                  outputs=tuple(int(t) for t in _numpy(o.OutputsAsNumpy())),
                  options=self._options(o, op_type, i), version=version, custom_code=custom,
                  custom_options=blob or None)

    def _options(self, o, op_type: OpType, i: int):
        code = o.BuiltinOptionsType()
        second = code == 0 and o.BuiltinOptions2Type() != 0  # a table of the second union
        if second:
            code = o.BuiltinOptions2Type()
        union = (_UNION2_NAMES if second else _UNION_NAMES).get(code)
        if union is None:
            raise ModelError(f"{self.source}: op #{i} {op_type.name}: builtin_options{'_2' if second else ''}_type "
                             f"{code} is not an options table of the schema")
        cls = TABLES.get(union) or (FOR_OP.get(op_type.name) if union == "NONE" else None)
        table = o.BuiltinOptions2() if second else o.BuiltinOptions()
        if table is None or union == "NONE":
            return cls() if cls else None
        fb = getattr(importlib.import_module(f"tflite.{union}"), union)()
        fb.Init(table.Bytes, table.Pos)
        if cls is None:
            return _generic(union, fb)
        values = {}
        for f in dataclasses.fields(cls):
            try:
                values[f.name] = _field(fb, f.name, f.default)
            except ValueError as exc:  # an enum value the schema does not define
                raise ModelError(f"{self.source}: op #{i} {op_type.name}: {union}.{f.name}: {exc}") from None
        return cls(**values)

    def _signatures(self) -> tuple[Signature, ...]:
        def pairs(n, get):
            return tuple(((get(j).Name() or b"").decode("utf-8", "replace"), int(get(j).TensorIndex()))
                         for j in range(self._count(n, "a signature's tensor list")))

        sigs = []
        for k in range(self._count(self.model.SignatureDefsLength(), "the signature list")):
            s = self.model.SignatureDefs(k)
            if s.SubgraphIndex() != 0:
                continue
            sigs.append(Signature(key=(s.SignatureKey() or b"").decode("utf-8", "replace"),
                                  inputs=pairs(s.InputsLength(), s.Inputs),
                                  outputs=pairs(s.OutputsLength(), s.Outputs)))
        return tuple(sigs)


def _field(fb, name: str, default):
    if isinstance(default, tuple):
        getter = getattr(fb, camel(name) + "AsNumpy", None)
        if getter is None:
            return default
        values = _numpy(getter())  # int vectors, or float ones (BucketizeOptions.boundaries)
        return tuple(float(v) if values.dtype.kind == "f" else int(v) for v in values)
    getter = getattr(fb, camel(name), None)
    if getter is None:
        return default
    value = getter()
    if isinstance(default, str):  # a string field (VarHandleOptions' names): bytes, or None when absent
        return (value or b"").decode("utf-8", "replace")
    if isinstance(default, enum.Enum):
        return type(default)(value)
    return type(default)(value)


def _generic(union: str, fb) -> GenericOptions:
    fields = []
    for attr in sorted(dir(fb)):
        if attr.startswith(("_", "Init", "GetRoot")) or attr.endswith(("Length", "IsNone", "HasIdentifier")):
            continue
        getter = getattr(fb, attr)
        try:
            value = getter()
        except TypeError:  # vector element accessors take an index
            continue
        if isinstance(value, (int, float, bool)):
            fields.append((attr, value))
        elif isinstance(value, np.ndarray):
            fields.append((attr, tuple(value.tolist())))
    return GenericOptions(table=union, fields=tuple(fields))


def densify_sparse(sparsity, shape: tuple[int, ...], dtype: DType, raw: np.ndarray | None, what: str,
             memory_limit: int | None = None) -> np.ndarray:
    """A sparse constant (TFLite SparsityParameters) expanded to its dense shape, as LiteRT's
    DENSIFY does (kernels/internal/utils/sparsity_format_converter.cc: Populate). Each traversal
    level is either DENSE or SPARSE_CSR; the levels past the tensor's rank are the block
    dimensions named by block_map. Expanded level by level over all stored values at once."""
    def bad(message: str) -> ModelError:
        return ModelError(f"{what} has malformed sparsity: {message}")

    if raw is None or dtype.np == np.object_ or dtype is DType.INT4:
        raise bad(f"no {dtype.name} values to densify" if raw is None else f"{dtype.name} values cannot be densified")
    if raw.size % dtype.np.itemsize:
        raise bad(f"{raw.size} bytes of data is not a whole number of {dtype.name} values")
    values = raw.view(dtype.np.newbyteorder("<")).astype(dtype.np, copy=False)
    rank = len(shape)
    order = [int(v) for v in _numpy(sparsity.TraversalOrderAsNumpy())]
    # The dense values, plus an int64 index per value and level while the levels are expanded.
    work = math.prod(shape) * (dtype.np.itemsize + 8 * (len(order) + 2))
    if memory_limit is None:
        from runtime.limits.memory import default_limit

        memory_limit = default_limit()
    if work > memory_limit:
        raise bad(f"densifying shape {list(shape)} takes {work} bytes, above the memory limit of {memory_limit}")
    block_map = [int(v) for v in _numpy(sparsity.BlockMapAsNumpy())]
    levels = len(order)
    if levels != rank + len(block_map) or sorted(order) != list(range(levels)) \
            or sorted(order[:rank]) != list(range(rank)):
        raise bad(f"traversal_order {order} does not order the {rank} dims and {len(block_map)} block dims")
    if len(set(block_map)) != len(block_map) or any(not 0 <= d < rank for d in block_map):
        raise bad(f"block_map {block_map} does not name distinct dims of a rank-{rank} tensor")
    if sparsity.DimMetadataLength() != levels:
        raise bad(f"{sparsity.DimMetadataLength()} dim_metadata entries for {levels} traversal levels")
    meta = [sparsity.DimMetadata(k) for k in range(levels)]
    blocks = [meta[order.index(rank + j)].DenseSize() for j in range(len(block_map))]
    sizes = list(shape) + blocks
    for j, d in enumerate(block_map):
        if blocks[j] <= 0 or shape[d] % blocks[j]:
            raise bad(f"block size {blocks[j]} does not divide dim {d} of shape {list(shape)}")
        sizes[d] = shape[d] // blocks[j]

    pos, count, coords = np.zeros(1, np.int64), 1, []  # per stored path: index into this level's arrays
    for level, m in enumerate(meta):
        size = sizes[order[level]]
        if m.Format() == 0:  # DENSE
            if m.DenseSize() != size:
                raise bad(f"level {level} is dense with size {m.DenseSize()}, expected {size}")
            coords = [c.repeat(size) for c in coords] + [np.tile(np.arange(size), len(pos))]
            pos, count = (pos[:, None] * size + np.arange(size)).ravel(), count * size
        elif m.Format() == 1:  # SPARSE_CSR
            segments, indices = _index_vector(m, "segments", bad, level), _index_vector(m, "indices", bad, level)
            if len(segments) != count + 1 or segments[0] != 0 or np.any(np.diff(segments) < 0) \
                    or segments[-1] != len(indices) or np.any((indices < 0) | (indices >= size)):
                raise bad(f"level {level} has inconsistent CSR segments/indices")
            runs = segments[pos + 1] - segments[pos]
            within = np.arange(runs.sum()) - np.repeat(np.cumsum(runs) - runs, runs)
            pos, count = np.repeat(segments[pos], runs) + within, len(indices)
            coords = [c.repeat(runs) for c in coords] + [indices[pos]]
        else:
            raise bad(f"level {level} has unknown format {m.Format()}")
    if len(pos) != values.size:
        raise bad(f"the structure holds {len(pos)} values, the buffer {values.size}")
    index = [None] * rank
    for level in range(rank):
        index[order[level]] = coords[level]
    for level in range(rank, levels):
        j = order[level] - rank
        index[block_map[j]] = index[block_map[j]] * blocks[j] + coords[level]
    dense = np.zeros(math.prod(shape), dtype.np)
    dense[np.ravel_multi_index(index, shape)] = values
    return dense.reshape(shape)


_INDEX_VECTORS = {1: "Int32Vector", 2: "Uint16Vector", 3: "Uint8Vector"}


def _index_vector(meta, which: str, bad, level: int) -> np.ndarray:
    """A CSR segments or indices array, stored as any of the SparseIndexVector union members."""
    kind = meta.ArraySegmentsType() if which == "segments" else meta.ArrayIndicesType()
    table = meta.ArraySegments() if which == "segments" else meta.ArrayIndices()
    if kind not in _INDEX_VECTORS or table is None:
        raise bad(f"level {level} is SPARSE_CSR without {which}")
    cls = getattr(importlib.import_module(f"tflite.{_INDEX_VECTORS[kind]}"), _INDEX_VECTORS[kind])()
    cls.Init(table.Bytes, table.Pos)
    return _numpy(cls.ValuesAsNumpy()).astype(np.int64)
