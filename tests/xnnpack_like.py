"""A test delegate that answers TFLite's XNNPACK delegate's per-node support question, as the default
LiteRT build (signed and unsigned 8-bit quantization on, latest operators on) answers it.

Source: tflite/delegates/xnnpack/xnnpack_delegate.cc in google-ai-edge/LiteRT (the tensorflow/lite
tree): Delegate::PrepareOpsToDelegate, Subgraph::VisitNode and the Visit*Node / Check* helpers it
calls with a null subgraph (the "can this node be delegated" pass). Reasons quote or paraphrase the
messages XNNPACK would log for the same failure.

What is modelled:
- VisitNode's switch for the builtin ops below, with their dtype, rank, static-weight, fused
  activation, pooling/convolution parameter and quantization-scale checks;
- DEQUANTIZE of a static float16 (or quantized int8) tensor to float32: XNNPACK unpacks such
  weights itself and takes the node only when no node it refuses reads the output
  (PrepareOpsToDelegate's static_unpack_nodes_); its output counts as a static ("quasi-static")
  weight for the nodes that read it;
- options: unlimited partitions, no minimum size, static-shaped graphs only (the delegate's flags
  lack kTfLiteDelegateFlagsAllowDynamicTensors unless subgraph reshaping is enabled).

Not modelled (answered "unsupported" with that reason): resource-variable ops, the MediaPipe and
ODML custom ops, STABLEHLO_COMPOSITE, DENSIFY of sparse weights (runtime.model.tflite_read densifies sparse
constants, so their sparsity is not visible here). The analysis runs over the model's own execution
plan, i.e. it assumes XNNPACK is the first delegate applied, as it is in LiteRT.
"""

from __future__ import annotations

from delegates.api import YES, Delegate, DelegateKernel, DelegateOptions, Support
from runtime.ir.graph import Graph, Op
from tests.xnnpack_checks import XNN_MAX_TENSOR_DIMS, Checks, Refused, unpacks_static_weights
from tests.xnnpack_visitors import VISITORS

__all__ = ["XnnpackLike", "XNN_MAX_TENSOR_DIMS"]


class XnnpackLike(Delegate):
    """TfLiteXNNPackDelegate's node selection. Its kernels only exist so that the plan can be built;
    invoking one raises (DelegateKernel's default), as this delegate is for partition counts."""

    name = "TfLiteXNNPackDelegate"
    unit = "cpu"
    allows_dynamic_tensors = False

    def __init__(self, qs8: bool = True, qu8: bool = True, latest_operators: bool = True,
                 dynamic_fully_connected: bool = False):
        # XNNPACK hands every node it takes to ReplaceNodeSubsetsWithDelegateKernels: no largest-N
        # choice and no minimum partition size.
        super().__init__(DelegateOptions(max_delegated_partitions=0, min_nodes_per_partition=0))
        self.qs8, self.qu8 = qs8, qu8
        self.latest_operators = latest_operators
        self.dynamic_fully_connected = dynamic_fully_connected
        self._cache: tuple[Graph, dict[int, int], list[Support]] | None = None

    def is_node_supported(self, op: Op, graph: Graph) -> Support:
        if self._cache is None or self._cache[0] is not graph:
            index = {id(o): i for i, o in enumerate(graph.ops)}
            self._cache = (graph, index, self._select(graph))
        _, index, answers = self._cache
        return answers[index[id(op)]]

    def create_kernel(self, partition) -> DelegateKernel:
        return DelegateKernel(partition)

    # -- PrepareOpsToDelegate ------------------------------------------------------------------

    def _select(self, graph: Graph) -> list[Support]:
        quasi_static: set[int] = set()
        producer: dict[int, int] = {}  # quasi-static tensor -> the DEQUANTIZE that unpacks it
        unpack: set[int] = set()
        answers: list[Support] = [YES] * len(graph.ops)
        for i, op in enumerate(graph.ops):
            if unpacks_static_weights(op, graph, quasi_static):
                unpack.add(i)
                producer[op.outputs[0]] = i
                quasi_static.add(op.outputs[0])
                continue
            answers[i] = self.visit(op, graph, quasi_static)
            if not answers[i]:
                # A refused node that reads unpacked weights keeps their DEQUANTIZE on the CPU.
                for t in op.inputs:
                    if t in producer and producer[t] in unpack:
                        unpack.discard(producer[t])
                        answers[producer[t]] = Support(
                            False, f"static weights unpacked here are read by {op.name}, which "
                                   f"XNNPACK does not take")
        return answers

    def visit(self, op: Op, graph: Graph, quasi_static: set[int] | frozenset[int] = frozenset()) -> Support:
        """Subgraph::VisitNode with a null subgraph: YES, or the first check that fails."""
        visitor = VISITORS.get(op.type)
        if visitor is None:
            return Support(False, f"unsupported operator type {op.name} (not in XNNPACK's VisitNode)")
        try:
            visitor(Checks(self, op, graph, quasi_static))
        except Refused as refused:
            return Support(False, str(refused))
        return YES


