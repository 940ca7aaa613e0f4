"""The QNN HTP backend's graph rewrites as the simulator charges them: ops run inside the convolution
before them, activations the HMX applies itself, concatenations written in place."""

from __future__ import annotations

from delegates import rulekit as rk
from runtime.ir.graph import Graph, Op
from runtime.ir.optypes import OpType
from runtime.ir.options import Activation
from sim import numerics as nm
from sim.htp import Htp

__all__ = ["htp_fused_nodes", "htp_absorbed_nodes", "htp_inplace_concats"]


# Ops the HTP's graph preparation runs inside the convolution before them (assumed set: Qualcomm
# documents the mechanism, not the list: the HTP backend rewrites a QNN graph with pattern rules
# before it runs, its op packages' DEF_OPTIM optimization rules (Qualcomm AI Engine Direct docs,
# "HTP Op Package: optimization rules"), and the delegate's htp_use_fold_relu folds a ReLU into the
# convolution's output range). A ReLU, a clamp or a residual ADD costs an HVX pass over the
# convolution's output while it is still in VTCM, with no dispatch of its own; the activations the HMX
# applies itself cost nothing (htp_absorbed_nodes).
_HTP_FUSABLE = frozenset({OpType.RELU, OpType.RELU6, OpType.RELU_N1_TO_1, OpType.RELU_0_TO_1, OpType.LEAKY_RELU,
                          OpType.PRELU, OpType.HARD_SWISH, OpType.ADD, OpType.SUB, OpType.MUL})
_HTP_PRODUCERS = frozenset({OpType.CONV_2D, OpType.DEPTHWISE_CONV_2D, OpType.TRANSPOSE_CONV,
                            OpType.FULLY_CONNECTED})


def htp_fused_nodes(graph: Graph, nodes) -> frozenset[int]:
    """Nodes of _HTP_FUSABLE whose run-time input is the only use of a tensor that a convolution
    (or a node already fused into one) of the same partition produced, in plan order."""
    members = set(nodes)
    producer = {t: i for i in nodes for t in graph.ops[i].outputs}
    uses = rk.tensor_uses(graph)
    outputs = set(graph.outputs)
    fused: set[int] = set()
    for i in sorted(members):
        op = graph.ops[i]
        if op.type not in _HTP_FUSABLE:
            continue
        for t in op.inputs:
            j = producer.get(t)
            if j is None or uses.get(t) != 1 or t in outputs or graph.tensors[t].is_constant:
                continue
            if graph.ops[j].type in _HTP_PRODUCERS or j in fused:
                fused.add(i)
                break
    return frozenset(fused)


# The activations the HMX applies while it writes a convolution's output, per arithmetic: Qualcomm's QNN
# HTP docs ("HTP network design recommendations", "Choice of activation functions": HMX fuses ReLU,
# ReLUX and ReLUMinMax with the convolution before them in 8- and 16-bit quantized graphs, ReLUX and
# ReLUMinMax in FP16 ones, PReLU / LeakyReLU and HardSwish in all three). A float16 graph's plain ReLU
# is not among them: it stays an HVX pass.
_HMX_FP16 = frozenset({OpType.RELU6, OpType.RELU_N1_TO_1, OpType.RELU_0_TO_1, OpType.PRELU, OpType.LEAKY_RELU,
                       OpType.HARD_SWISH})
_HMX_ACTIVATIONS = {False: _HMX_FP16 | {OpType.RELU}, True: _HMX_FP16}   # keyed by: computes in float
# The ops that run on the HMX and so carry its output stage (a depthwise convolution runs on the HVX).
_HMX_PRODUCERS = frozenset({OpType.CONV_2D, OpType.TRANSPOSE_CONV})


def htp_absorbed_nodes(graph: Graph, fused) -> frozenset[int]:
    """Of the fused nodes (htp_fused_nodes), the activations whose input a convolution on the HMX
    produced, of a type the HMX applies in that arithmetic (_HMX_ACTIVATIONS)."""
    producer = graph.producers()
    out = set()
    for i in fused:
        op = graph.ops[i]
        if op.type not in _HMX_ACTIVATIONS[nm.computes_in_float(op, graph)]:
            continue
        live = [t for t in op.inputs if t >= 0 and not graph.tensors[t].is_constant]
        made_by = producer.get(live[0]) if live else None
        if made_by is not None and graph.ops[made_by].type in _HMX_PRODUCERS:
            out.add(i)
    return frozenset(out)


def htp_inplace_concats(graph: Graph, nodes) -> frozenset[int]:
    """CONCATENATION nodes along the channels whose inputs the ops that make them write straight into
    the output, so the concatenation itself moves no byte: each input is made by a node of the
    partition and sits in no other concatenation, and each starts on a crouton boundary (the channels
    before it a multiple of 32). Assumed from the layout (sim/htp.crouton_efficiency's sources): a
    crouton holds 32 channels of one patch, so such an input is a run of whole croutons of the
    output, which the graph's memory plan can place by address; an input on another boundary would
    have to be shifted across croutons, a copy. Qualcomm's HTP design recommendations ask for channel
    counts in multiples of 32 for this layout."""
    made = {t for i in nodes for t in graph.ops[i].outputs}
    concats = [i for i in nodes if graph.ops[i].type is OpType.CONCATENATION]
    joined: dict[int, int] = {}
    for i in concats:
        for t in graph.ops[i].inputs:
            joined[t] = joined.get(t, 0) + 1
    return frozenset(i for i in concats if _on_channels(graph.ops[i], graph)
                     and _croutons_in_place(graph.ops[i], graph, made, joined))


def _on_channels(op: Op, graph: Graph) -> bool:
    """A concatenation of NHWC activations along their channels, with no activation of its own."""
    rank = len(graph.tensors[op.outputs[0]].shape)
    return rank >= 3 and int(op.options.axis) % rank == rank - 1 \
        and op.options.fused_activation_function is Activation.NONE


def _croutons_in_place(op: Op, graph: Graph, made: set[int], joined: dict[int, int]) -> bool:
    offset = 0
    for t in op.inputs:
        if t not in made or joined.get(t) != 1 or offset % Htp.depth_tile:
            return False
        offset += int(graph.tensors[t].shape[-1])
    return True
