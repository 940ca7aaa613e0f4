"""`dtb conformance`: run the delegate conformance kit from the command line and print its table."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

from delegates.registry import BUILTIN
from runtime.cli.common import add_delegate_budget_flag, delegate_budget_scope

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dtb conformance",
        description="Check a delegate against the CPU reference on generated single-op graphs, "
                    "plus its failure handling (is_node_supported, create_kernel, prepare, invoke) "
                    "and the contract of its hooks (delegates.api).")
    parser.add_argument("factory", nargs="?", help="the delegate factory as package.module:factory")
    parser.add_argument("--delegate", choices=sorted(BUILTIN),
                        help="check a built-in delegate (made for --device) instead of a factory")
    parser.add_argument("--device", default="generic", help="phone profile name or YAML path (default: generic)")
    parser.add_argument("--examples", type=int, default=10,
                        help="generated instances per op and dtype (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="generation seed; a seed always gives the same cases")
    parser.add_argument("--ops", default=None, help="comma-separated op types, e.g. CONV_2D,ADD (default: all)")
    add_delegate_budget_flag(parser)
    return parser


def _factory(args: argparse.Namespace, parser: argparse.ArgumentParser):
    if (args.factory is None) == (args.delegate is None):
        parser.error("give either package.module:factory or --delegate NAME")
    if args.factory is not None:
        return args.factory
    from delegates.registry import make_delegate
    from sim.profile import load_profile

    profile = load_profile(args.device)
    return lambda: make_delegate(args.delegate, profile)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the report table and a summary line; 0 when every case passes, 1 otherwise (a bad
    factory path or device: one line on stderr)."""
    from runtime.conformance.kit import run_conformance

    parser = build_parser()
    args = parser.parse_args(argv)
    ops = [op for op in args.ops.split(",") if op.strip()] if args.ops else None
    # The lifecycle cases make delegates fail on purpose; the runtime's warnings about that are noise here.
    logger = logging.getLogger("delegate_testbed")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with delegate_budget_scope(args.delegate_timeout_secs):
            report = run_conformance(_factory(args, parser), args.device, args.examples, args.seed, ops)
    except Exception as exc:  # bad factory path, unknown device or op: one line, exit 1
        print(f"dtb conformance: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    finally:
        logger.setLevel(level)
    print(report.to_text())
    print()
    print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
