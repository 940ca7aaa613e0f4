"""Write a Graph as a .tflite flatbuffer that LiteRT loads (every subgraph, signatures, quantization)."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import importlib
import os

import flatbuffers
import numpy as np

from runtime.ir.graph import Graph, Tensor
from runtime.ir.options import GenericOptions
from runtime.model.tflite_read import camel
from tflite.BuiltinOptions import BuiltinOptions as _UNION
from tflite.BuiltinOptions2 import BuiltinOptions2 as _UNION2

_SCHEMA_VERSION = 3
_DEPRECATED_CODE_LIMIT = 127  # codes above this go only in the extended builtin_code field


def dumps(graph: Graph) -> bytes:
    """Serialise a Graph to .tflite bytes."""
    return _Writer(graph).finish()


def save(graph: Graph, path: str | os.PathLike) -> None:
    """Write a Graph to a .tflite file; written to a temporary name first, then renamed."""
    path = os.fspath(path)
    tmp = f"{path}.tmp{os.getpid()}"
    data = dumps(graph)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:  # no half-written file left beside the one asked for
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class _Writer:
    def __init__(self, graph: Graph):
        self.g = graph
        self.b = flatbuffers.Builder(1024 + sum(t.data.nbytes for g in (graph, *graph.subgraphs)
                                                for t in g.tensors if t.is_constant))
        self.buffers: list[int] = []
        self.opcodes: dict[tuple, int] = {}

    def _vector(self, start, values, add) -> int:
        start(self.b, len(values))
        for v in reversed(list(values)):
            add(v)
        return self.b.EndVector()

    def _ints(self, start, values) -> int:
        return self._vector(start, [int(v) for v in values], self.b.PrependInt32)

    def _numbers(self, start, values) -> int:
        """An options vector: float32 where it holds floats (BucketizeOptions.boundaries), else int32."""
        if any(isinstance(v, float) for v in values):
            return self._vector(start, [float(v) for v in values], self.b.PrependFloat32)
        return self._ints(start, values)

    def _offsets(self, start, offsets) -> int:
        return self._vector(start, offsets, self.b.PrependUOffsetTRelative)

    def _data(self, array: np.ndarray) -> int:
        raw = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        self.b.StartVector(1, len(raw), 16)  # 16-byte alignment, as TFLite's converter writes
        self.b.head -= len(raw)
        self.b.Bytes[self.b.head:self.b.head + len(raw)] = raw
        return self.b.EndVector()

    def finish(self) -> bytes:
        b, g = self.b, self.g
        self.buffers = [self._buffer(None)]  # buffer 0 is the empty sentinel; every subgraph shares the list
        subgraphs = [self._subgraph(s) for s in (g, *g.subgraphs)]
        codes = [self._opcode(key) for key in sorted(self.opcodes, key=self.opcodes.get)]
        sigs = [self._signature(s) for s in g.signatures]
        M = _schema("Model")
        sg_vec = self._offsets(M.ModelStartSubgraphsVector, subgraphs)
        oc_vec = self._offsets(M.ModelStartOperatorCodesVector, codes)
        buf_vec = self._offsets(M.ModelStartBuffersVector, self.buffers)
        sig_vec = self._offsets(M.ModelStartSignatureDefsVector, sigs)
        desc = b.CreateString("delegate-testbed")
        M.ModelStart(b)
        M.ModelAddVersion(b, _SCHEMA_VERSION)
        M.ModelAddOperatorCodes(b, oc_vec)
        M.ModelAddSubgraphs(b, sg_vec)
        M.ModelAddDescription(b, desc)
        M.ModelAddBuffers(b, buf_vec)
        M.ModelAddSignatureDefs(b, sig_vec)
        b.Finish(M.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())

    def _subgraph(self, g: Graph) -> int:
        """One SubGraph table: the main graph, or a body of a control-flow op."""
        b, S = self.b, _schema("SubGraph")
        tensors = self._tensors(g)
        ops = [self._op(op) for op in g.ops]
        name = b.CreateString(g.name)
        t_vec = self._offsets(S.SubGraphStartTensorsVector, tensors)
        i_vec = self._ints(S.SubGraphStartInputsVector, g.inputs)
        o_vec = self._ints(S.SubGraphStartOutputsVector, g.outputs)
        op_vec = self._offsets(S.SubGraphStartOperatorsVector, ops)
        S.SubGraphStart(b)
        S.SubGraphAddTensors(b, t_vec)
        S.SubGraphAddInputs(b, i_vec)
        S.SubGraphAddOutputs(b, o_vec)
        S.SubGraphAddOperators(b, op_vec)
        S.SubGraphAddName(b, name)
        return S.SubGraphEnd(b)

    def _buffer(self, data: np.ndarray | None) -> int:
        B = _schema("Buffer")
        vec = self._data(data) if data is not None else None
        B.BufferStart(self.b)
        if vec is not None:
            B.BufferAddData(self.b, vec)
        return B.BufferEnd(self.b)

    def _tensors(self, g: Graph) -> list[int]:
        tensors = []
        for t in g.tensors:
            index = 0
            if t.is_constant:
                self.buffers.append(self._buffer(t.data))
                index = len(self.buffers) - 1
            tensors.append(self._tensor(t, index))
        return tensors

    def _tensor(self, t: Tensor, buffer: int) -> int:
        b, T = self.b, _schema("Tensor")
        name = b.CreateString(t.name)
        shape = self._ints(T.TensorStartShapeVector, t.shape)
        sig = self._ints(T.TensorStartShapeSignatureVector, t.shape_signature) if t.shape_signature else None
        quant = self._quant(t) if t.quant is not None else None
        T.TensorStart(b)
        T.TensorAddShape(b, shape)
        T.TensorAddType(b, t.dtype.code)
        T.TensorAddBuffer(b, buffer)
        T.TensorAddName(b, name)
        if quant is not None:
            T.TensorAddQuantization(b, quant)
        if sig is not None:
            T.TensorAddShapeSignature(b, sig)
        T.TensorAddIsVariable(b, t.is_variable)
        return T.TensorEnd(b)

    def _quant(self, t: Tensor) -> int:
        b, Q = self.b, _schema("QuantizationParameters")
        scale = self._vector(Q.QuantizationParametersStartScaleVector, t.quant.scale, b.PrependFloat32)
        zero = self._vector(Q.QuantizationParametersStartZeroPointVector, t.quant.zero_point, b.PrependInt64)
        Q.QuantizationParametersStart(b)
        Q.QuantizationParametersAddScale(b, scale)
        Q.QuantizationParametersAddZeroPoint(b, zero)
        Q.QuantizationParametersAddQuantizedDimension(b, t.quant.axis)
        return Q.QuantizationParametersEnd(b)

    def _opcode(self, key: tuple) -> int:
        code, version, custom = key
        b, C = self.b, _schema("OperatorCode")
        name = b.CreateString(custom) if custom else None
        C.OperatorCodeStart(b)
        C.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, _DEPRECATED_CODE_LIMIT))
        C.OperatorCodeAddBuiltinCode(b, code)
        C.OperatorCodeAddVersion(b, version)
        if name is not None:
            C.OperatorCodeAddCustomCode(b, name)
        return C.OperatorCodeEnd(b)

    def _op(self, op) -> int:
        b, O = self.b, _schema("Operator")
        key = (int(op.type), op.version, op.custom_code)
        idx = self.opcodes.setdefault(key, len(self.opcodes))
        union, table = self._options(op.options)
        ins = self._ints(O.OperatorStartInputsVector, op.inputs)
        outs = self._ints(O.OperatorStartOutputsVector, op.outputs)
        custom = b.CreateByteVector(bytes(op.custom_options)) if op.custom_options else None
        O.OperatorStart(b)
        O.OperatorAddOpcodeIndex(b, idx)
        O.OperatorAddInputs(b, ins)
        O.OperatorAddOutputs(b, outs)
        if table is not None and union < 0:  # a table of the second union (StableHLO-era ops)
            O.OperatorAddBuiltinOptions2Type(b, -union)
            O.OperatorAddBuiltinOptions2(b, table)
        elif table is not None:
            O.OperatorAddBuiltinOptionsType(b, union)
            O.OperatorAddBuiltinOptions(b, table)
        if custom is not None:
            O.OperatorAddCustomOptions(b, custom)
        return O.OperatorEnd(b)

    def _options(self, options) -> tuple[int, int | None]:
        if options is None or isinstance(options, GenericOptions):
            return 0, None
        name = type(options).__name__
        mod = _schema(name)
        values = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
        wide = {f.name for f in dataclasses.fields(options) if f.metadata.get("int64")}
        vectors = {k: self._vector(getattr(mod, f"{name}Start{camel(k)}Vector"), [int(x) for x in v],
                                   self.b.PrependInt64) if k in wide
                   else self._numbers(getattr(mod, f"{name}Start{camel(k)}Vector"), v)
                   for k, v in values.items() if isinstance(v, tuple)}
        # Strings (VarHandleOptions' names) are built before the table, as vectors are.
        vectors.update({k: self.b.CreateString(v) for k, v in values.items() if isinstance(v, str) and v})
        values = {k: v for k, v in values.items() if not (isinstance(v, str) and not v)}  # "" stays absent
        getattr(mod, f"{name}Start")(self.b)
        for k, v in values.items():
            adder = getattr(mod, f"{name}Add{camel(k)}", None)
            if adder is not None:
                adder(self.b, vectors[k] if k in vectors else _scalar(v))
        # A table of the second union is returned with its code negated.
        code = getattr(_UNION, name, None)
        union = code if code is not None else -getattr(_UNION2, name)
        return union, getattr(mod, f"{name}End")(self.b)

    def _signature(self, sig) -> int:
        b, D, M = self.b, _schema("SignatureDef"), _schema("TensorMap")

        def maps(pairs):
            out = []
            for n, t in pairs:
                s = b.CreateString(n)
                M.TensorMapStart(b)
                M.TensorMapAddName(b, s)
                M.TensorMapAddTensorIndex(b, t)
                out.append(M.TensorMapEnd(b))
            return out

        ins = self._offsets(D.SignatureDefStartInputsVector, maps(sig.inputs))
        outs = self._offsets(D.SignatureDefStartOutputsVector, maps(sig.outputs))
        key = b.CreateString(sig.key)
        D.SignatureDefStart(b)
        D.SignatureDefAddInputs(b, ins)
        D.SignatureDefAddOutputs(b, outs)
        D.SignatureDefAddSignatureKey(b, key)
        D.SignatureDefAddSubgraphIndex(b, 0)
        return D.SignatureDefEnd(b)


def _schema(table: str):
    """The generated module for one schema table (the package's attributes are the classes)."""
    return importlib.import_module(f"tflite.{table}")


def _scalar(v):
    if isinstance(v, enum.Enum):
        return int(v.value)
    return v
