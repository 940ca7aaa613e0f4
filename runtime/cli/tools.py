"""`dtb` subcommands inference-diff, partition, run and report."""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

import numpy as np

from delegates.kinds import BUILTIN_KINDS
from runtime.cli.benchmark import count_at_most, threads
from runtime.cli.common import (add_delegate_budget_flag, add_device_flag, add_model_flags, check_writable,
                                cpp_float, delegate_kinds, delegate_tool_parser, echo_log, flag_default_notes,
                                gaussian_inputs, profile_from_flags, model_from_flags, parse_delegate_flags,
                                scenario_default_notes, to_us, warn_lines, warn_refusals, with_delegate_flag,
                                write_atomic)
from runtime.cli.profile_tables import Stat
from runtime.ir.files import same_file
from runtime.ir.errors import TestbedError
from runtime.interpreter.api import Interpreter
from runtime.limits import counts as limits
from runtime.report.status import CellStatus, delegates_status, record_status
from runtime.sweep.executors import executor_arg
from runtime.sweep.guard import GUARD_CELLS

__all__ = ["add_parsers", "OutputMismatches"]

_KINDS = BUILTIN_KINDS
_DIFF_SEED = 0
# TFLite's inference_diff averages |reference - test| over float32, int8 and uint8 outputs
# (tensorflow/lite/tools/evaluation/stages/inference_profiler_stage.cc); other floating outputs get
# the same figure. Integer and boolean outputs (indices, classes, counts, masks) have no meaningful
# distance: they are compared by exact match, the elements that differ counted.
_DIFF_ERROR = ("FLOAT32", "INT8", "UINT8", "FLOAT16", "FLOAT64")
_DIFF_EXACT = ("BOOL", "INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64", "INT4")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not 0 < value < 1e9:   # finite, and a limit a timer can hold
        raise argparse.ArgumentTypeError(f"expected seconds above 0 and below 1e9, got {text!r}")
    return value


def _output_folder(text: str) -> str:
    """dtb run -o: a folder name; an empty one (an unset variable) would write into the current folder."""
    if not text:
        raise argparse.ArgumentTypeError("expected a folder name, got an empty one")
    return text


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
    flags = with_delegate_flag(extra, args.delegate)
    delegates = parse_delegate_flags(args.parser, flags, profile)
    for t in graph.outputs:
        if graph.tensors[t].dtype.name not in _DIFF_ERROR + _DIFF_EXACT:
            raise TestbedError(f"inference-diff compares {', '.join(_DIFF_ERROR + _DIFF_EXACT)} outputs; output "
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


@dataclasses.dataclass
class OutputMismatches:
    """An integer or boolean output's exact comparison over the runs: elements that differ, of all."""

    differ: int = 0
    elements: int = 0
    runs_differing: int = 0

    def add(self, reference: np.ndarray, test: np.ndarray) -> None:
        n = int(np.count_nonzero(reference != test)) if reference.shape == test.shape else max(reference.size, 1)
        self.differ, self.elements = self.differ + n, self.elements + reference.size
        self.runs_differing += n > 0

    def line(self, k: int, runs: int) -> str:
        share = self.differ / self.elements if self.elements else 0.0
        return (f"OutputDiff[{k}]: exact_match={'true' if not self.differ else 'false'}, "
                f"mismatched_elements={self.differ} of {self.elements} ({share:.4%}), "
                f"runs_with_mismatch={self.runs_differing} of {runs}")


def _mean_abs_error(reference: np.ndarray, test: np.ndarray) -> float:
    d = np.abs(reference.astype(np.float64) - test.astype(np.float64))
    return float(np.float32(d.mean())) if d.size else 0.0


def _diff_runs(runs: int, graph, reference: Interpreter, test: Interpreter, progress):
    """Both interpreters on the same Gaussian inputs `runs` times: their latencies, the float outputs'
    mean errors per run and the exact outputs' mismatches."""
    ref_us, test_us = Stat(), Stat()
    exact = {k for k, t in enumerate(graph.outputs) if graph.tensors[t].dtype.name in _DIFF_EXACT}
    errors: list[list[float]] = [[] for _ in graph.outputs]
    mismatches = {k: OutputMismatches() for k in exact}
    rng = np.random.default_rng(_DIFF_SEED)
    for _ in range(runs):
        feed = gaussian_inputs(graph, rng)
        for it, stat in ((test, test_us), (reference, ref_us)):
            for t, value in feed.items():
                it.set_tensor(t, value)
            it.invoke()
            stat.add(to_us(it.simulation.latencies[-1]))
        for k, t in enumerate(graph.outputs):
            if k in exact:
                mismatches[k].add(reference.get_tensor(t), test.get_tensor(t))
            else:
                errors[k].append(_mean_abs_error(reference.get_tensor(t), test.get_tensor(t)))
        progress.step()
    return ref_us, test_us, errors, mismatches


def cmd_inference_diff(args: argparse.Namespace, extra: list[str]) -> int:
    from runtime.cli.benchmark import PROGRESS_DELAY_S
    from runtime.report.progress import Progress

    # on stderr once PROGRESS_DELAY_S of host time has passed: building a large model and its delegate
    # takes seconds, and so does each run; elsewhere than a terminal a line every 10 s from the start
    with Progress(args.parser.prog, "run", delay=PROGRESS_DELAY_S, leave=False, total=args.num_runs) as progress:
        progress(0, args.num_runs)
        progress.note("preparing the model and both interpreters")
        profile = profile_from_flags(args.device, args.api_level)
        model = model_from_flags(args)
        graph = model.graph
        reference, test = _diff_interpreters(args, extra, profile, graph)
        for it in (reference, test):
            it.allocate_tensors()
        progress.note("")
        ref_us, test_us, errors, mismatches = _diff_runs(args.num_runs, graph, reference, test, progress)
    print(f"Num evaluation runs: {args.num_runs}")
    print(f"Reference run latency: avg={cpp_float(ref_us.avg())}(us), std_dev={ref_us.std()}(us)")
    print(f"Test run latency: avg={cpp_float(test_us.avg())}(us), std_dev={test_us.std()}(us)")
    for k, values in enumerate(errors):
        if k in mismatches:
            print(mismatches[k].line(k, args.num_runs))
            continue
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


def _why_not(op: int, reports, restored: bool) -> list[str]:
    lines = []
    for rep in reports:
        notes = {u.op: u.reason for u in (*rep.unsupported, *rep.declined)}
        reason = rep.error or notes.get(op, "supported, but left on the CPU")
        if restored and rep.error and not rep.error.startswith("removed when "):
            # the failure names one op; every other op is on the CPU because of it, not for a reason of its own
            reason = f"the delegate failed while applied and TFLite restored the CPU plan ({rep.error})"
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
            for line in _why_not(i, delegation.per_delegate, delegation.restored):
                print(line)
    on_cpu = sum(1 for w in where.values() if w == "CPU")
    print(f"{len(graph.ops) - on_cpu} of {len(graph.ops)} ops delegated, {on_cpu} on the CPU")
    for note in flag_default_notes(delegate_kinds(delegates), delegation.per_delegate):
        print(f"note: {note}")
    print("Delegation log:" if delegation.log else "Delegation log: (empty)")
    for line in delegation.log:
        print(line)
    if delegation.restored:   # dtb benchmark stops here too; the table above is the plan TFLite fell back to
        failed = delegation.per_delegate[-1]
        raise TestbedError(f"Failed to apply {failed.delegate}: {failed.error} (TFLite restored the CPU plan "
                           f"shown above; dtb benchmark stops here unless --cpu_fallback)")
    return 0


# -- run, report -----------------------------------------------------------------------------------


def _band_cell(rec: dict) -> str:
    """The latency's fitted band: median / p90 |error| % and the rows, or why there is none."""
    band = rec.get("error_band") or {}
    if band.get("median_pct") is None:
        return band.get("note", "-")
    return f"{band['median_pct']:.1f} / {band['p90_pct']:.1f} ({band['rows']} {band['delegate']} rows)"


def _summary(records: list[dict]) -> list[str]:
    """dtb run's table, a row per record, with the latency's fitted error band; a failed cell reads
    FAILED (its figures are the CPU's) and its error follows the table."""
    rows = [("label", "latency avg ms", "fitted band median / p90 %", "boundary %", "mJ/inference",
             "delegated nodes")]
    failures = []
    for rec in records:
        label = str(rec.get("label") or rec.get("scenario", ""))
        delegated = f"{sum(d.get('nodes_delegated', 0) for d in rec.get('delegates', []))}/{rec['model']['nodes']}"
        status, error = record_status(rec)
        if status is CellStatus.FAILED:
            delegated = "FAILED"
            failures.append(f"FAILED {label}: {error}; the CPU ran instead, so its figures are the CPU's")
        rows.append((label, f"{rec['latency_ms']['avg']:.3f}", _band_cell(rec), f"{rec['boundary']['share'] * 100:.1f}",
                     f"{rec['energy']['total_mj']:.3f}", delegated))
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) if c == 0 else cell.rjust(w) for c, (cell, w) in enumerate(zip(row, widths)))
            for row in rows] + failures


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    import signal
    import threading

    from runtime.measure.band import warning_text
    from runtime.report.progress import Progress
    from runtime.sweep.runner import run_file

    if args.check:
        return _check_run(args)
    main = threading.current_thread() is threading.main_thread()
    # SIGTERM ends the run as Ctrl-C does, so the output folder's lock and staging files are cleaned up
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler) if main else None
    prog = args.parser.prog if getattr(args, "parser", None) is not None else "dtb run"
    progress = Progress(prog, "cell")
    try:
        results = run_file(args.scenario, args.output, progress, args.allow_external_delegates, args.overwrite,
                           resume=args.resume, executor=args.executor, workers=args.workers, yes=args.yes,
                           budget=args.delegate_timeout_secs, cell_timeout=args.cell_timeout_secs,
                           allow_paths_outside_output=args.allow_paths_outside_output)
    finally:
        progress.close()   # before any error line: the bar or the timer's lines never cut into it
        if main:
            signal.signal(signal.SIGTERM, previous)
    warn_refusals(prog, [r["platform_refusal"] for r in results["records"] if r.get("platform_refusal")])
    warn_lines(prog, [w for r in results["records"] for w in r.get("delegate_warnings") or ()])
    for note in scenario_default_notes(results["records"]):
        print(f"{prog}: note: {note}", file=sys.stderr)
    for rec in results["records"]:   # a figure extrapolated beyond the phone's fitted rows says so
        warning = warning_text(rec["device"], (rec.get("error_band") or {}).get("delegate", "cpu"),
                               rec.get("outside_fit") or ())
        if warning:
            print(f"{prog}: warning: {rec.get('label') or rec.get('scenario', '')}: {warning}", file=sys.stderr)
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
    from runtime.sweep.guard import HOW, duration, estimate

    cells = check_file(args.scenario, args.allow_external_delegates, args.allow_paths_outside_output)
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

    if args.output is not None:   # before reading: never renamed over a device, a folder or the input itself
        check_writable(args.output)
        if same_file(args.output, args.results):
            raise TestbedError(f"cannot write {args.output}: it is the results file being rendered (-o would "
                               f"replace it with the report)")
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
    if args.output is not None:
        write_atomic(args.output, text)
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0


# -- parsers ---------------------------------------------------------------------------------------


def add_parsers(sub) -> None:
    sp = delegate_tool_parser(sub, "inference-diff", allow_abbrev=False)
    add_model_flags(sp, file_aliases=("--model_file",))
    add_device_flag(sp)
    sp.add_argument("--delegate", default="", help=f"{', '.join(BUILTIN_KINDS)} (empty: the CPU); the same as "
                                                   f"--use_NAME")
    sp.add_argument("--num_runs", default=50, help=f"at most {limits.MAX_RUNS}",
                    type=count_at_most(limits.MAX_RUNS, "the testbed's limit: every run's latency and trace are kept",
                                       least=1))
    sp.add_argument("--num_interpreter_threads", type=threads, default=1)
    sp.set_defaults(fn=cmd_inference_diff, parser=sp)

    sp = delegate_tool_parser(sub, "partition", allow_abbrev=False)
    add_model_flags(sp)
    add_device_flag(sp)
    sp.set_defaults(fn=cmd_partition, parser=sp)

    sp = sub.add_parser("run")
    sp.add_argument("scenario", help="scenario .yaml")
    sp.add_argument("-o", "--output", type=_output_folder, default="results",
                    help="output directory (default: results)")
    sp.add_argument("--allow-external-delegates", action="store_true",
                    help="let the scenario load delegates by module path (external: {path: ...}): that "
                         "imports and runs the code it names, so only for scenarios you trust")
    sp.add_argument("--allow-paths-outside-output", action="store_true",
                    help="let the scenario's delegate cache folders (serialization_dir, cache_dir) be absolute or "
                         "climb out of -o with '..', and its model_token hold a path separator: only for "
                         "scenarios you trust")
    sp.add_argument("--overwrite", action="store_true",
                    help="replace another scenario's results in the output directory")
    sp.add_argument("--check", action="store_true",
                    help="load the scenario and check every cell (phones, delegates, inputs); run nothing")
    add_delegate_budget_flag(sp)
    sp.add_argument("--resume", action="store_true",
                    help="keep the cells the output folder's results.db holds from a run that was stopped, and run "
                         "the rest (refused if the scenario changed those cells)")
    sp.add_argument("--executor", type=executor_arg, default=("local", None), metavar="local|dask[=ADDRESS]",
                    help="local: the cells one after another here (default); dask: each cell a task on a Dask "
                         "LocalCluster (one process per core), or on the scheduler at ADDRESS")
    sp.add_argument("--workers", default=None, metavar="N",
                    type=count_at_most(limits.MAX_WORKERS, "each worker is a process of its own on this machine", least=1),
                    help=f"worker processes of --executor dask's LocalCluster (default: one per core; at most "
                         f"{limits.MAX_WORKERS})")
    sp.add_argument("--cell_timeout_secs", type=_seconds, default=None, metavar="SECONDS",
                    help="with --executor dask: stop the sweep when a cell runs longer than this on a worker "
                         "(default: no limit); the finished cells stay for --resume")
    sp.add_argument("--yes", action="store_true",
                    help=f"run a sweep of over {GUARD_CELLS:,} cells, or estimated at an hour or more, without asking")
    sp.set_defaults(fn=cmd_run, parser=sp)

    sp = sub.add_parser("report")
    sp.add_argument("results", help="results.json or results.db of `dtb run`, or a `dtb benchmark --output_json` file")
    sp.add_argument("--format", default="md", choices=["md", "html", "csv"])
    sp.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    sp.set_defaults(fn=cmd_report, parser=sp)
