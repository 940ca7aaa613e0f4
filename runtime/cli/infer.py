"""`dtb infer`, `dtb inspect` and `dtb export`: one model run on the CPU reference kernels, listed op by op, or written."""

from __future__ import annotations

import time
from enum import Enum

import numpy as np

from runtime.cli.benchmark import count_at_most, threads
from runtime.cli.common import add_model_flags, check_writable, model_from_flags, write_failed
from runtime.interpreter.api import Interpreter
from runtime.limits import counts as limits
from runtime.ir.optypes import OpType
from runtime.ops import select_kernel

__all__ = ["add_parsers", "cmd_infer", "cmd_inspect", "cmd_export", "OpHas", "op_has"]


def _inputs(it: Interpreter, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for d in it.get_input_details():
        dtype = np.dtype(d["dtype"])
        shape = tuple(d["shape"])
        value = (rng.standard_normal(shape) if dtype.kind == "f" else rng.integers(0, 4, shape)).astype(dtype)
        it.set_tensor(d["index"], value)


def cmd_infer(args, extra=None) -> int:
    model = model_from_flags(args)
    graph, label = model.graph, model.label
    it = Interpreter(graph=graph, num_threads=args.num_threads)
    it.allocate_tensors()
    _inputs(it, args.seed)
    times = []
    for _ in range(args.num_runs):
        start = time.perf_counter()
        it.invoke()
        times.append(time.perf_counter() - start)
    print(f"model: {label} ({len(graph.ops)} ops), input seed {args.seed}")
    for d in it.get_output_details():
        out = it.get_tensor(d["index"])
        scale, zero_point = d["quantization"]
        if scale:  # show real values; the stored integers mean little to a reader
            out = (out.astype(np.float64) - zero_point) * scale
        kind = f"{np.dtype(d['dtype']).name}, dequantized" if scale else out.dtype
        print(f"output '{d['name']}' {list(out.shape)} {kind}: min {out.min():.6g} max {out.max():.6g} "
              f"mean {out.mean():.6g}")
        if out.ndim == 2 and out.shape[0] == 1 and out.shape[1] > 1:
            top = np.argsort(out[0])[::-1][:5]
            print("  top-5: " + ", ".join(f"{int(k)}:{out[0, k]:.4f}" for k in top))
    print(f"host wall time per inference (reference kernels, not a simulated phone): "
          f"median {np.median(times) * 1e3:.2f} ms over {len(times)} runs")
    return 0


class OpHas(Enum):
    """What the testbed has for one op: the values it computes, or only what it costs."""

    KERNEL = "kernel"                # a built-in kernel (float, 8-bit or hybrid, by the op's types)
    CUSTOM = "custom kernel"         # a registered custom op's kernel
    COST_ONLY = "cost only"          # no kernel: runs with timing_only charge its cost, computing nothing


def op_has(op, graph) -> OpHas:
    """The kernel the plan would pick for the op (select_kernel, by its element types), as an OpHas."""
    if select_kernel(op, graph) is None:
        return OpHas.COST_ONLY
    return OpHas.CUSTOM if op.type is OpType.CUSTOM else OpHas.KERNEL


def cmd_inspect(args, extra=None) -> int:
    model = model_from_flags(args)
    graph, label = model.graph, model.label
    print(f"model: {label}: {len(graph.tensors)} tensors, {len(graph.ops)} ops")
    print(f"{'#':>4}  {'op':26s} {'v':>2}  {'inputs -> outputs':50s} has")
    counts = dict.fromkeys(OpHas, 0)
    for i, op in enumerate(graph.ops):
        shapes = lambda ids: ", ".join(str(list(graph.tensors[t].shape)) for t in ids if t >= 0)  # noqa: E731
        flow = f"{shapes(op.inputs)} -> {shapes(op.outputs)}"
        has = op_has(op, graph)
        counts[has] += 1
        print(f"{i:>4}  {op.name:26s} {op.version:>2}  {flow:50s} {has.value}")
    print("ops: " + ", ".join(f"{n} {h.value}" for h, n in counts.items()))
    return 0


def cmd_export(args, extra=None) -> int:
    from runtime.model.tflite_write import save

    check_writable(args.output)
    model = model_from_flags(args)
    try:
        save(model.graph, args.output)
    except OSError as exc:
        raise write_failed(args.output, exc) from None
    print(f"wrote {args.output}: {model.label} ({len(model.graph.ops)} ops)")
    return 0


def add_parsers(sub) -> None:
    sp = sub.add_parser("infer")
    add_model_flags(sp)
    sp.add_argument("--num_threads", type=threads, default=1)
    sp.add_argument("--num_runs", type=count_at_most(limits.MAX_RUNS, "the testbed's limit of runs", least=1), default=1,
                    help=f"at least 1, at most {limits.MAX_RUNS}")
    sp.add_argument("--seed", type=count_at_most(limits.MAX_SEED, "as a scenario's inputs.seed"),
                    default=0, help="seed of the generated inputs")
    sp.set_defaults(fn=cmd_infer, parser=sp)
    sp = sub.add_parser("inspect")
    add_model_flags(sp)
    sp.set_defaults(fn=cmd_inspect, parser=sp)
    sp = sub.add_parser("export")
    add_model_flags(sp)
    sp.add_argument("-o", "--output", required=True)
    sp.set_defaults(fn=cmd_export, parser=sp)
