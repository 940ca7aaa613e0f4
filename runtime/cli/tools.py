"""`dtb` subcommands inference-diff, partition, list, supported-ops, run and report."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import math
import sys
from pathlib import Path

import numpy as np

from delegates.kinds import BUILTIN_KINDS
from runtime.cli.benchmark import delegate_budget, threads
from runtime.cli.common import (add_device_flag, add_model_flags, cpp_float, delegate_tool_parser, echo_log,
                                gaussian_inputs, profile_from_flags, model_from_flags, parse_delegate_flags, to_us,
                                warn_refusals, write_atomic)
from runtime.cli.profile_tables import Stat
from runtime.ir.errors import TestbedError
from runtime.interpreter.api import Interpreter
from runtime.report.status import CellStatus, delegates_status, record_status
from runtime.sweep.executors import GUARD_CELLS, executor_arg

__all__ = ["add_parsers"]

_KINDS = BUILTIN_KINDS
_DIFF_SEED = 0
_DIFF_OUTPUTS = ("FLOAT32", "INT8", "UINT8")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 < value < 1e9:   # finite, and a limit a timer can hold
        raise argparse.ArgumentTypeError(f"expected seconds above 0 and below 1e9, got {text!r}")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


# -- inference-diff ------------------------------------------------------------------------------


def _float_stat(values: list[float]) -> tuple[float, float]:
    """Stat<float>'s average and standard deviation, as inference_diff stores them (float32)."""
    if not values:
        return 0.0, 0.0
    avg = math.fsum(values) / len(values)
    same = min(values) == max(values)
    std = 0.0 if same else math.sqrt(max(0.0, math.fsum(v * v for v in values) / len(values) - avg * avg))
    return float(np.float32(avg)), float(np.float32(std))


def _diff_interpreters(args, extra, profile, graph) -> tuple[Interpreter, Interpreter]:
    if args.delegate not in ("", *_KINDS):
        raise TestbedError(f"--delegate must be one of {', '.join(_KINDS)} (or empty for the CPU), "
                           f"not {args.delegate!r}")
    flags = list(extra) + ([f"--use_{args.delegate}"] if args.delegate else [])
    delegates = parse_delegate_flags(args.parser, flags, profile)
    for t in graph.outputs:
        if graph.tensors[t].dtype.name not in _DIFF_OUTPUTS:
            raise TestbedError(f"inference-diff compares {', '.join(_DIFF_OUTPUTS)} outputs; output "
                               f"'{graph.tensors[t].name}' is {graph.tensors[t].dtype.name}")
    with echo_log():
        test = Interpreter(graph=graph, experimental_delegates=delegates, device=profile,
                           num_threads=args.num_interpreter_threads)
    if delegates:
        _check_under_test(test, [d.name for d in delegates], len(graph.ops))
    reference = Interpreter(graph=graph, num_threads=1, device=profile)
    return reference, test


def _check_under_test(test: Interpreter, names: list[str], nodes: int) -> None:
    """The delegate under test must run: one that failed or took no op would leave the CPU to be
    compared with the CPU, a zero difference that says nothing of the delegate."""
    from runtime.measure.record import delegate_records

    delegation = test.simulation.delegation
    status, error = delegates_status(delegate_records(delegation, names))
    if status is CellStatus.FAILED:
        raise TestbedError(f"the delegate under test did not run: {error}; nothing to compare (the test run "
                           f"would be the CPU's)")
    if status is CellStatus.NONE_DELEGATED:
        refusal = "; ".join(r.platform_refusal for r in delegation.per_delegate if r.platform_refusal)
        raise TestbedError(f"the delegate under test did not run: {', '.join(names)} claimed none of the {nodes} "
                           f"ops{f' ({refusal})' if refusal else ''}; nothing to compare (the test run would be the CPU's)")


def cmd_inference_diff(args: argparse.Namespace, extra: list[str]) -> int:
    profile = profile_from_flags(args.device, args.api_level)
    model = model_from_flags(args)
    graph = model.graph
    reference, test = _diff_interpreters(args, extra, profile, graph)
    ref_us, test_us = Stat(), Stat()
    errors: list[list[float]] = [[] for _ in graph.outputs]
    for it in (reference, test):
        it.allocate_tensors()
    rng = np.random.default_rng(_DIFF_SEED)
    for _ in range(args.num_runs):
        feed = gaussian_inputs(graph, rng)
        for it, stat in ((test, test_us), (reference, ref_us)):
            for t, value in feed.items():
                it.set_tensor(t, value)
            it.invoke()
            stat.add(to_us(it.simulation.latencies[-1]))
        for k, t in enumerate(graph.outputs):
            d = np.abs(reference.get_tensor(t).astype(np.float64) - test.get_tensor(t).astype(np.float64))
            errors[k].append(float(np.float32(d.mean())) if d.size else 0.0)
    print(f"Num evaluation runs: {args.num_runs}")
    print(f"Reference run latency: avg={cpp_float(ref_us.avg())}(us), std_dev={ref_us.std()}(us)")
    print(f"Test run latency: avg={cpp_float(test_us.avg())}(us), std_dev={test_us.std()}(us)")
    for k, values in enumerate(errors):
        avg, std = _float_stat(values)
        print(f"OutputDiff[{k}]: avg_error={cpp_float(avg)}, std_dev={cpp_float(std)}")
    return 0


# -- partition -----------------------------------------------------------------------------------


def _where(delegation) -> dict[int, str]:
    """Op index -> "CPU" or "<delegate> partition <n>" (partitions numbered per delegate in plan order)."""
    from runtime.interpreter.delegation import CpuStep

    where, seen = {}, {}
    for step in delegation.plan:
        if isinstance(step, CpuStep):
            where[step.op] = "CPU"
            continue
        name = step.partition.delegate
        seen[name] = seen.get(name, -1) + 1
        where.update(dict.fromkeys(step.partition.nodes, f"{name} partition {seen[name]}"))
    return where


def _why_not(op: int, reports) -> list[str]:
    lines = []
    for rep in reports:
        notes = {u.op: u.reason for u in (*rep.unsupported, *rep.declined)}
        reason = rep.error or notes.get(op, "supported, but left on the CPU")
        lines.append(f"        not on {rep.delegate}: {reason or 'not supported'}")
    return lines


def cmd_partition(args: argparse.Namespace, extra: list[str]) -> int:
    from runtime.interpreter.delegation import apply_delegates
    from runtime.ops.dynamic import dynamic_tensors

    profile = profile_from_flags(args.device, args.api_level)
    delegates = parse_delegate_flags(args.parser, extra, profile)
    model = model_from_flags(args)
    graph = model.graph
    delegation = apply_delegates(graph, delegates, dynamic_tensors(graph))
    names = ", ".join(d.name for d in delegates) or "none (every op on the CPU)"
    print(f"model: {model.label} ({len(graph.ops)} ops) on {profile.name}; delegates: {names}")
    print(f"{'#':>4}  {'op':30s} {'output shape':22s} runs on")
    where = _where(delegation)
    for i, op in enumerate(graph.ops):
        shape = ", ".join(str(list(graph.tensors[t].shape)) for t in op.outputs if t >= 0)
        print(f"{i:>4}  {op.name:30s} {shape:22s} {where[i]}")
        if where[i] == "CPU":
            for line in _why_not(i, delegation.per_delegate):
                print(line)
    on_cpu = sum(1 for w in where.values() if w == "CPU")
    print(f"{len(graph.ops) - on_cpu} of {len(graph.ops)} ops delegated, {on_cpu} on the CPU")
    print("Delegation log:" if delegation.log else "Delegation log: (empty)")
    for line in delegation.log:
        print(line)
    return 0


# -- list, supported-ops ---------------------------------------------------------------------------


def _show(value) -> str:
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, tuple):
        return "(" + ",".join(_show(v) for v in value) + ")"
    return str(value)


def _list_delegates() -> None:
    from delegates.registry import BUILTIN, make_delegate

    for kind, (options, _) in BUILTIN.items():
        defaults = ", ".join(f"{f.name}={_show(f.default)}" for f in dataclasses.fields(options))
        print(f"{kind:8s} {make_delegate(kind).name:24s} --use_{kind:8s} {defaults}")


def _list_models() -> None:
    import inspect

    import runtime.zoo as zoo

    for name, fn in sorted(zoo.MODELS.items()):
        params = ", ".join(f"{p.name}={p.default}" for p in inspect.signature(fn).parameters.values())
        print(f"{name}({params})")


def cmd_list(args: argparse.Namespace, extra: list[str]) -> int:
    if args.what == "devices":
        from sim.profile import list_profiles, load_profile

        for name in list_profiles():
            print(f"{name:12s} {load_profile(name).description}")
    elif args.what == "delegates":
        _list_delegates()
    elif args.what == "models":
        _list_models()
    else:
        _list_ops()
    return 0


def _list_ops() -> None:
    """Every builtin op with the kernels it has (float, 8-bit, hybrid) or why it has none, then the
    registered custom ops: a user learns whether a missing op is missing on purpose."""
    from runtime.ops.custom_ops import CUSTOM_OPS
    from runtime.ops import HYBRID_KERNELS, KERNELS, QUANT_KERNELS
    from runtime.ops.op_coverage import UNSUPPORTED
    from runtime.ir.optypes import OpType

    for op in sorted(OpType, key=lambda o: o.name):
        kinds = [k for k, table in (("float", KERNELS), ("8-bit", QUANT_KERNELS), ("hybrid", HYBRID_KERNELS))
                 if op in table]
        if kinds:
            print(f"{op.name:34s} {', '.join(kinds)}")
        elif op in UNSUPPORTED:
            print(f"{op.name:34s} no kernel: {UNSUPPORTED[op]}")
    for name in sorted(CUSTOM_OPS):
        print(f"{name:34s} custom op" + (" (the GPU delegate takes it)" if CUSTOM_OPS[name].gpu else ""))


def cmd_supported_ops(args: argparse.Namespace, extra: list[str]) -> int:
    from delegates.table import DEFAULT_COLUMNS, supported_ops_table

    sys.stdout.write(supported_ops_table(args.delegate or DEFAULT_COLUMNS))
    return 0


# -- run, report -----------------------------------------------------------------------------------


def _summary(records: list[dict]) -> list[str]:
    """dtb run's table, a row per record; a failed cell reads FAILED (its figures are the CPU's) and its
    error follows the table."""
    rows = [("label", "latency avg ms", "boundary %", "mJ/inference", "delegated nodes")]
    failures = []
    for rec in records:
        label = str(rec.get("label") or rec.get("scenario", ""))
        delegated = f"{sum(d.get('nodes_delegated', 0) for d in rec.get('delegates', []))}/{rec['model']['nodes']}"
        status, error = record_status(rec)
        if status is CellStatus.FAILED:
            delegated = "FAILED"
            failures.append(f"FAILED {label}: {error}; the CPU ran instead, so its figures are the CPU's")
        rows.append((label, f"{rec['latency_ms']['avg']:.3f}", f"{rec['boundary']['share'] * 100:.1f}",
                     f"{rec['energy']['total_mj']:.3f}", delegated))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) if c == 0 else cell.rjust(w) for c, (cell, w) in enumerate(zip(row, widths)))
            for row in rows] + failures


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    import contextlib
    import signal
    import threading

    from delegates.guard import time_budget
    from runtime.report.progress import Progress
    from runtime.sweep.runner import run_file

    if args.check:
        return _check_run(args)
    main = threading.current_thread() is threading.main_thread()
    # SIGTERM ends the run as Ctrl-C does, so the output folder's lock and staging files are cleaned up
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler) if main else None
    budget = (time_budget(args.delegate_timeout_secs) if args.delegate_timeout_secs is not None
              else contextlib.nullcontext())
    prog = args.parser.prog if getattr(args, "parser", None) is not None else "dtb run"
    progress = Progress(prog, "cell")
    try:
        with budget:
            results = run_file(args.scenario, args.output, progress, args.allow_external_delegates, args.overwrite,
                               resume=args.resume, executor=args.executor, workers=args.workers, yes=args.yes,
                               budget=args.delegate_timeout_secs, cell_timeout=args.cell_timeout_secs)
    finally:
        progress.close()   # before any error line: the bar or the timer's lines never cut into it
        if main:
            signal.signal(signal.SIGTERM, previous)
    warn_refusals(prog, [r["platform_refusal"] for r in results["records"] if r.get("platform_refusal")])
    for line in _summary(results["records"]):
        print(line)
    from runtime.report.apps import summary_lines
    for line in summary_lines(results["records"]):   # app streams: the sustained figure, frames, heat
        print(line)
    print(f"wrote {Path(args.output) / 'results.json'} (and results.csv, trace.json, report.md, manifest.json; "
          f"the cells are in results.db)")
    return 0


def _check_run(args: argparse.Namespace) -> int:
    """dtb run --check: every cell checked, its label listed, and the run's estimated host time; nothing run."""
    from runtime.sweep.runner import check_file
    from runtime.sweep.executors import HOW, duration, estimate

    cells = check_file(args.scenario, args.allow_external_delegates)
    print(f"{args.scenario}: {len(cells)} cell(s) checked, nothing run")
    for sc in cells:
        print(f"  {sc.label}")
    seconds = estimate(cells)
    print("estimated host time: under 1,000 inferences, not estimated" if seconds is None else
          f"estimated host time, one cell after another: about {duration(seconds)} ({HOW})")
    return 0


def cmd_report(args: argparse.Namespace, extra: list[str]) -> int:
    from runtime.report.render import render, render_file
    from runtime.sweep.results_db import is_database, read_results

    if is_database(args.results):   # a run's results.db: the cells finished so far
        results, cells = read_results(args.results)
        try:
            text = render(results, args.format)
        except TestbedError as exc:
            raise TestbedError(f"{args.results}: {exc}") from None
        if len(results["records"]) < cells:
            print(f"dtb report: note: {args.results} holds {len(results['records'])} of the run's {cells} cells",
                  file=sys.stderr)
    else:
        text = render_file(args.results, args.format)
    if args.output:
        write_atomic(args.output, text)
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0


# -- parsers ---------------------------------------------------------------------------------------


def add_parsers(sub) -> None:
    sp = delegate_tool_parser(sub, "inference-diff", allow_abbrev=False,
                              help="inference_diff: CPU single-thread reference vs a delegate on Gaussian inputs")
    add_model_flags(sp, file_aliases=("--model_file",))
    add_device_flag(sp)
    sp.add_argument("--delegate", default="", help="gpu, nnapi, hexagon or coreml (empty: the CPU)")
    sp.add_argument("--num_runs", type=_positive, default=50)
    sp.add_argument("--num_interpreter_threads", type=threads, default=1)
    sp.set_defaults(fn=cmd_inference_diff, parser=sp)

    sp = delegate_tool_parser(sub, "partition", allow_abbrev=False,
                              help="where each op runs under the given delegate flags, and why not elsewhere")
    add_model_flags(sp)
    add_device_flag(sp)
    sp.set_defaults(fn=cmd_partition, parser=sp)

    sp = sub.add_parser("list", help="list devices, delegates, zoo models or the testbed's ops")
    sp.add_argument("what", choices=["devices", "delegates", "models", "ops"])
    sp.set_defaults(fn=cmd_list, parser=sp)

    sp = sub.add_parser("supported-ops", help="the ops each delegate accepts and on what conditions")
    sp.add_argument("--delegate", action="append", choices=_KINDS, help="only this delegate (repeatable)")
    sp.set_defaults(fn=cmd_supported_ops, parser=sp)

    sp = sub.add_parser("run", help="run a scenario file; writes results.json, results.csv, trace, report")
    sp.add_argument("scenario", help="scenario .yaml")
    sp.add_argument("-o", "--output", default="results", help="output directory (default: results)")
    sp.add_argument("--allow-external-delegates", action="store_true",
                    help="let the scenario load delegates by module path (external: {path: ...}): that "
                         "imports and runs the code it names, so only for scenarios you trust")
    sp.add_argument("--overwrite", action="store_true",
                    help="replace another scenario's results in the output directory")
    sp.add_argument("--check", action="store_true",
                    help="load the scenario and check every cell (phones, delegates, inputs); run nothing")
    sp.add_argument("--delegate_timeout_secs", type=delegate_budget, default=None, metavar="SECONDS",
                    help="time budget of each delegate call (default 5, or $DTB_DELEGATE_TIMEOUT; 0: none)")
    sp.add_argument("--resume", action="store_true",
                    help="keep the cells the output folder's results.db holds from a run that was stopped, and run "
                         "the rest (refused if the scenario changed those cells)")
    sp.add_argument("--executor", type=executor_arg, default=("local", None), metavar="local|dask[=ADDRESS]",
                    help="local: the cells one after another here (default); dask: each cell a task on a Dask "
                         "LocalCluster (one process per core), or on the scheduler at ADDRESS")
    sp.add_argument("--workers", type=_positive, default=None, metavar="N",
                    help="worker processes of --executor dask's LocalCluster (default: one per core)")
    sp.add_argument("--cell_timeout_secs", type=_seconds, default=None, metavar="SECONDS",
                    help="with --executor dask: stop the sweep when a cell runs longer than this on a worker "
                         "(default: no limit); the finished cells stay for --resume")
    sp.add_argument("--yes", action="store_true",
                    help=f"run a sweep of over {GUARD_CELLS:,} cells, or estimated at an hour or more, without asking")
    sp.set_defaults(fn=cmd_run, parser=sp)

    sp = sub.add_parser("report", help="render a results file as Markdown, HTML or CSV")
    sp.add_argument("results", help="results.json or results.db of `dtb run`, or a `dtb benchmark --output_json` file")
    sp.add_argument("--format", default="md", choices=["md", "html", "csv"])
    sp.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    sp.set_defaults(fn=cmd_report, parser=sp)
