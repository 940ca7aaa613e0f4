"""An Interpreter with LiteRT's Python API that runs a Graph on the NumPy reference kernels."""

from __future__ import annotations

import contextlib
import os
from typing import Any

import numpy as np

from runtime import memory, tflite_io
from runtime.ops import opcheck
from runtime.ir.errors import ModelError
from runtime.ir.graph import Graph, Tensor
from runtime.model_state import ModelState
from runtime.ops.opcheck_seq import svdf_int16_tensors
from runtime.ops import Node, select_kernel
from runtime.ops.control import STATEFUL
from runtime.ops.parallel import set_num_threads
from runtime.ops.random import restart_generators
from runtime.ops.temporaries import prepared_by_allocation, temporaries
from runtime.ops.validate import validate_graph

__all__ = ["Interpreter", "SignatureRunner", "OpResolverType"]


class OpResolverType:
    """Accepted for API compatibility with LiteRT; the testbed has one set of reference kernels."""

    AUTO = 0
    BUILTIN = 1
    BUILTIN_REF = 2
    BUILTIN_WITHOUT_DEFAULT_DELEGATES = 3


class Interpreter:
    """Drop-in for ai_edge_litert.interpreter.Interpreter on the CPU reference kernels."""

    def __init__(self, model_path: str | os.PathLike | None = None, model_content: bytes | None = None,
                 experimental_delegates: list | None = None, num_threads: int | None = None,
                 experimental_op_resolver_type: Any = OpResolverType.AUTO,
                 experimental_preserve_all_tensors: bool = False, graph: Graph | None = None,
                 device: Any = None, timing_only: bool = False, soc: Any = None, stream: int = 0,
                 memory_limit: int | None = None, while_limit: int | None = None, **_: Any):
        """`memory_limit`: bytes the plan may need (activations, constants, scratch, delegate
        buffers), checked before anything is allocated; None: runtime.memory.default_limit().
        `while_limit`: iterations a WHILE op may run before it stops with a ModelError; None:
        runtime.model_state.WHILE_LIMIT."""
        sources = [s is not None for s in (model_path, model_content, graph)]
        if sum(sources) == 0:
            raise ValueError("`model_path` or `model_content` must be specified.")
        if sum(sources) > 1:
            raise ValueError("Can't both provide `model_path` and `model_content`")
        if num_threads is not None:
            if not isinstance(num_threads, int):
                raise ValueError("type of num_threads should be int")
            if num_threads < 1 and num_threads != -1:
                raise ValueError("num_threads should >= 1")
        self._limit = memory.resolve_limit(memory_limit)
        if graph is None:
            graph = (tflite_io.load(model_path, self._limit) if model_path is not None
                     else tflite_io.loads(model_content, memory_limit=self._limit))
        self._graph = graph
        with _named(graph):
            checked = _validated(graph)
        self._threads = 1 if num_threads in (None, -1) else num_threads
        # The simulated phone gets the threads asked for (-1: all its big cores); the host's math
        # never uses more threads than the host has, or BLAS would thrash.
        self._host_threads = max(1, min(self._threads, os.cpu_count() or 1))
        sim_threads = 64 if num_threads == -1 else self._threads
        with _named(graph):
            # The other subgraphs (control flow) run through the same plans and step loop as subgraph 0.
            self._state = ModelState(graph, lambda g, state: self._build_plan(g, timing_only, state)[0],
                                     _run_steps, lambda: self._limit - self._need.total, while_limit)
            plan, self.estimated_ops = self._build_plan(graph, timing_only, self._state)
            self._folded, self._plan = _split_constant(graph, plan)
            # Before anything is allocated (delegates prepare below): the plan's bytes, held to the limit.
            self._need = memory.plan_need(graph, checked.shapes)
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
            from runtime.executor import make_simulation

            self._sim = make_simulation(graph, list(experimental_delegates or []), device, soc,
                                        sim_threads, timing_only, stream)
            self._state.recording = True  # the simulation charges the ops control flow runs
            delegated = _delegated_ops(self._sim)
            if delegated:
                self._need = memory.plan_need(graph, checked.shapes, delegated)
                memory.check_need(self._need, self._limit, graph.label, "the model with its delegates")

    # -- construction ---------------------------------------------------------------------------

    @staticmethod
    def _build_plan(graph: Graph, timing_only: bool = False,
                    state: ModelState | None = None) -> tuple[list, tuple[int, ...]]:
        """The kernel of every op, and the ops that have none. Timing-only, an op without a kernel
        is costed from its shapes and bytes like any other (a latency question needs no math)
        and stands in with zeros of its declared outputs; otherwise it is refused by name."""
        _check_quantization(graph)
        plan, estimated = [], []
        for i, op in enumerate(graph.ops):
            kernel = select_kernel(op, graph)
            if kernel is None:
                if not timing_only:
                    types = "/".join(sorted({graph.tensors[t].dtype.name for t in op.inputs if t >= 0}))
                    raise ModelError(f"{graph.describe_op(i)} (version {op.version}, {types}) is not supported "
                                     f"by the testbed's reference kernels (timing-only runs cost it from "
                                     f"its shapes)")
                kernel = _declared_zeros
                estimated.append(i)
            plan.append((kernel, Node(i, op, graph, model_state=state), op.inputs, op.outputs))
        return plan, tuple(estimated)

    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def simulation(self):
        """The simulated phone this interpreter runs on (None on the plain CPU path)."""
        return self._sim

    # -- LiteRT API -----------------------------------------------------------------------------

    def allocate_tensors(self) -> None:
        if self._resized:  # new input shapes: check every op and the bytes again before allocating
            with _named(self._graph):
                checked = opcheck.check_graph(self._graph, {t: self._shapes[t] for t in self._graph.inputs},
                                              strict=False)
                self._need = memory.plan_need(self._graph, checked.shapes, _delegated_ops(self._sim))
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
            restart_generators(step[1] for step in self._plan)  # LiteRT prepares anew: draws restart
            self._shapes = [v.shape if v is not None else s for v, s in zip(self._values, self._shapes)]
            self.reset_all_variables()
            self._run(self._folded)
        self._prepared = list(self._shapes)
        self._prepared_ops.update(prepared_by_allocation(self._graph))
        if self._sim is not None:
            entries = {step[1].index: step for step in self._plan}
            folded = frozenset(step[1].index for step in self._folded)
            self._sim.allocate(self._shapes, folded, lambda i: self._run((entries[i],)), values)

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
        skip = set(_delegated_ops(self._sim)) if self._sim is not None else set()
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

    def _check_index(self, t: int) -> int:
        t = int(t)
        if not 0 <= t < len(self._graph.tensors):
            raise ValueError(f"Invalid tensor index {t} exceeds max tensor index "
                             f"{len(self._graph.tensors)}")
        return t

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

    def resize_tensor_input(self, input_index: int, tensor_size: Any, strict: bool = False) -> None:
        t = self._check_index(input_index)
        if t not in self._graph.inputs:
            raise ValueError(f"tensor {t} is not an input of the model")
        size = tuple(int(d) for d in np.asarray(tensor_size).reshape(-1))
        if any(d < 0 for d in size) or len(size) > tflite_io.MAX_RANK:
            raise ValueError(f"Cannot resize input {t} to {list(size)}: dimensions must be >= 0, at most "
                             f"{tflite_io.MAX_RANK} of them")
        sig = self._graph.tensors[t].shape_signature
        if strict and sig is not None:
            for d, (new, s) in enumerate(zip(size, sig)):
                if s != -1 and new != s:
                    raise ValueError(f"ResizeInputTensorStrict only allows mutating unknown dimensions "
                                     f"identified by -1 (dimension {d} of input {t}).")
        if size != self._shapes[t]:
            self._shapes[t] = size
            self._resized = True
        self._values = None

    def invoke(self) -> None:
        if self._values is None:
            raise RuntimeError("Invoke called on model that is not ready.")
        if self._sim is not None:
            self._sim.invoke()
        else:
            self._run(self._plan)
        self._evaluated = True

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

    def get_tensor(self, tensor_index: int, subgraph_index: int = 0) -> np.ndarray:
        t = self._check_index(tensor_index)
        values = self._allocated()
        if values[t] is None:
            return np.zeros(self._shapes[t], self._graph.tensors[t].dtype.np)
        return np.array(values[t], copy=True)

    def tensor(self, tensor_index: int):
        t = self._check_index(tensor_index)
        return lambda: self._allocated()[t]

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
        _run_steps(plan, self._values, self._graph, not self._resized, self._guard, self._precheck)
        return self._state.take_ran()

    def _precheck(self, node: Node, strict: bool) -> None:
        """An op whose output shapes depend on values (a RESHAPE fed a computed shape) or on
        resized inputs: check it on the values it is about to read, and the bytes its outputs and
        scratch will take, before its kernel allocates anything."""
        graph, values, i = self._graph, self._values, node.index
        shape_of = lambda t: values[t].shape if values[t] is not None else self._shapes[t]  # noqa: E731
        with _named(graph):
            outs, _ = opcheck.check_op(graph, i, shape_of, values.__getitem__)
            op = graph.ops[i]
            for t, shape in zip(op.outputs, outs):
                tensor = graph.tensors[t]
                if strict and shape is not None and shape != tensor.shape and not tensor.is_dynamic:
                    raise node.fail(f"output {graph.describe_tensor(t)} is declared {list(tensor.shape)}, "
                                    f"but the op computes {list(shape)} from its inputs")
            grown = {t: s for t, s in zip(op.outputs, outs) if s is not None}
            scratch = sum(memory.op_scratch(graph, i, lambda t: grown[t] if t in grown else shape_of(t)))
            before = sum(memory.tensor_bytes(shape_of(t), graph.tensors[t].dtype.np.itemsize) for t in grown)
            after = sum(memory.tensor_bytes(s, graph.tensors[t].dtype.np.itemsize) for t, s in grown.items())
            total = self._need.total - before + after + scratch
            if total > self._limit:
                raise node.fail(f"its outputs {[list(s) for s in grown.values()]} and scratch would bring the "
                                f"model to {memory.format_bytes(total)}, above the memory limit of "
                                f"{memory.format_bytes(self._limit)}")


def _run_steps(plan, values: list, graph: Graph, check: bool, guard, precheck) -> None:
    """Walk plan steps over one subgraph's tensor values: the main graph's, or one a control-flow
    op runs (runtime/model_state.py). `check`: outputs must have their declared shapes; `guard`:
    ops checked by `precheck(node, check)` right before they run."""
    for kernel, node, ins, outs in plan:
        if guard and node.index in guard:
            precheck(node, check)
        args = [values[t] if t >= 0 else None for t in ins]
        while args and args[-1] is None:
            args.pop()
        try:
            result = kernel(node, *args)
        except ModelError as exc:
            raise _prefixed(exc, graph) from None
        except (ArithmeticError, LookupError, ValueError, TypeError, AttributeError) as exc:
            raise _prefixed(node.fail(f"{type(exc).__name__}: {exc}"), graph) from exc
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) != len(outs):
            raise _prefixed(node.fail(f"kernel produced {len(result)} outputs, the op declares {len(outs)}"), graph)
        try:
            for t, value in zip(outs, result):
                values[t] = _conform(node, t, np.asarray(value), check)
        except ModelError as exc:
            raise _prefixed(exc, graph) from None


def _prefixed(exc: ModelError, graph: Graph) -> ModelError:
    """The error naming the model's file first, as the reader's errors do."""
    label = graph.label
    text = str(exc)
    return exc if text.startswith(f"{label}:") else ModelError(f"{label}: {text}")


@contextlib.contextmanager
def _named(graph: Graph):
    """Re-raise a ModelError raised inside the block with the model's file in front."""
    try:
        yield
    except ModelError as exc:
        named = _prefixed(exc, graph)
        if named is exc:
            raise
        raise named from None


def _validated(graph: Graph) -> "opcheck.Checked":
    """The op checks' findings; a graph not read from a file (nor validated) is validated first."""
    if not opcheck.is_checked(graph):
        validate_graph(graph)
    return opcheck.checked(graph)


def _delegated_ops(sim) -> list[int]:
    """Op indices the simulation's delegates run (their tensors are held again by the delegate)."""
    return [] if sim is None else sim.delegation.delegated_ops()


# Quantized element types the kernels implement: 8-bit values, int32 biases (and int8 weights).
_QUANTIZED_TYPES = {"INT8", "UINT8", "INT32"}


def _check_quantization(graph: Graph) -> None:
    """Reject quantization schemes the kernels do not implement, naming the first tensor that uses one."""
    for t, tensor in enumerate(graph.tensors):
        if tensor.dtype.name == "INT4":
            raise ModelError(f"{graph.describe_tensor(t)} holds packed int4 weights, which the testbed does "
                             f"not support")
        if tensor.quant is None:
            continue
        if tensor.dtype.name not in _QUANTIZED_TYPES and t not in svdf_int16_tensors(graph):
            what = ("int16 activations (16x8 quantization)" if tensor.dtype.name == "INT16"
                    else f"{tensor.dtype.name} quantization")
            raise ModelError(f"{graph.describe_tensor(t)} uses {what}, which the testbed does not support")
        if tensor.dtype.name == "INT32" and not tensor.is_constant:
            raise ModelError(f"{graph.describe_tensor(t)} is an int32-quantized activation, which the "
                             f"testbed does not support")


def _declared_zeros(node: Node, *_inputs):
    """Stands in for an op with no kernel in a timing-only run: zeros of its declared outputs."""
    outs = tuple(np.zeros(node.graph.tensors[t].shape, node.graph.tensors[t].dtype.np) for t in node.op.outputs)
    return outs if len(outs) != 1 else outs[0]


def _split_constant(graph: Graph, plan: list) -> tuple[list, list]:
    """Ops that read only constants (DEQUANTIZE of fp16 weights, above all) run once when tensors
    are allocated, as TFLite computes and persists them in Prepare; the rest run every invoke.
    Random draws are never folded: LiteRT draws new numbers on each invoke; nor are control flow
    and resource variables."""
    from runtime.ops.misc_kernels import DRAWS_RANDOM

    known = {t for t, tensor in enumerate(graph.tensors) if tensor.is_constant and not tensor.is_variable}
    folded, live = [], []
    for step in plan:
        ins = [t for t in step[2] if t >= 0]
        # Control flow and variables act beyond their outputs: they too run at every invoke.
        if ins and all(t in known for t in ins) and step[1].op.type not in DRAWS_RANDOM | STATEFUL:
            folded.append(step)
            known.update(step[3])
        else:
            live.append(step)
    return folded, live


def _type_name(dtype: np.dtype) -> str:
    return np.dtype(dtype).name.upper()


def _conform(node: Node, t: int, value: np.ndarray, check_shape: bool) -> np.ndarray:
    tensor = node.graph.tensors[t]
    if value.dtype != tensor.dtype.np:
        raise node.fail(f"kernel produced {value.dtype} for {node.graph.describe_tensor(t)} "
                        f"declared {tensor.dtype.name}")
    if check_shape and value.shape != tensor.shape and not tensor.is_dynamic:
        raise node.fail(f"kernel produced shape {list(value.shape)} for {node.graph.describe_tensor(t)} "
                        f"declared {list(tensor.shape)}")
    return value


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
