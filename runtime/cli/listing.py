"""`dtb list` and `dtb supported-ops`: what the testbed has (phones, delegates, zoo models, ops), each loaded only when listed."""

from __future__ import annotations

import argparse
import dataclasses
import enum
import sys

from delegates.kinds import BUILTIN_KINDS

__all__ = ["add_parsers", "cmd_list", "cmd_supported_ops"]

_KINDS = BUILTIN_KINDS


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

    # A delegate named twice is one column, in the order first given.
    sys.stdout.write(supported_ops_table(list(dict.fromkeys(args.delegate or DEFAULT_COLUMNS))))
    return 0


def add_parsers(sub) -> None:
    sp = sub.add_parser("list")
    sp.add_argument("what", choices=["devices", "delegates", "models", "ops"])
    sp.set_defaults(fn=cmd_list, parser=sp)

    sp = sub.add_parser("supported-ops")
    sp.add_argument("--delegate", action="append", choices=_KINDS, help="only this delegate (repeatable)")
    sp.set_defaults(fn=cmd_supported_ops, parser=sp)
