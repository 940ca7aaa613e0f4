"""The `dtb` command line: its parser and entry point, and the infer / inspect / export commands."""

from __future__ import annotations

import argparse
import sys
import time
from enum import Enum
from typing import Sequence

import numpy as np

from runtime.cli import benchmark as cli_bench

from runtime.cli import calibrate as cli_calibrate

from runtime.cli import eval as cli_eval

from runtime.cli import tools as cli_tools

from runtime.limits import memory
from runtime.cli.common import add_model_flags, check_writable, load_model
from runtime.ir.errors import TestbedError
from runtime.interpreter.api import Interpreter
from runtime.ir.optypes import OpType
from runtime.ops import select_kernel


def _inputs(it: Interpreter, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for d in it.get_input_details():
        dtype = np.dtype(d["dtype"])
        shape = tuple(d["shape"])
        value = (rng.standard_normal(shape) if dtype.kind == "f" else rng.integers(0, 4, shape)).astype(dtype)
        it.set_tensor(d["index"], value)


def cmd_infer(args, extra=None) -> int:
    model = load_model(args)
    graph, label = model.graph, model.label
    it = Interpreter(graph=graph, num_threads=args.num_threads)
    it.allocate_tensors()
    _inputs(it, args.seed)
    times = []
    for _ in range(max(1, args.num_runs)):
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


class Support(Enum):
    """What the testbed has for one op: the values it computes, or only what it costs."""

    KERNEL = "kernel"                # a built-in kernel (float, 8-bit or hybrid, by the op's types)
    CUSTOM = "custom kernel"         # a registered custom op's kernel
    COST_ONLY = "cost only"          # no kernel: runs with timing_only charge its cost, computing nothing


def op_support(op, graph) -> Support:
    """The kernel the plan would pick for the op (select_kernel, by its element types), as a Support."""
    if select_kernel(op, graph) is None:
        return Support.COST_ONLY
    return Support.CUSTOM if op.type is OpType.CUSTOM else Support.KERNEL


def cmd_inspect(args, extra=None) -> int:
    model = load_model(args)
    graph, label = model.graph, model.label
    print(f"model: {label}: {len(graph.tensors)} tensors, {len(graph.ops)} ops")
    print(f"{'#':>4}  {'op':26s} {'v':>2}  {'inputs -> outputs':50s} has")
    counts = dict.fromkeys(Support, 0)
    for i, op in enumerate(graph.ops):
        shapes = lambda ids: ", ".join(str(list(graph.tensors[t].shape)) for t in ids if t >= 0)  # noqa: E731
        flow = f"{shapes(op.inputs)} -> {shapes(op.outputs)}"
        support = op_support(op, graph)
        counts[support] += 1
        print(f"{i:>4}  {op.name:26s} {op.version:>2}  {flow:50s} {support.value}")
    print("ops: " + ", ".join(f"{n} {s.value}" for s, n in counts.items()))
    return 0


def cmd_export(args, extra=None) -> int:
    from runtime.model.tflite_write import save

    check_writable(args.output)
    model = load_model(args)
    save(model.graph, args.output)
    print(f"wrote {args.output}: {model.label} ({len(model.graph.ops)} ops)")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dtb", description="Delegate Testbed: TFLite models on simulated phones.")
    sub = p.add_subparsers(dest="command", required=True)

    sp = sub.add_parser("infer", help="run a model on the CPU reference kernels and summarise its outputs")
    add_model_flags(sp)
    sp.add_argument("--num_threads", type=int, default=1)
    sp.add_argument("--num_runs", type=int, default=1)
    sp.add_argument("--seed", type=int, default=0, help="seed of the generated inputs")
    sp.set_defaults(fn=cmd_infer, parser=sp)
    sp = sub.add_parser("inspect", help="list a model's ops with shapes and kernel support")
    add_model_flags(sp)
    sp.set_defaults(fn=cmd_inspect, parser=sp)
    sp = sub.add_parser("export", help="write a zoo model (or a .tflite file), quantized as asked, to a .tflite file")
    add_model_flags(sp)
    sp.add_argument("-o", "--output", required=True)
    sp.set_defaults(fn=cmd_export, parser=sp)
    cli_bench.add_parser(sub)
    cli_tools.add_parsers(sub)
    cli_calibrate.add_parser(sub)
    cli_eval.add_parser(sub)
    # listed for --help; its arguments are its own module's (see main)
    sub.add_parser("conformance", add_help=False,
                   help="check a delegate (package.module:factory) against the CPU reference op by op")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["conformance"]:
        from runtime.cli.conformance import main as conformance

        return conformance(argv[1:])
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    sp = getattr(args, "parser", None)
    if extra and not getattr(args, "takes_delegate_flags", False):
        (sp or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    # The newer tools name themselves in errors as argparse does ("dtb benchmark: error: ...").
    prefix = sp.prog if sp is not None else "dtb"
    try:
        with memory.limit_scope(getattr(args, "memory_limit_mb", None)):  # every Interpreter the command builds
            return args.fn(args, extra) if sp is not None else args.fn(args)
    except TestbedError as exc:
        message = " ".join(str(exc).splitlines())  # one line, whatever a name in the file held
        print(f"{prefix}: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("dtb: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        sys.stderr.close()
        return 141


if __name__ == "__main__":
    sys.exit(main())
