"""Times TFLite-style partitioning on large plans: partition_plan on a chain-and-branch plan with
alternating support (the worst case: one subset per node), and apply_delegates on a long graph.

Usage: python benchmarks/partition_scale.py [--nodes 100000] [--ops 10000] [--runs 5]
Prints the median seconds of each, each against a plain linear pass over the same nodes (read
every input and output once) run in the same process, and how partition_plan's time grows from a
quarter of the nodes to all of them (4.0 is linear; the plain sweeps of TFLite give 16).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from delegates.api import Delegate, DelegateKernel, Support  # noqa: E402
from runtime.interpreter.delegation import DelegateStep, apply_delegates  # noqa: E402
from runtime.ir.graph import DType, Graph, Op, Tensor  # noqa: E402
from runtime.ir.optypes import OpType  # noqa: E402
from runtime.ir.partition import PlanNode, partition_plan  # noqa: E402


def chain_and_branch(n: int) -> list[PlanNode]:
    """Node i writes tensor i + 1 and reads tensor i; every fifth node also reads the output of
    the node three back (a skip branch joining the chain)."""
    return [PlanNode((i, i - 2) if i % 5 == 4 else (i,), (i + 1,)) for i in range(n)]


def linear_pass(nodes: list[PlanNode]) -> int:
    """The yardstick: visit every node and every tensor slot once, as any partitioner must."""
    seen = {}
    for i, node in enumerate(nodes):
        for t in node.inputs:
            seen[t] = seen.get(t, i)
        for t in node.outputs:
            seen[t] = i
    return len(seen)


def median_seconds(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class EveryOtherRelu(Delegate):
    """Takes RELU, refuses LOGISTIC: on an alternating graph every op is its own partition."""

    name = "Bench"

    def is_node_supported(self, op, graph):
        return Support(op.type is OpType.RELU, "not RELU")

    def create_kernel(self, partition):
        return DelegateKernel(partition)


def long_graph(n: int) -> Graph:
    tensors = tuple(Tensor(f"t{i}", (1, 4), DType.FLOAT32) for i in range(n + 1))
    ops = tuple(Op(OpType.RELU if i % 2 == 0 else OpType.LOGISTIC, (i,), (i + 1,)) for i in range(n))
    return Graph(tensors, ops, (0,), (n,))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)

    nodes = chain_and_branch(args.nodes)
    supported = set(range(0, args.nodes, 2))
    subsets = partition_plan(nodes, supported, {0}, {args.nodes})
    t_part = median_seconds(lambda: partition_plan(nodes, supported, {0}, {args.nodes}), args.runs)
    t_lin = median_seconds(lambda: linear_pass(nodes), args.runs)
    print(f"partition_plan: {args.nodes} nodes, {len(subsets)} subsets: {t_part:.3f} s "
          f"(linear pass {t_lin:.4f} s, ratio {t_part / t_lin:.1f})")
    quarter = nodes[:args.nodes // 4]
    some = set(range(0, len(quarter), 2))
    t_quarter = median_seconds(lambda: partition_plan(quarter, some, {0}, ()), args.runs)
    print(f"partition_plan growth from {len(quarter)} to {args.nodes} nodes: x{t_part / t_quarter:.1f}")

    graph = long_graph(args.ops)
    delegation = apply_delegates(graph, [EveryOtherRelu()])
    steps = sum(isinstance(s, DelegateStep) for s in delegation.plan)
    t_apply = median_seconds(lambda: apply_delegates(graph, [EveryOtherRelu()]), args.runs)
    op_nodes = [PlanNode(op.inputs, op.outputs) for op in graph.ops]
    t_lin_ops = median_seconds(lambda: linear_pass(op_nodes), args.runs)
    print(f"apply_delegates: {args.ops} ops, {steps} delegate nodes: {t_apply:.3f} s "
          f"(linear pass {t_lin_ops:.4f} s, ratio {t_apply / t_lin_ops:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
