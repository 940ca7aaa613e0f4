"""What the built-in delegates' support rules share: tensor look-ups, option reads and rule factories."""

from __future__ import annotations

import weakref
from typing import Any, Callable, Iterable, Mapping

from delegates.api import Rule, Support, check_rules
from runtime.ir.graph import DType, Graph, Op, Tensor
from runtime.ir.optypes import OpType
from runtime.ir.options import Activation, GenericOptions

__all__ = ["RuleTable", "EIGHT_BIT", "FLOATS", "rule", "doc", "judge", "tensor", "input_dtype",
           "live_tensors", "option", "activation", "is_const", "const_values", "max_version",
           "rank_at_most", "INTEGER_KERNEL_TYPES", "off_integer_path", "integer_refusal", "tensor_uses"]

RuleTable = Mapping[OpType, tuple[Rule, ...]]

EIGHT_BIT = frozenset({DType.INT8, DType.UINT8})
FLOATS = frozenset({DType.FLOAT32, DType.FLOAT16})

# Ops that only expand constant weights (fp16 -> fp32, sparse -> dense): their outputs count as
# constant data wherever a rule asks, as the delegates fold them into the weights they upload.
_WEIGHT_EXPANDERS = (OpType.DEQUANTIZE, OpType.DENSIFY)
_FOLDED: "weakref.WeakKeyDictionary[Graph, frozenset[int]]" = weakref.WeakKeyDictionary()


def rule(reason: str, test: Callable[[Op, Graph], bool], name: str) -> Rule:
    """A rule built at run time (a version limit, an API level): `reason` becomes its docstring."""

    def generated(op: Op, graph: Graph) -> bool:
        return bool(test(op, graph))

    generated.__doc__ = reason
    generated.__name__ = name
    return generated


def doc(r: Rule) -> str:
    """The user-facing reason a rule gives, whitespace folded as check_rules does."""
    return " ".join((r.__doc__ or r.__name__).split())


def judge(op: Op, graph: Graph, table: RuleTable, missing: str,
          before: Iterable[Rule] = (), after: Iterable[Rule] = ()) -> Support:
    """An op absent from `table` is refused with `missing`; otherwise its rules run in order."""
    rules = table.get(op.type)
    if rules is None:
        return Support(False, missing)
    return check_rules((*before, *rules, *after), op, graph)


def tensor(op: Op, graph: Graph, k: int) -> Tensor | None:
    """The op's k-th input (negative k counts from the end), or None when absent or optional."""
    try:
        t = op.inputs[k]
    except IndexError:
        return None
    return graph.tensors[t] if t >= 0 else None


def input_dtype(op: Op, graph: Graph, k: int) -> DType | None:
    t = tensor(op, graph, k)
    return t.dtype if t is not None else None


def live_tensors(op: Op, graph: Graph) -> list[Tensor]:
    """Inputs and outputs that hold run-time data (neither constant nor an expanded weight)."""
    ids = [t for t in (*op.inputs, *op.outputs) if t >= 0]
    return [graph.tensors[t] for t in ids if not is_const(graph, t)]


def option(op: Op, name: str, default: Any = None) -> Any:
    """A field of the op's options, whether typed or kept generic by the reader."""
    opts = op.options
    if isinstance(opts, GenericOptions):
        return dict(opts.fields).get(name, default)
    return getattr(opts, name, default)


def activation(op: Op) -> Activation:
    return Activation(int(option(op, "fused_activation_function", Activation.NONE)))


def _folded(graph: Graph) -> frozenset[int]:
    cached = _FOLDED.get(graph)
    if cached is None:
        cached = frozenset(t for o in graph.ops if o.type in _WEIGHT_EXPANDERS and o.inputs
                           and o.inputs[0] >= 0 and graph.tensors[o.inputs[0]].is_constant
                           for t in o.outputs)
        _FOLDED[graph] = cached
    return cached


def is_const(graph: Graph, t: int) -> bool:
    """Constant data, or the output of a DEQUANTIZE / DENSIFY of constant weights."""
    return t >= 0 and (graph.tensors[t].is_constant or t in _folded(graph))


def const_values(op: Op, graph: Graph, k: int):
    """The constant data of input k as a flat list, or None when it is not a constant."""
    t = tensor(op, graph, k)
    if t is None or not t.is_constant:
        return None
    return [int(v) for v in t.data.reshape(-1)] if t.data.dtype.kind in "iu" else list(t.data.reshape(-1))


def max_version(limit: int, wording: str) -> Rule:
    """A version ceiling; `wording` is formatted with {limit}."""
    return rule(wording.format(limit=limit), lambda op, graph: op.version <= limit, f"max_version_{limit}")


def rank_at_most(limit: int, reason: str) -> Rule:
    def test(op: Op, graph: Graph) -> bool:
        return all(len(graph.tensors[t].shape) <= limit for t in (*op.inputs, *op.outputs) if t >= 0)

    return rule(reason, test, f"rank_at_most_{limit}")


# -- the integer kernels' own limit ------------------------------------------------------------

# What a built-in delegate's kernel holds in NumericMode.INTEGER (delegates/kernel.py): 8-bit data
# and int32 (biases, indices, shapes). Its prepare refuses anything else, so a support check that
# accepts an op for an integer unit must ask this same question first.
INTEGER_KERNEL_TYPES = frozenset({DType.INT8, DType.UINT8, DType.INT32})


def off_integer_path(op: Op, graph: Graph) -> int | None:
    """The first run-time tensor of `op` an integer unit cannot hold, or None. Float is allowed
    only where the integer model meets the float world: a QUANTIZE's input, a DEQUANTIZE's output."""
    edge = op.inputs if op.type is OpType.QUANTIZE else op.outputs if op.type is OpType.DEQUANTIZE else ()
    for t in (*op.inputs, *op.outputs):
        if t < 0 or t in edge:
            continue
        tensor_ = graph.tensors[t]
        if not tensor_.is_constant and tensor_.dtype not in INTEGER_KERNEL_TYPES:
            return t
    return None


def integer_refusal(graph: Graph, t: int, unit: str) -> str:
    """Why an integer unit cannot run an op touching tensor `t`: the words of the support check and of prepare."""
    return f"{graph.describe_tensor(t)} is {graph.tensors[t].dtype.name}; the {unit} runs 8-bit integer models only"


def tensor_uses(graph) -> dict[int, int]:
    """How many op inputs read each tensor: a tensor read once can live inside the kernel that
    produced it (the GPU's linked nodes, the HTP's fused ones)."""
    uses: dict[int, int] = {}
    for op in graph.ops:
        for t in op.inputs:
            uses[t] = uses.get(t, 0) + 1
    return uses
