"""The `dtb` command line: its parser and entry point; each command's module is imported only when it is given."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from typing import Sequence

from runtime.ir.errors import TestbedError

__all__ = ["COMMANDS", "main", "parse"]

# Each command: the module that defines its arguments (add_parsers) and runs it, and the line `dtb --help`
# shows for it. Only the given command's module is imported, so `dtb --help` or `dtb list devices` loads no
# model, kernel or simulator code. A module may define several commands (runtime/cli/tools.py).
COMMANDS: dict[str, tuple[str, str]] = {
    "infer": ("runtime.cli.infer", "run a model on the CPU reference kernels and summarise its outputs"),
    "inspect": ("runtime.cli.infer", "list a model's ops with shapes and kernel support"),
    "export": ("runtime.cli.infer", "write a zoo model (or a .tflite file), quantized as asked, to a .tflite file"),
    "benchmark": ("runtime.cli.benchmark",
                  "benchmark_model on a simulated phone (also takes TFLite's delegate flags: --use_gpu, ...)"),
    "inference-diff": ("runtime.cli.tools",
                       "inference_diff: CPU single-thread reference vs a delegate on Gaussian inputs"),
    "partition": ("runtime.cli.tools", "where each op runs under the given delegate flags, and why not elsewhere"),
    "list": ("runtime.cli.listing", "list devices, delegates, zoo models or the testbed's ops"),
    "supported-ops": ("runtime.cli.listing", "the ops each delegate accepts and on what conditions"),
    "run": ("runtime.cli.tools", "run a scenario file; writes results.json, results.csv, trace, report"),
    "report": ("runtime.cli.tools", "render a results file as Markdown, HTML or CSV"),
    "calibrate": ("runtime.cli.calibrate", "fit a phone profile to measured latencies (CSV, benchmark_model logs, AI Hub files)"),
    "eval": ("runtime.cli.eval", "TFLite's task evaluation tools on a simulated phone: classification "
                                 "(top-K accuracy) and detection (COCO mAP)"),
    # its arguments are its own parser's (runtime/cli/conformance.py), see main
    "conformance": ("runtime.cli.conformance",
                    "check a delegate (package.module:factory) against the CPU reference op by op"),
}


def _parser(command: str | None) -> argparse.ArgumentParser:
    """The parser for a command line whose first word is `command`: that command's module adds its
    arguments (and those of the commands beside it in the module); every other command is only its
    name and help line, which is all `dtb --help` and an unknown command's error show."""
    p = argparse.ArgumentParser(prog="dtb", description="Delegate Testbed: TFLite models on simulated phones.")
    sub = p.add_subparsers(dest="command", required=True)
    given = COMMANDS[command][0] if command in COMMANDS and command != "conformance" else None
    for name, (module, text) in COMMANDS.items():
        if name in sub.choices:
            continue
        if module == given:
            importlib.import_module(module).add_parsers(sub)
        else:
            sub.add_parser(name, help=text)
    return p


def _memory_scope(limit: int | None):
    """--memory_limit_mb for every Interpreter the command builds (commands without a model have none)."""
    if limit is None:
        return contextlib.nullcontext()
    from runtime.limits import memory

    return memory.limit_scope(limit)


def _budget_scope(seconds: float | None):
    """--delegate_timeout_secs: the time budget of every external delegate's call the command makes."""
    if seconds is None:
        return contextlib.nullcontext()
    from delegates.guard import time_budget

    return time_budget(seconds)


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """The command line as `main` reads it, running nothing: the arguments, and the TFLite delegate
    flags left for the registry. A usage error exits 2, as argparse does (the docs' test checks its
    long-running examples this way, so a renamed flag fails it)."""
    argv = list(argv)
    if argv[:1] == ["conformance"]:
        from runtime.cli.conformance import build_parser

        return build_parser().parse_args(argv[1:]), []
    parser = _parser(argv[0] if argv else None)
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "takes_delegate_flags", False):
        (getattr(args, "parser", None) or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    return args, extra


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["conformance"]:
        from runtime.cli.conformance import main as conformance

        return conformance(argv[1:])
    args, extra = parse(argv)
    sp = getattr(args, "parser", None)
    # The newer tools name themselves in errors as argparse does ("dtb benchmark: error: ...").
    prefix = sp.prog if sp is not None else "dtb"
    try:
        with _memory_scope(getattr(args, "memory_limit_mb", None)), \
                _budget_scope(getattr(args, "delegate_timeout_secs", None)):
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
