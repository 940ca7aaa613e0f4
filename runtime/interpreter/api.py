"""LiteRT's Python Interpreter API over the testbed's kernels, on the host or on a simulated phone."""

from __future__ import annotations

import enum
import functools
import operator
import os
import threading
from typing import Any

import numpy as np

from runtime.limits import memory

from runtime.model import tflite_read as tflite_io
from runtime.interpreter.plan import build_plan, delegated_ops, precheck, split_constant
from runtime.ops import opcheck
from runtime.ir.graph import Graph, Tensor
from runtime.ir.errors import ModelError
from runtime.interpreter.model_state import ModelState
from runtime.ops import Node
from runtime.ops.parallel import set_num_threads
from runtime.ops.random import restart_generators
from runtime.ops.steps import named, run_steps
from runtime.ops.validate import check_model
from runtime.ops.temporaries import prepared_by_allocation, temporaries

__all__ = ["Interpreter", "SignatureRunner", "OpResolverType"]


class OpResolverType:
    """Accepted for API compatibility with LiteRT; the testbed has one set of kernels (runtime/ops)."""

    AUTO = 0
    BUILTIN = 1
    BUILTIN_REF = 2
    BUILTIN_WITHOUT_DEFAULT_DELEGATES = 3


def _exclusive(method):
    """One thread at a time: a second thread calling in while another is inside gets a RuntimeError
    at once, instead of both writing the same tensors and reading each other's outputs (LiteRT's
    interpreter is not thread-safe either; it just returns wrong values). The owner may re-enter."""
    @functools.wraps(method)
    def guarded(self, *args, **kwargs):
        if not self._busy.acquire(blocking=False):
            raise RuntimeError(f"Interpreter.{method.__name__}: this interpreter is in use by another thread; "
                               f"use one interpreter per thread")
        try:
            return method(self, *args, **kwargs)
        finally:
            self._busy.release()
    return guarded


def _check_arguments(model_path, model_content, experimental_delegates, num_threads, device, soc, stream,
                     experimental_op_resolver_type) -> None:
    """Each argument of a wrong type named in a TypeError (ValueError where LiteRT raises one),
    before anything is read."""
    from sim.soc import SoC
    from sim.spec import Profile

    def wrong(name: str, want: str, value: Any) -> TypeError:
        return TypeError(f"Interpreter: {name} must be {want}, not {type(value).__name__} {value!r:.40}")

    if model_path is not None and not isinstance(model_path, (str, os.PathLike)):
        raise wrong("model_path", "a str or os.PathLike", model_path)
    if model_content is not None and not isinstance(model_content, (bytes, bytearray, memoryview)):
        raise wrong("model_content", "bytes", model_content)
    if experimental_delegates is not None and not isinstance(experimental_delegates, (list, tuple)):
        raise wrong("experimental_delegates", "a list of delegates", experimental_delegates)
    if num_threads is not None:
        if isinstance(num_threads, bool) or not isinstance(num_threads, int):
            raise ValueError("type of num_threads should be int")   # LiteRT's words (interpreter.py)
        if num_threads < 1 and num_threads != -1:
            raise ValueError("num_threads should >= 1")
    if device is not None and not isinstance(device, (str, os.PathLike, Profile)):
        raise wrong("device", "a profile name or path (str) or a sim.spec.Profile", device)
    if soc is not None and not isinstance(soc, SoC):
        raise wrong("soc", "a sim.soc.SoC", soc)
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise wrong("stream", "an int", stream)
    if stream < 0:
        raise ValueError(f"Interpreter: stream must be >= 0, not {stream}")
    _check_resolver(experimental_op_resolver_type)
    # memory_limit and while_limit: their own checks name them (runtime.limits.memory, model_state)


def _check_resolver(resolver: Any) -> None:
    """One of OpResolverType's values, ours or LiteRT's enum member of the same name; anything else
    raises LiteRT's ValueError (interpreter.py), though the testbed has one set of kernels either way."""
    names = {k: v for k, v in vars(OpResolverType).items() if not k.startswith("_")}
    if isinstance(resolver, enum.Enum):   # LiteRT's OpResolverType member
        known = resolver.name in names
    else:
        known = not isinstance(resolver, bool) and isinstance(resolver, int) and resolver in names.values()
    if not known:
        raise ValueError(f"Unrecognized passed in op resolver type: {resolver}")


class Interpreter:
    """Drop-in for ai_edge_litert.interpreter.Interpreter: the testbed's kernels on the host, and with
    delegates, a device or timing_only, the same plan on a simulated phone."""

    def __init__(self, model_path: str | os.PathLike | None = None, model_content: bytes | None = None,
                 experimental_delegates: list | None = None, num_threads: int | None = None,
                 experimental_op_resolver_type: Any = OpResolverType.AUTO,
                 experimental_preserve_all_tensors: bool = False, graph: Graph | None = None,
                 device: Any = None, timing_only: bool = False, soc: Any = None, stream: int = 0,
                 memory_limit: int | None = None, while_limit: int | None = None, **_: Any):
        """`memory_limit`: bytes the plan may need (activations, constants, scratch, delegate
        buffers), checked before anything is allocated; None: runtime.limits.memory.default_limit().
        `while_limit`: iterations a WHILE op may run before it stops with a ModelError; None:
        runtime.interpreter.model_state.WHILE_LIMIT."""
        self._busy = threading.RLock()
        sources = [s is not None for s in (model_path, model_content, graph)]
        if sum(sources) == 0:
            raise ValueError("`model_path` or `model_content` must be specified.")
        if sum(sources) > 1:
            raise ValueError("Can't both provide `model_path` and `model_content`")
        _check_arguments(model_path, model_content, experimental_delegates, num_threads, device, soc, stream,
                         experimental_op_resolver_type)
        if graph is not None and not isinstance(graph, Graph):
            raise TypeError(f"Interpreter: graph must be a runtime.ir.graph.Graph, not {type(graph).__name__}")
        self._limit = memory.resolve_limit(memory_limit)
        if graph is None:
            graph = (tflite_io.load(model_path, self._limit) if model_path is not None
                     else tflite_io.loads(model_content, memory_limit=self._limit))
        self._graph = graph
        self._threads = 1 if num_threads in (None, -1) else num_threads
        # The simulated phone gets the threads asked for (-1: all its big cores); the host's math
        # never uses more threads than the host has, or BLAS would thrash.
        self._host_threads = max(1, min(self._threads, os.cpu_count() or 1))
        sim_threads = 64 if num_threads == -1 else self._threads
        with named(graph):
            # Every check of the model, once, as its plan is built (a reader or builder may have
            # passed it through validate_graph before: that gate keeps no findings).
            checks = check_model(graph)
            checked = checks.main
            # The other subgraphs (control flow) run through the same plans and step loop as subgraph 0.
            self._state = ModelState(graph, checks, lambda g, state: build_plan(g, timing_only, state)[0],
                                     run_steps, lambda: self._limit - self._need.total, while_limit)
            plan, self.estimated_ops = build_plan(graph, timing_only, self._state)
            self._folded, self._plan = split_constant(graph, plan)
            # Before anything is allocated (delegates prepare below): the plan's bytes, held to the
            # limit; a timing-only plan allocates no activation (its ops' math never runs).
            self._need = (memory.timing_need(graph, checked.shapes, (step.index for step in self._folded))
                          if timing_only else memory.plan_need(graph, checked.shapes))
            memory.check_need(self._need, self._limit, graph.label)
            self._state.check_memory()
        self._shapes = [t.shape for t in graph.tensors]
        self._guard = checked.deferred  # ops whose output shapes hang on values seen only at run time
        self._resized = False
        self._values: list[np.ndarray | None] | None = None
        # What the kernels' temporaries follow: tensor shapes at the last allocation, the nodes
        # prepared so far, and whether an invoke has run them all.
        self._prepared: list | None = None
        self._prepared_ops: set[int] = set()
        self._evaluated = False
        self._sim = None
        if experimental_delegates or device is not None or soc is not None or timing_only:
            from runtime.interpreter.simulation import make_simulation

            self._sim = make_simulation(graph, list(experimental_delegates or []), device, soc,
                                        sim_threads, timing_only, stream)
            self._state.recording = True  # the simulation charges the ops control flow runs
            delegated = delegated_ops(self._sim)
            if delegated:
                folded = (step.index for step in self._folded)
                self._need = (memory.timing_need(graph, checked.shapes, folded, delegated) if timing_only
                              else memory.plan_need(graph, checked.shapes, delegated))
                memory.check_need(self._need, self._limit, graph.label, "the model with its delegates")

    # -- construction ---------------------------------------------------------------------------

    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def simulation(self):
        """The simulated phone this interpreter runs on (None on the plain CPU path)."""
        return self._sim

    # -- LiteRT API -----------------------------------------------------------------------------

    @_exclusive
    def allocate_tensors(self) -> None:
        if self._resized:  # new input shapes: check every op and the bytes again before allocating
            with named(self._graph):
                checked = opcheck.check_graph(self._graph, {t: self._shapes[t] for t in self._graph.inputs},
                                              strict=False)
                self._need = memory.plan_need(self._graph, checked.shapes, delegated_ops(self._sim))
                memory.check_need(self._need, self._limit, self._graph.label, "the model at the new input shapes")
            self._guard = frozenset(range(len(self._graph.ops)))
        values: list[np.ndarray | None] = [None] * len(self._graph.tensors)
        for t, tensor in enumerate(self._graph.tensors):
            if tensor.is_constant:
                values[t] = tensor.data
        for t in self._graph.inputs:
            values[t] = np.zeros(self._shapes[t], self._graph.tensors[t].dtype.np)
        self._values = values
        self.reset_all_variables()
        self._run(self._folded)
        if self._resized:
            saved = self._state.save()
            self._run(self._plan)  # learn every tensor's shape for the new input sizes
            self._state.restore(saved)  # that run leaves resource variables and CALL_ONCE as they were
            restart_generators(step.node for step in self._plan)  # LiteRT prepares anew: draws restart
            self._shapes = [v.shape if v is not None else s for v, s in zip(self._values, self._shapes)]
            self.reset_all_variables()
            self._run(self._folded)
        self._prepared = list(self._shapes)
        self._prepared_ops.update(prepared_by_allocation(self._graph))
        if self._sim is not None:
            entries = {step.index: step for step in self._plan}
            folded = frozenset(step.index for step in self._folded)
            self._sim.allocate(self._shapes, folded, lambda i: self._run((entries[i],)), values)

    @_exclusive
    def reset_all_variables(self) -> None:
        self._state.reset_variable_tensors()  # resource variables keep their values, as in LiteRT
        if self._values is None:
            return
        for t, tensor in enumerate(self._graph.tensors):
            if tensor.is_variable:
                self._values[t] = (np.array(tensor.data, copy=True) if tensor.is_constant
                                   else np.zeros(tensor.shape, tensor.dtype.np))

    def _details(self, t: int) -> dict:
        tensor: Tensor = self._graph.tensors[t]
        q = tensor.quant
        sig = tensor.shape_signature if tensor.shape_signature is not None else self._shapes[t]
        return {
            "name": tensor.name,
            "index": t,
            "shape": np.array(self._shapes[t], np.int32),
            "shape_signature": np.array(sig, np.int32),
            "dtype": tensor.dtype.np.type,
            "quantization": (q.scale[0], q.zero_point[0]) if q is not None and not q.per_channel else (0.0, 0),
            "quantization_parameters": {
                "scales": np.array(q.scale if q else (), np.float32),
                "zero_points": np.array(q.zero_point if q else (), np.int32),
                "quantized_dimension": q.axis if q else 0,
                "block_size": 0,
            },
            "sparsity_parameters": {},
        }

    def get_input_details(self) -> list[dict]:
        return [self._details(t) for t in self._graph.inputs]

    def get_output_details(self) -> list[dict]:
        return [self._details(t) for t in self._graph.outputs]

    def get_tensor_details(self, subgraph_index: int = 0) -> list[dict]:
        if subgraph_index != 0:
            raise ValueError(f"subgraph_index is out of range: {subgraph_index} for the model, "
                             f"which has 1 subgraphs.")
        return [self._details(t) for t in range(len(self._graph.tensors))] + self._temporary_details()

    def _temporary_details(self) -> list[dict]:
        """What the reference kernels append in Init and Prepare (runtime/ops/temporaries.py), once
        allocate_tensors() has prepared them; delegated nodes are not prepared."""
        if self._prepared is None:
            return []
        skip = set(delegated_ops(self._sim)) if self._sim is not None else set()
        ran = set(range(len(self._graph.ops))) - skip if self._evaluated else set()
        slots = temporaries(self._graph, self._prepared, (self._prepared_ops - skip) | ran, ran)
        base = len(self._graph.tensors)
        return [{
            "name": tmp.name, "index": base + k, "shape": np.array(tmp.shape, np.int32),
            "shape_signature": np.array(tmp.shape, np.int32), "dtype": tmp.dtype.np.type,
            "quantization": (0.0, 0),
            "quantization_parameters": {"scales": np.array((), np.float32), "zero_points": np.array((), np.int32),
                                        "quantized_dimension": 0, "block_size": 0},
            "sparsity_parameters": {},
        } for k, tmp in enumerate(slots) if tmp.dtype is not None]

    def _check_index(self, t: int, name: str = "tensor_index") -> int:
        try:
            t = operator.index(t)
        except TypeError:  # LiteRT's binding refuses it too (a TypeError listing its signature)
            raise TypeError(f"Interpreter: {name} must be an int, not {type(t).__name__} {t!r:.40}") from None
        if not 0 <= t < len(self._graph.tensors):
            raise ValueError(f"Invalid tensor index {t} exceeds max tensor index "
                             f"{len(self._graph.tensors)}")
        return t

    @_exclusive
    def set_tensor(self, tensor_index: int, value: Any) -> None:
        t = self._check_index(tensor_index)
        if self._values is None:  # LiteRT's type and words: the tensor has no buffer yet
            raise ValueError("Cannot set tensor: Tensor is unallocated. Try calling allocate_tensors() first")
        tensor = self._graph.tensors[t]
        value = np.asarray(value)
        if value.dtype != tensor.dtype.np:
            raise ValueError(f"Cannot set tensor: Got value of type {_type_name(value.dtype)} but expected "
                             f"type {tensor.dtype.name} for input {t}, name: {tensor.name} ")
        want = self._shapes[t]
        if value.ndim != len(want):
            raise ValueError(f"Cannot set tensor: Dimension mismatch. Got {value.ndim} but expected "
                             f"{len(want)} for input {t}.")
        for d, (got, exp) in enumerate(zip(value.shape, want)):
            if got != exp:
                raise ValueError(f"Cannot set tensor: Dimension mismatch. Got {got} but expected {exp} "
                                 f"for dimension {d} of input {t}.")
        self._values[t] = None  # the old buffer goes before the copy is made: one input's bytes, not two
        self._values[t] = np.array(value, copy=True)

    @_exclusive
    def resize_tensor_input(self, input_index: int, tensor_size: Any, strict: bool = False) -> None:
        t = self._check_index(input_index, "input_index")
        if t not in self._graph.inputs:
            raise ValueError(f"tensor {t} is not an input of the model")
        size = _dims(t, tensor_size)
        if any(d < 0 for d in size) or len(size) > tflite_io.MAX_RANK:
            raise ValueError(f"Cannot resize input {t} to {list(size)}: dimensions must be >= 0, at most "
                             f"{tflite_io.MAX_RANK} of them")
        # Without a signature every dimension is fixed: strict allows no change (LiteRT refuses it too).
        sig = self._graph.tensors[t].shape_signature
        sig = self._graph.tensors[t].shape if sig is None else sig
        if strict:
            if len(size) != len(sig):
                raise ValueError(f"ResizeInputTensorStrict keeps the rank: input {t} has {len(sig)} dimensions, "
                                 f"not {len(size)}.")
            for d, (new, s) in enumerate(zip(size, sig)):
                if s != -1 and new != s:
                    raise ValueError(f"ResizeInputTensorStrict only allows mutating unknown dimensions "
                                     f"identified by -1 (dimension {d} of input {t}).")
        if size != self._shapes[t]:
            self._shapes[t] = size
            self._resized = True
        self._values = None

    @_exclusive
    def invoke(self) -> None:
        if self._values is None:
            raise RuntimeError("Invoke called on model that is not ready.")
        if self._sim is not None:
            self._sim.invoke()
        else:
            self._run(self._plan)
        self._evaluated = True

    @_exclusive
    def invoke_with_cpu_fallback(self) -> None:
        """Invoke; if a delegate fails while running, drop all delegates and rerun on the CPU
        (TFLite's InterpreterUtils::InvokeWithCPUFallback). Without delegates, a plain invoke."""
        if self._values is None:
            raise RuntimeError("Invoke called on model that is not ready.")
        if self._sim is not None:
            self._sim.invoke_with_cpu_fallback()
        else:
            self._run(self._plan)
        self._evaluated = True

    @_exclusive
    def get_tensor(self, tensor_index: int, subgraph_index: int = 0) -> np.ndarray:
        self._check_subgraph(subgraph_index)
        t = self._check_index(tensor_index)
        values = self._allocated()
        if values[t] is None:
            return self._zeros(t)
        return np.array(values[t], copy=True)

    def _zeros(self, t: int) -> np.ndarray:
        """A tensor a timing-only run never computed, read back as zeros of its shape: within the
        memory limit like anything else the interpreter allocates (a declared shape of 2**31 rows
        would otherwise ask the host for gigabytes)."""
        dtype = self._graph.tensors[t].dtype.np
        need = memory.array_bytes(self._shapes[t], dtype.itemsize)
        if need > self._limit - self._need.total:
            raise ModelError(f"{self._graph.label}: {self._graph.describe_tensor(t)} needs {memory.format_bytes(need)} "
                             f"to read back (a timing-only run computes no values: zeros), above what the memory "
                             f"limit of {memory.format_bytes(self._limit)} leaves")
        return np.zeros(self._shapes[t], dtype)

    def tensor(self, tensor_index: int):
        t = self._check_index(tensor_index)
        return lambda: self._allocated()[t]

    def _check_subgraph(self, k: Any) -> None:
        """Subgraph 0, whose tensors the interpreter keeps; another index in range is refused by name
        (a control-flow subgraph's intermediates are released after each run), one out of range with
        LiteRT's ValueError."""
        try:
            k = operator.index(k)
        except TypeError:
            raise TypeError(f"Interpreter: subgraph_index must be an int, not {type(k).__name__} {k!r:.40}") from None
        if not 0 <= k < self.num_subgraphs():
            raise ValueError(f"Invalid subgraph index {k} exceeds max subgraph index {self.num_subgraphs()}")
        if k != 0:
            raise ValueError(f"get_tensor reads the tensors of subgraph 0 only, not of subgraph {k} "
                             f"({self._graph.describe_subgraph(k)})")

    def _allocated(self) -> list:
        """The tensors' values; before allocate_tensors (or after a resize) LiteRT has no buffers
        either and says so with this ValueError."""
        if self._values is None:
            raise ValueError("Tensor data is null. Run allocate_tensors() first")
        return self._values

    def num_subgraphs(self) -> int:
        """The model's subgraphs: the main graph and the bodies of its control-flow ops."""
        return len(self._graph.subgraphs) + 1

    def get_signature_list(self) -> dict:
        return {s.key: {"inputs": [n for n, _ in s.inputs], "outputs": [n for n, _ in s.outputs]}
                for s in self._graph.signatures}

    def _get_full_signature_list(self) -> dict:
        return {s.key: {"inputs": dict(s.inputs), "outputs": dict(s.outputs)} for s in self._graph.signatures}

    def get_signature_runner(self, signature_key: str | None = None) -> "SignatureRunner":
        sigs = self._get_full_signature_list()
        if signature_key is None:
            if len(sigs) != 1:
                raise ValueError(f"SignatureDef signature_key is None and model has {len(sigs)} Signatures. "
                                 f"None is only allowed when the model has 1 SignatureDef")
            signature_key = next(iter(sigs))
        return SignatureRunner(self, signature_key)

    # -- execution ------------------------------------------------------------------------------

    def _run(self, plan):
        """Run steps of subgraph 0's plan; returns what other subgraphs ran meanwhile, with the
        shapes they ran at (control-flow ops: the simulation charges those ops too)."""
        set_num_threads(self._host_threads)
        run_steps(plan, self._values, self._graph, not self._resized, self._guard, self._precheck)
        return self._state.take_ran()

    def _precheck(self, node: Node, strict: bool) -> None:
        """The step loop's check of a guarded op, on this interpreter's values and memory budget."""
        precheck(self._graph, self._values, self._shapes, self._need, self._limit, node, strict)


def _type_name(dtype: np.dtype) -> str:
    """LiteRT's name of a value's type; text and Python objects are its STRING (interpreter_wrapper)."""
    dtype = np.dtype(dtype)
    return "STRING" if dtype.kind in "OSU" else dtype.name.upper()


def _dims(t: int, tensor_size: Any) -> tuple[int, ...]:
    """resize_tensor_input's new shape: a 1-D list of integers (LiteRT's ValueError for another
    rank); a fractional dimension truncates as LiteRT's int32 conversion does."""
    size = np.array(tensor_size, dtype=object)  # any integers, ragged lists too (refused below)
    if size.ndim != 1:
        raise ValueError(f"Shape should be 1D instead of {size.ndim}.")
    try:
        return tuple(int(d) for d in size)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"Cannot resize input {t} to {list(size)!r:.80}: every dimension must be an integer") from None


class SignatureRunner:
    """Callable for one SignatureDef: keyword inputs by name in, dict of outputs by name back."""

    def __init__(self, interpreter: Interpreter, signature_key: str):
        sigs = interpreter._get_full_signature_list()
        if signature_key not in sigs:
            raise ValueError(f'Invalid signature_key provided: "{signature_key}".')
        self._interpreter = interpreter
        self._inputs = sigs[signature_key]["inputs"]
        self._outputs = sigs[signature_key]["outputs"]

    def __call__(self, **kwargs: Any) -> dict[str, np.ndarray]:
        if len(kwargs) != len(self._inputs):
            raise ValueError(f"Invalid number of inputs provided for running a SignatureDef, "
                             f"expected {len(self._inputs)} vs provided {len(kwargs)}")
        it = self._interpreter
        for name, value in kwargs.items():
            if name not in self._inputs:
                raise ValueError(f"Invalid Input name ({name}) for SignatureDef")
            it.resize_tensor_input(self._inputs[name], np.shape(value))
        it.allocate_tensors()
        for name, value in kwargs.items():
            it.set_tensor(self._inputs[name], np.asarray(value))
        it.invoke()
        return {name: it.get_tensor(t) for name, t in self._outputs.items()}

    def get_input_details(self) -> dict:
        return {n: self._interpreter._details(t) for n, t in self._inputs.items()}

    def get_output_details(self) -> dict:
        return {n: self._interpreter._details(t) for n, t in self._outputs.items()}
