"""`dtb calibrate`: fit a phone profile to measured latencies, write it as YAML, cross-validate it."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Sequence

import numpy as np
import yaml

from runtime.calibration.band import error_band
from runtime.calibration.evaluate import CalibrationError, Evaluator, OnStep
from runtime.calibration.fit import Fit, Prediction, candidate_params, cross_validate, fit
from runtime.calibration.base import load_base
from runtime.calibration.files import read_file
from runtime.calibration.rows import MAX_ROWS, MeasurementError, Row, model_key
from runtime.calibration.spread import Spread, spreads
from runtime.ir.errors import TestbedError
from runtime.ir.files import same_file
from runtime.report.progress import Progress
from sim.band import ErrorBand, render_error_band

__all__ = ["add_parsers", "cmd_calibrate", "render_profile", "calibrate_files", "fastest"]

# Within this much of each other two measured latencies are a tie: the published tables round to
# 0.1 ms, so 1.7 vs 1.7 ms says nothing about which delegate is faster.
TIE_MS = 0.05
# The share of held-out rows within this |error| is reported beside the median (a phone is trusted
# when most rows are near, not only the middle one).
WITHIN = 0.25
PROGRESS_DELAY_S = 2.0   # host seconds before a terminal shows the bar (a quick step shows nothing)


def add_parsers(sub) -> None:
    sp = sub.add_parser("calibrate",
                        description="Fit a profile's physical parameters (rates, efficiencies, per-op and per-call "
                                    "costs) to measured latencies by bounded least squares on log latency, pulled "
                                    "toward the base profile's values.")
    sp.add_argument("measurements", nargs="+", help=".csv files of rows, benchmark_model logs, or Qualcomm AI Hub "
                                                     "perf.yaml / profile-job .json files")
    sp.add_argument("--base", required=True, help="profile to start from (a shipped name or a .yaml); a calibrated "
                                                  "profile starts from the prior it names")
    sp.add_argument("-o", "--output", help="write the fitted profile here (YAML, the base's format)")
    sp.add_argument("--cv", action="store_true", help="cross-validation: leave one model family out (the rows' "
                                                      "family column; each model alone where there is none)")
    sp.add_argument("--op_split", action="store_true",
                    help="instead of fitting, compare each row's op split per unit (npu_ops, gpu_ops, cpu_ops, "
                         "as Qualcomm AI Hub reports it) with the simulated delegates' (--use_qnn then --use_gpu)")
    sp.add_argument("--device", help="phone name for log files that do not say (default: the base's name)")
    sp.add_argument("--model", help="model for log files whose Graph line is missing (.tflite or zoo:NAME), or "
                                    "the .tflite an AI Hub profile job's .json measured")
    sp.add_argument("--max_nfev", type=int, default=30, help="least-squares iterations of the fit and of each "
                                                              "cross-validation fold (default 30)")
    sp.set_defaults(fn=cmd_calibrate, parser=sp)


def row_models(row: Row):
    from runtime.sweep.cell import build_model
    from runtime.scenario.load import ModelSpec, Quantization
    from runtime.ir.yamlcheck import freeze

    try:
        if names_a_file(row):
            return build_model(ModelSpec(path=local_model_path(row)))
        return build_model(ModelSpec(zoo=row.model, args=freeze(dict(row.args)),
                                     quantization=Quantization(row.quantization)))
    except CalibrationError:   # local_model_path's own, which names the row already
        raise
    except (ValueError, OSError) as exc:
        raise CalibrationError(f"{row.source}: model {row.label}: {exc}") from None


def names_a_file(row: Row) -> bool:
    """Whether a row's model is a .tflite file (else a zoo name)."""
    return row.model.endswith((".tflite", ".tflite.xz")) or os.sep in row.model


def local_model_path(row: Row) -> Path:
    """A CSV's relative path is relative to the CSV's folder; a log's Graph line names the file on
    the phone: use it if it is here, else a file of the same name beside the measurement file, else
    in the current folder."""
    named = Path(row.model)
    log_dir = Path(row.source.rsplit(":", 1)[0]).parent
    beside = () if named.is_absolute() else (log_dir / named,)
    for candidate in (*beside, named, log_dir / named.name, Path.cwd() / named.name):
        if candidate.is_file():
            return candidate
    raise CalibrationError(f"{row.source}: model {row.model} not found (nor {named.name} beside the measurements "
                           f"or in the current folder)")


def read_rows(paths: Sequence[str], device: str, model: str | None) -> list[Row]:
    """Every file's rows; the published measurements that gave none are printed, one `skipped:` line each."""
    files = [read_file(p, device, model) for p in paths]
    for line in (s for f in files for s in f.skipped):   # AI Hub rows without a model file here: said, not dropped
        print(f"skipped: {line}", file=sys.stderr)
    return [r for f in files for r in f.rows]


def calibrate_files(paths: Sequence[str], base: str, device: str | None = None, model: str | None = None,
                    on_row: OnStep | None = None, output: str | None = None):
    """Rows of the files, the base profile (data, lines, text, path) and an Evaluator over them
    (`on_row(done, rows, label)` as each row's model is built); `output`, the profile to be written,
    must not be a row's model file (checked before any model is built)."""
    data, lines, text, path = load_base(base)
    rows = read_rows(paths, device or data["name"], model)
    check_not_a_model(output, rows)
    if len(rows) > MAX_ROWS:
        raise MeasurementError(f"{len(rows)} measurement rows in {len(paths)} files, over the limit of {MAX_ROWS} "
                               f"(calibrate from a subset)")
    if not rows:
        raise CalibrationError("no measurement row to fit (every one was skipped)")
    phones = sorted({r.device for r in rows if r.device})
    if len(phones) > 1:
        raise CalibrationError(f"the measurements are for several phones ({', '.join(phones)}); calibrate one "
                               f"phone at a time")
    evaluator = Evaluator(rows, data, str(path), row_models, on_row)
    used = set().union(*(s.used for s in evaluator.sims))
    return rows, (data, lines, text, path), evaluator, candidate_params(data, used)


def check_output(output: str | None) -> None:
    """Fail before minutes of fitting, not after: -o must name a file that can be created in a
    folder that exists and can be written."""
    if output is None:
        return
    path = Path(output)
    if not output or output.endswith(("/", os.sep)) or path.is_dir():
        raise TestbedError(f"cannot write {output}: it is a folder; give the profile's file name (e.g. phone.yaml)")
    try:
        folder = path.resolve().parent
        longest = os.pathconf(folder, "PC_NAME_MAX") if folder.is_dir() else 255
    except (OSError, ValueError) as exc:
        raise TestbedError(f"cannot write {output}: {getattr(exc, 'strerror', None) or exc}") from None
    if not folder.is_dir():
        raise TestbedError(f"cannot write {output}: no such folder {path.parent}")
    if len(os.fsencode(path.name)) > longest - 24:   # room for the temporary name the atomic write uses
        raise TestbedError(f"cannot write {output}: the file name is {len(os.fsencode(path.name))} bytes, over this "
                           f"file system's limit of {longest - 24} (with room for a temporary name)")
    if path.exists() and not path.is_file():
        raise TestbedError(f"cannot write {output}: it is not a regular file")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise TestbedError(f"cannot write {output}: the folder {path.parent} is not writable")


def check_not_an_input(output: str | None, measurements: Sequence[str], base: str) -> None:
    """-o must not name a file the fit reads: a measurement file would be replaced by the profile, and the
    base profile (or the prior a calibrated base names) would name itself as its prior (and its prior
    values would be gone)."""
    if output is None:
        return
    prior = load_base(base)[3]
    for what, path in [*(("measurement file", m) for m in measurements), ("--base profile", base),
                       ("prior profile", prior)]:
        if same_file(output, path):   # a shipped profile's name (--base pixel4) names no file here
            raise TestbedError(f"cannot write {output}: it is the {what} {path}; give the fitted profile a "
                               f"file name of its own")


def check_profile_text(output: str | None, base: str, device: str | None) -> None:
    """The written profile names its prior by path and the phone by --device: both must be text a
    UTF-8 file can hold (a file name of Latin-1 bytes is not), checked before the fit, not after."""
    if output is None:
        return
    prior = _relative(load_base(base)[3], Path(output).parent)
    for what, value in (("the prior profile's path", prior), ("--device", device or "")):
        if value != _readable(value):
            raise TestbedError(f"cannot write {output}: {what} {value!r} is not UTF-8 text, which the profile "
                               f"must hold as it is")


def check_not_a_model(output: str | None, rows: Sequence[Row]) -> None:
    """-o must not name a row's model file, which the profile would replace."""
    if output is None:
        return
    for row in filter(names_a_file, rows):
        try:
            path = local_model_path(row)
        except (CalibrationError, OSError):   # not found: the model's build says so, naming the row
            continue
        if same_file(output, path):
            raise TestbedError(f"cannot write {output}: it is the model file of {row.source}; give the "
                               f"fitted profile a file name of its own")


def cmd_calibrate(args, extra=None) -> int:
    if args.max_nfev < 1 or args.max_nfev > 10_000:
        raise CalibrationError(f"--max_nfev must be in 1..10000, got {args.max_nfev}")
    if args.op_split and args.output:
        raise CalibrationError("--op_split fits nothing, so -o has no profile to write; drop one of them")
    check_output(args.output)
    check_not_an_input(args.output, args.measurements, args.base)
    check_profile_text(args.output, args.base, args.device)
    prog = args.parser.prog
    if args.op_split:
        return _op_split(args, prog)
    # progress on stderr (a bar on a terminal, a line every 10 s elsewhere): building the rows' models,
    # the fit's simulations of the row set, the cross-validation's folds
    with Progress(prog, "row", delay=PROGRESS_DELAY_S, leave=False) as progress:
        rows, (data, lines, text, path), evaluator, params = calibrate_files(
            args.measurements, args.base, args.device, args.model, progress, args.output)
    with Progress(prog, "simulation", delay=PROGRESS_DELAY_S, leave=False) as progress:
        prior = evaluator.run(params, [p.prior for p in params])
        result = fit(evaluator, params, max_nfev=args.max_nfev, on_run=progress)
    print(f"Calibrating {data['name']} from {len(rows)} rows ({', '.join(args.measurements)}); prior {path}")
    _print_params(result)
    _print_rows(result, [ms for ms, _ in prior])
    band = None
    if args.cv:   # before writing: the written profile carries the band the cross-validation measured
        with Progress(prog, "fold", delay=PROGRESS_DELAY_S, leave=False) as progress:
            cv = cross_validate(evaluator, params, on_fold=progress,
                                on_run=lambda done, most, label: progress.note(f"{done} simulations"),
                                max_nfev=args.max_nfev)
        _print_cv(cv.predictions)
        _print_spreads(spreads(result, cv), _held_out(rows))
        band = error_band(evaluator, cv.predictions)
        _print_band(band)
    if args.output:
        from runtime.ir.atomic import write_text

        source = ", ".join(_readable(_relative(Path(p), Path(args.output).parent)) for p in args.measurements)
        try:
            write_text(args.output, render_profile(text, lines, result, source,
                                                   _relative(path, Path(args.output).parent),
                                                   args.device if args.device != data["name"] else None, band))
        except OSError as exc:   # e.g. the disk filled during the fit
            raise TestbedError(f"cannot write {args.output}: {exc.strerror or exc}") from None
        print(f"wrote {args.output}")
    return 0


def _op_split(args, prog: str) -> int:
    """The op split check: one partitioning per distinct model on the base profile, no simulation."""
    from runtime.calibration.op_split import check_splits, summarize
    from sim.profile import profile_from_dict

    data, _, _, path = load_base(args.base)
    rows = read_rows(args.measurements, args.device or data["name"], args.model)
    if not rows:
        raise CalibrationError("no measurement row to check (every one was skipped)")
    if not any(r.split for r in rows):
        raise CalibrationError(f"no row of {', '.join(args.measurements)} reports an op split (npu_ops, gpu_ops, "
                               f"cpu_ops columns, or an AI Hub file)")
    with Progress(prog, "row", delay=PROGRESS_DELAY_S, leave=False) as progress:
        checks = check_splits(rows, row_models, profile_from_dict(data, str(path)), progress)
    print(f"Op split per unit on {data['name']} (measured / simulated with --use_qnn=true --use_gpu=true)")
    print(f"{'model':52s} {'ops':>9s} {'npu':>9s} {'gpu':>9s} {'cpu':>9s}  verdict")
    for c in checks:
        m, s = c.measured, c.simulated
        verdict = "agrees" if c.agrees else "DIFFERS" if c.total_matches else "other op count"
        print(f"{c.row.label[-52:]:52s} {m.total:>4d}/{s.total:<4d} {m.npu:>4d}/{s.npu:<4d} {m.gpu:>4d}/{s.gpu:<4d} "
              f"{m.cpu:>4d}/{s.cpu:<4d}  {verdict}")
    summary = summarize(checks)
    share = f" ({summary.agree / summary.same_total:.0%})" if summary.same_total else ""
    print(f"op split agrees on {summary.agree} of {summary.same_total} rows whose op count matches{share}; "
          f"{summary.rows - summary.same_total} of {summary.rows} rows have another op count")
    return 0


def _relative(path: Path, folder: Path) -> str:
    try:
        return os.path.relpath(path.resolve(), folder.resolve())
    except ValueError:   # another drive
        return str(path.resolve())


def _print_params(result: Fit) -> None:
    print(f"{'parameter':45s} {'prior':>10s} {'fitted':>10s}")
    for k, (p, v) in enumerate(zip(result.params, result.values)):
        note = "" if result.is_informed(k) else "  no row moves it: kept at the prior"
        side = result.bound_hit(k)
        if side:
            note = (f"  at its {side} bound ({fmt(p.hi if side == 'upper' else p.lo)}): the rows ask for "
                    f"{'more' if side == 'upper' else 'less'}; the mechanisms may misprice what it sets")
        print(f"{p.name:45s} {fmt(p.prior):>10s} {fmt(v):>10s}{note}")


def _print_rows(result: Fit, prior: Sequence[float]) -> None:
    print(f"\n{'model':44s} {'delegate':8s} {'threads':>7s} {'measured':>9s} {'prior':>8s} {'fitted':>8s} {'error':>7s}")
    for row, p, s in zip(result.rows, prior, result.simulated):
        print(f"{row.label:44s} {row.delegate:8s} {row.threads:7d} {row.latency_ms:9.2f} {p:8.2f} {s:8.2f} "
              f"{s / row.latency_ms - 1:+7.1%}")
    errors = np.abs(result.errors())
    print(f"fit: median |error| {np.median(errors):.1%}, max {errors.max():.1%} over {len(errors)} rows "
          f"({result.evaluations} simulations of the row set)")


def fastest(predictions: Sequence[Prediction]) -> list[tuple[str, set[str], str]]:
    """Per model: the measured fastest delegates (ties within TIE_MS) and the simulated fastest."""
    out = []
    for key in sorted({model_key(p.row) for p in predictions}, key=str):
        mine = [p for p in predictions if model_key(p.row) == key]
        if len({p.row.delegate for p in mine}) < 2:
            continue
        best = min(p.row.latency_ms for p in mine)
        measured = {p.row.delegate for p in mine if p.row.latency_ms <= best + TIE_MS}
        simulated = min(mine, key=lambda p: p.simulated).row.delegate
        out.append((mine[0].row.label, measured, simulated))
    return out


def _held_out(rows: Sequence[Row]) -> str:
    """What each fold holds out: a family where the rows name families, else a model."""
    return "family" if any(r.family for r in rows) else "model"


def _print_cv(predictions: Sequence[Prediction]) -> None:
    held = _held_out([p.row for p in predictions])
    print(f"\nLeave-one-{held}-out cross-validation ({len(predictions)} rows)")
    print(f"{'model':44s} {'delegate':8s} {'measured':>9s} {'simulated':>9s} {'error':>7s}")
    for p in predictions:
        print(f"{p.row.label:44s} {p.row.delegate:8s} {p.row.latency_ms:9.2f} {p.simulated:9.2f} {p.error:+7.1%}")
    errors = np.abs([p.error for p in predictions])
    within = int(np.sum(errors <= WITHIN))
    print(f"cv: median |error| {np.median(errors):.1%}, max {errors.max():.1%}, {within} of {len(errors)} rows "
          f"({within / len(errors):.0%}) within {WITHIN:.0%}")
    agree = 0
    for label, measured, simulated in (rows := fastest(predictions)):
        ok = simulated in measured
        agree += ok
        print(f"fastest {label:44s} measured {'/'.join(sorted(measured)):12s} simulated {simulated:8s} "
              f"{'agrees' if ok else 'DISAGREES'}")
    print(f"fastest delegate agrees for {agree} of {len(rows)} models")


def _print_spreads(rows: Sequence[Spread], held: str) -> None:
    """Each parameter's value with every row and over the folds: the widest first, so that the
    parameters one family (or model) alone pins, and whose held-out rows its absence moves, lead."""
    if not rows:
        return
    print(f"\nParameters with one {held} held out (fitted to every row; least and greatest over the folds; "
          "the fold that moved it most)")
    print(f"{'parameter':45s} {'fitted':>10s} {'fold min':>10s} {'fold max':>10s}  moved most without")
    for r in rows:
        print(f"{r.param.name:45s} {fmt(r.fitted):>10s} {fmt(r.low):>10s} {fmt(r.high):>10s}  "
              f"{r.widest} (x{r.ratio:.2f})")


def _print_band(band: ErrorBand) -> None:
    """The band each delegate's figures carry (dtb benchmark, reports), and what its rows covered."""
    print("\nError band per delegate (leave-one-model-out |error|) and the models its rows fitted")
    for b in band.delegates:
        c = b.coverage
        shares = ", ".join(f"{cls.value} {lo:.0%}-{hi:.0%}" for cls, lo, hi in c.shares)
        print(f"band {b.delegate.value:8s} median {b.median_pct:.1f}%, p90 {b.p90_pct:.1f}% on {b.rows} rows; "
              f"{c.models} models, {', '.join(sorted(p.value for p in c.precisions))}, "
              f"MACs {c.macs[0] / 1e6:.1f}-{c.macs[1] / 1e6:.1f} M, params {c.params[0] / 1e6:.2f}-"
              f"{c.params[1] / 1e6:.2f} M, op share {shares}")


# -- writing the profile ----------------------------------------------------------------------------

# A prior profile says what it is on a header line starting so; the calibrated file says what it is.
PRIOR_MARK = "# The prior of a calibrated profile:"
_LINE = re.compile(r"^(?P<head>\s*[\w.-]+:\s*)(?P<value>[^\s#]+)(?P<pad>\s*)(?:#\s?(?P<comment>.*))?$")


def _readable(text: str) -> str:
    """`text` as UTF-8 can hold it: a path's undecodable bytes (kept as surrogates) become U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _one_line(text: str) -> str:
    """`text` for a comment: a line break in a file name would end the comment and start YAML."""
    return " ".join(text.splitlines())


def _scalar(text: str) -> str:
    """`text` as a YAML value that reads back as this string: plain where it does, else double-quoted
    (a name or path holding ': ' or ' #', or starting with '*', '[' or a quote, would not)."""
    try:
        plain = yaml.safe_load(f"key: {text}") == {"key": text}
    except yaml.YAMLError:
        plain = False
    return text if plain and text == _one_line(text) else json.dumps(text)


def fmt(value: float) -> str:
    text = f"{value:.4g}"
    return text if "e" not in text else f"{value:.6f}".rstrip("0").rstrip(".")


def render_profile(text: str, lines: dict, result: Fit, source: str, prior: str, name: str | None = None,
                   band: ErrorBand | None = None) -> str:
    """The base profile's YAML with every fitted number replaced in place and its comment saying so,
    a `calibration:` section naming the prior and the measurements, the phone's own name when it is
    another phone than the base's, and the cross-validation's `error_band:` section when given."""
    out, said = text.splitlines(), _one_line(source)   # said: the measurements in a comment
    if name:
        n = lines[("name",)] - 1
        shown = _scalar(name)
        out[n] = f"name: {shown}{' ' * max(1, 31 - len(shown))}# the phone measured (the prior is another's)"
    rows = len(result.rows)
    for k, (p, value) in enumerate(zip(result.params, result.values)):
        if not result.is_informed(k):   # no row moved with it: the prior's line, as it was
            continue
        n = lines[p.path] - 1
        m = _LINE.match(out[n])
        if m is None:
            raise CalibrationError(f"{prior}:{n + 1}: cannot rewrite the value of {p.name}")
        was = (m.group("comment") or "").strip()
        was = re.sub(r"^(assumed|fitted|derived|spec)[^:]*:\s*", "", was)
        head = m.group("head")
        line = f"{head}{fmt(value)}"
        out[n] = f"{line:{max(len(line) + 1, 32)}s}# fitted: {said} ({rows} rows); prior {fmt(p.prior)}" + \
                 (f" ({was})" if was else "")
    mark = f"# Calibrated: dtb calibrate fitted this file's numbers marked \"fitted\" to {said}, from {_one_line(prior)}."
    out = [mark if ln.startswith(PRIOR_MARK) else ln for ln in out]
    out = [ln for ln in out if not ln.startswith("calibration:") and not ln.startswith("  prior:")
           and not ln.startswith("  measurements:") and not ln.startswith("  rows:")]
    out += ["", "calibration:                    # written by dtb calibrate; refit with it from the prior",
            f"  prior: {_scalar(prior)}", f"  measurements: {_scalar(source)}",
            f"  rows: {rows:<26d}# fitted: measurement rows the fit used"]
    if band is not None:
        out += ["", *render_error_band(band)]
    return "\n".join(out) + "\n"
