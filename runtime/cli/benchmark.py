"""`dtb benchmark`: TFLite's benchmark_model on a simulated phone, its output lines from simulated time."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass

from runtime.cli.common import (PROVIDER_NAMES, add_device_flag, add_model_flags, check_writable, cpp_float,
                                delegate_kinds, delegate_tool_parser, echo_log, flag_default_notes, profile_from_flags, model_from_flags,
                                parse_delegate_flags, tflite_bool, to_us, uniform_inputs, write_atomic, zoo_args_text)
from runtime.cli.profile_tables import Stat, memory_lines, profile_nodes, profiling_report
from runtime.limits import counts as limits
from runtime.cli.record import benchmark_record
from runtime.ir.errors import TestbedError
from runtime.ir.files import same_file
from runtime.interpreter.api import Interpreter
from runtime.measure.band import band_phrase, run_band, warning_text
from runtime.measure.figures import measure
from runtime.report.progress import Progress
from runtime.measure.footprint import memory_record
from runtime.measure.record import strict_json, unit_footprint
from runtime.measure.chrome_trace import chrome_trace

__all__ = ["add_parsers", "cmd_benchmark", "threads", "count_at_most"]

_INPUT_SEED = 0
PROGRESS_DELAY_S = 2.0   # host seconds of runs before dtb benchmark shows its progress


def threads(text: str) -> int:
    """--num_threads: -1 (all big cores) or 1 to limits.MAX_THREADS, a scenario's cpu.threads bound."""
    value = int(text)
    if value < 1 and value != -1:
        raise argparse.ArgumentTypeError("must be -1 (all big cores) or at least 1")
    if value > limits.MAX_THREADS:
        raise argparse.ArgumentTypeError(f"must be at most {limits.MAX_THREADS}, as a scenario's cpu.threads")
    return value


def count_at_most(most: int, why: str, least: int = 0):
    """An argparse type: an integer in [least, most] (least 0 or 1); `why` says where `most` comes from."""
    def count(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError("must be 0 or more")
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}")
        if value > most:
            raise argparse.ArgumentTypeError(f"must be at most {most} ({why}), got {value}")
        return value
    return count


_RUNS_WHY = "the testbed's limit: every run's trace is kept until it is measured"


def _seconds(text: str) -> float:
    value = float(text)
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError("must be a number of seconds >= 0")
    return value


def add_parsers(sub) -> None:
    sp = delegate_tool_parser(
        sub, "benchmark", allow_abbrev=False,
        description="Runs the model as TFLite's benchmark_model does and prints its lines, timed in "
                    "simulated time. Delegate flags (--use_gpu, --use_nnapi, --use_hexagon, --use_coreml, "
                    "--gpu_backend, --max_delegated_partitions, ...) apply in the order given.")
    add_model_flags(sp)
    add_device_flag(sp)
    flag = lambda name, **kw: sp.add_argument(name, nargs="?", const=True, default=False,  # noqa: E731
                                             type=tflite_bool, metavar="BOOL", **kw)
    sp.add_argument("--num_threads", type=threads, default=-1, help="CPU threads; -1: all big cores")
    sp.add_argument("--warmup_runs", type=count_at_most(limits.MAX_WARMUP, _RUNS_WHY), default=1,
                    help=f"at most {limits.MAX_WARMUP}")
    sp.add_argument("--num_runs", type=count_at_most(limits.MAX_RUNS, _RUNS_WHY), default=50,
                    help=f"at most {limits.MAX_RUNS}")
    sp.add_argument("--min_secs", type=_seconds, default=0.0,
                    help="also run until this much simulated time has passed (TFLite's default is 1; "
                         "simulated time has no timer noise to average out, so 0 here)")
    sp.add_argument("--warmup_min_secs", type=_seconds, default=0.0, help="the same for the warm-up runs")
    sp.add_argument("--max_secs", type=_seconds, default=150.0, help="stop a phase after this much simulated time")
    flag("--enable_op_profiling", help="print the per-node tables")
    flag("--report_peak_memory_footprint", help="also print the peak memory footprint (simulated: exact, not sampled)")
    flag("--require_full_delegation", help="fail unless one delegate runs the whole graph")
    flag("--timing_only", help="skip the math; times are the same, outputs are not computed")
    flag("--cpu_fallback", help="when a delegate fails (while it is applied or in an invoke), go on on the CPU "
                                "as TFLite's InvokeWithCPUFallback does, instead of stopping")
    sp.add_argument("--output_json", metavar="FILE", help="write this run as one results.json record")
    sp.add_argument("--trace", metavar="FILE", help="write a Chrome trace (Perfetto, chrome://tracing)")
    sp.set_defaults(fn=cmd_benchmark, parser=sp)


@dataclass(frozen=True)
class _Phase:
    """One benchmark phase's per-run latencies and the inference numbers they belong to."""

    us: tuple[int, ...]
    inferences: tuple[int, ...]


def _run_phase(it: Interpreter, min_runs: int, min_secs: float, max_secs: float, fallback: bool = False,
               progress: Progress | None = None) -> _Phase:
    """BenchmarkModel::Run: at least min_runs runs and min_secs, at most max_secs (all simulated),
    and never more than limits.MAX_RUNS runs (a fast model under a long --min_secs would loop
    for hours). `fallback`: invoke as InvokeWithCPUFallback does. `progress` steps once a run and
    is cleared off the terminal before the phase's stdout line."""
    print(f"Running benchmark for at least {min_runs} iterations and at least {cpp_float(min_secs)} seconds "
          f"but terminate if exceeding {cpp_float(max_secs)} seconds.")
    simulation = it.simulation
    invoke = it.invoke_with_cpu_fallback if fallback else it.invoke
    first, spent, runs = simulation.count, 0.0, []
    while (len(runs) < min_runs or spent < min_secs) and spent <= max_secs:
        if len(runs) >= max(min_runs, limits.MAX_RUNS):
            print(f"Stopped after {len(runs)} runs, the testbed's limit, before {cpp_float(min_secs)} "
                  f"simulated seconds had passed.")
            break
        invoke()
        runs.append(to_us(simulation.latencies[-1]))
        spent += simulation.latencies[-1]
        if progress:
            progress.step()
    stat = Stat(list(runs))
    if progress:
        progress.clear()
    print(stat.line())
    print()
    return _Phase(tuple(runs), tuple(range(first, first + len(runs))))


def _applied_lines(delegation, kinds: list[str], require_full: bool, fallback: bool = False) -> list[str]:
    """BenchmarkTfLiteModel::Init's line per delegate; TestbedError where benchmark_model gives up
    (unless `fallback`: then the run goes on with the original plan TFLite restored)."""
    lines = []
    for kind, report in zip(kinds, delegation.per_delegate):
        provider = PROVIDER_NAMES[kind]
        if report.error and not report.error.startswith("removed when "):
            if not fallback or not delegation.restored:
                raise TestbedError(f"Failed to apply {provider} delegate.")
            lines.append(f"Failed to apply {provider} delegate; running on the CPU (--cpu_fallback).")
            continue
        full = report.partitions == 1 and report.nodes_delegated == report.total_nodes
        if require_full and not full:
            raise TestbedError("Disallowed CPU fallback detected.")
        if full:
            lines.append(f"Explicitly applied {provider} delegate, and the model graph will be completely "
                         f"executed by the delegate.")
        elif report.partitions:
            lines.append(f"Explicitly applied {provider} delegate, and the model graph will be partially "
                         f"executed by the delegate w/ {report.partitions} delegate kernels.")
        else:
            lines.append(f"Though {provider} delegate is explicitly applied, the model graph will not be "
                         f"executed by the delegate.")
    if require_full and not kinds:
        raise TestbedError("Disallowed CPU fallback detected.")
    return lines


def _own_lines(m) -> list[str]:
    """The testbed's additions: energy per inference by rail, and what partition boundaries cost."""
    rails = " ".join(f"{r.rail}={cpp_float(r.total_mj)}" for r in m.energy)
    b = m.boundary
    return [f"Energy per inference (mJ): total={cpp_float(m.energy_mj)} avg_power_w={cpp_float(m.avg_power_w)} "
            f"peak_power_w={cpp_float(m.peak_power_w)}",
            f"Energy by rail per inference (mJ): {rails}",
            f"Partition boundary per inference: crossings={cpp_float(b.crossings)} bytes={cpp_float(b.bytes)} "
            f"time_us={cpp_float(b.seconds * 1e6)} share={cpp_float(b.share * 100)}% "
            f"energy_mj={cpp_float(b.joules * 1e3)}"]


_USE_LINES = {"gpu": "Use gpu", "nnapi": "Use NNAPI", "hexagon": "Use Hexagon", "coreml": "Use CoreML"}


def _param_lines(args: argparse.Namespace, model, kinds) -> list[str]:
    """The parameter lines benchmark_model prints before it runs (those a calibration reads back):
    a zoo model is named zoo:NAME?ARGS&quantization=MODE so the log says which model it measured."""
    graph = args.graph or f"zoo:{args.zoo}?{zoo_args_text(args)}&quantization={model.quantization}"
    lines = [f"Num threads: [{args.num_threads}]", f"Graph: [{graph}]"]
    if args.enable_op_profiling:
        lines.append("Enable op profiling: [1]")
    return lines + [f"{_USE_LINES[k]}: [1]" for k in kinds if k in _USE_LINES]


def _prepare(args: argparse.Namespace, extra: list[str]):
    """Device, delegates and model from the flags; the interpreter with the delegates applied, as
    BenchmarkTfLiteModel::Init does it, its tensors allocated and its one input set."""
    profile = profile_from_flags(args.device, args.api_level)
    delegates = parse_delegate_flags(args.parser, extra, profile)
    model = model_from_flags(args)
    kinds = delegate_kinds(delegates)
    print(f"Simulated device: {profile.name} ({profile.description})")
    for line in _param_lines(args, model, kinds):
        print(line)
    with echo_log():
        if len(delegates) >= 2:
            print(f"Going to apply {len(delegates)} delegates one after another.")
        it = Interpreter(graph=model.graph, experimental_delegates=delegates, device=profile,
                         num_threads=args.num_threads, timing_only=args.timing_only)
    for line in _applied_lines(it.simulation.delegation, kinds, args.require_full_delegation, args.cpu_fallback):
        print(line)
    for note in flag_default_notes(kinds, it.simulation.delegation.per_delegate):   # stderr: not benchmark_model's
        print(f"{args.parser.prog}: note: {note}", file=sys.stderr)
    for i in it.estimated_ops:  # timing-only: an op with no kernel is costed from its shapes and bytes
        print(f"estimated: no kernel for {model.graph.describe_op(i)}; its time is costed from its shapes and bytes")
    it.allocate_tensors()
    feed = uniform_inputs(model.graph, _INPUT_SEED)
    for t, value in feed.items():
        it.set_tensor(t, value)
    return profile, model, kinds, it, feed


def _one_path(a: str, b: str) -> bool:
    """Two output paths that name one file, whether or not it exists yet."""
    return os.path.realpath(a) == os.path.realpath(b) or same_file(a, b)


def cmd_benchmark(args: argparse.Namespace, extra: list[str]) -> int:
    check_writable(args.output_json, args.trace)
    if args.output_json and args.trace and _one_path(args.output_json, args.trace):
        raise TestbedError(f"--output_json and --trace both name {args.trace}: one would overwrite the other")
    profile, model, kinds, it, feed = _prepare(args, extra)
    simulation = it.simulation
    init_us = to_us(_init_seconds(simulation))
    print(f"The input model file size (MB): {cpp_float(model.size_bytes / 1e6)}")
    print(f"Initialized session in {cpp_float(init_us / 1e3)}ms.")
    # runs on stderr once they have taken PROGRESS_DELAY_S of host time (a quick benchmark shows nothing)
    progress = Progress(args.parser.prog, "run", delay=PROGRESS_DELAY_S, leave=False,
                        total=args.warmup_runs + args.num_runs)
    try:
        with echo_log():  # a delegate failing in an invoke with --cpu_fallback says so as TFLite logs it
            warm = _run_phase(it, args.warmup_runs, args.warmup_min_secs, args.max_secs, args.cpu_fallback, progress)
            regular = _run_phase(it, args.num_runs, args.min_secs, args.max_secs, args.cpu_fallback, progress)
    finally:
        progress.close()
    if not regular.us:
        raise TestbedError("no regular run: give --num_runs or --min_secs above 0")
    warm_stat, run_stat = Stat(list(warm.us)), Stat(list(regular.us))
    print(f"Inference timings in us: Init: {init_us}, First inference: {warm_stat.first()}, "
          f"Warmup (avg): {cpp_float(warm_stat.avg())}, Inference (avg): {cpp_float(run_stat.avg())}")
    _band_lines(args.parser.prog, run_band(profile, model.graph, simulation.delegation, kinds), run_stat.avg())
    memory = memory_record(simulation, unit_footprint(simulation))  # the simulated phone's bytes, not the host's
    for line in memory_lines(memory, args.report_peak_memory_footprint):
        print(line)
    for unit, (cached, streamed) in sorted(memory.on_chip.items()):  # an Edge-TPU-class NPU's weight SRAM
        print(f"On-chip weight memory of {unit} (MB): cached={cpp_float(cached / (1 << 20))} "
              f"streamed_per_inference={cpp_float(streamed / (1 << 20))}")
    m = measure(simulation.soc, simulation.soc.trace.inferences, len(warm.us), memory=memory)
    for line in _own_lines(m):
        print(line)
    if args.enable_op_profiling:
        for line in profiling_report(*profile_nodes(simulation, regular.inferences)):
            print(line)
    if args.trace:
        write_atomic(args.trace, json.dumps(chrome_trace(simulation.soc, model.label)))
    if args.output_json:
        record = benchmark_record(args, model, profile, simulation, kinds, m, len(warm.us), len(regular.us),
                                  _outputs_vs_reference(it, model.graph, feed, args.timing_only), it.estimated_ops)
        # NaN or infinity (a delegate's overflow) become null: the file stays strict JSON
        write_atomic(args.output_json, json.dumps(strict_json(record), indent=1, sort_keys=True, allow_nan=False) + "\n")
    return 0


def _band_lines(prog: str, rb, avg_us: float) -> None:
    """The average latency with the phone's fitted error band (a line of its own: benchmark_model's
    timing line stays as TFLite prints it), and on stderr the warning when the model lies outside
    the rows that band was measured on."""
    print(f"Latency with the fitted error band: avg={avg_us / 1e3:.2f} ms ({band_phrase(rb)})")
    warning = warning_text(rb.phone, rb.delegate, rb.outside)
    if warning:
        print(f"{prog}: warning: {warning}", file=sys.stderr)


def _init_seconds(simulation) -> float:
    """Simulated seconds of delegate initialisation (compile, weight upload) before the first run."""
    init = [iv for iv in simulation.soc.trace.intervals if iv.inference < 0 and iv.stream == simulation.stream]
    return max((iv.end for iv in init), default=0.0) - min((iv.start for iv in init), default=0.0)


def _outputs_vs_reference(it: Interpreter, graph, feed: dict, timing_only: bool):
    """The last run's outputs and the CPU single-thread reference's on the same input (every run
    gets the same input, as in benchmark_model); None when the math was skipped."""
    if timing_only:
        return None
    ref = Interpreter(graph=graph, num_threads=1)
    ref.allocate_tensors()
    for t, value in feed.items():
        ref.set_tensor(t, value)
    ref.invoke()
    return [(graph.tensors[t].name, ref.get_tensor(t), it.get_tensor(t)) for t in graph.outputs]
