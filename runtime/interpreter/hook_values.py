"""A delegate's plan-time and timing hooks, called and their answers checked before the simulator uses them.

Every value a delegate returns for the simulator (init, invoke and step seconds, unit scales, node units,
fused nodes, a kernel's mode) is checked here: an exception in the hook, a wrong type, NaN, a negative,
an infinite or an absurdly large number is a DelegateError naming the delegate and the hook, so no
figure is ever reported over a number the delegate made up. An external delegate's hook runs on its
watched thread within the time budget (delegates.guard); a built-in delegate's is called directly.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable

from delegates import guard
from delegates.registry import is_builtin
from runtime.ir.errors import DelegateError
from sim.numerics import NumericMode
from sim.unit import Scales

__all__ = ["MAX_SECONDS", "MAX_SCALE", "ask", "seconds", "scales", "node_units", "fused_nodes", "absorbed_nodes", "mode",
           "kernel_unit"]

MAX_SECONDS = 3600.0   # one fixed cost (an init, one invoke's call) longer than an hour is no phone's figure
MAX_SCALE = 1e6        # a backend or preference moving a unit's rate, power or dispatch a millionfold is not one


def _shown(value: Any) -> str:
    return "None" if value is None else f"{type(value).__name__} {value!r:.40}"


def ask(delegate, hook: str, fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args) as the delegate's `hook`: watched for an external delegate; any exception (or
    SystemExit) from it is a DelegateError naming the delegate and the hook."""
    what = f"{delegate.name} {hook}"
    try:
        return fn(*args) if is_builtin(delegate) else guard.call(what, fn, *args)
    except DelegateError as exc:
        if str(exc).startswith(what):  # a timeout names the hook already: kept, with its type
            raise
        raise DelegateError(f"{what}: {exc}") from None
    except BaseException as exc:  # noqa: BLE001 - a hook's sys.exit is its failure, not the run's end
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise DelegateError(f"{what} failed: {type(exc).__name__}: {exc}") from None


def _number(value: Any, what: str, low: float, high: float, low_ok: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise DelegateError(f"{what} returned {_shown(value)}, not a number")
    x = float(value)
    if not math.isfinite(x) or x < low or (x == low and not low_ok) or x > high:
        bound = ">= 0" if low_ok else "> 0"
        raise DelegateError(f"{what} returned {value!r:.40}; it must be a finite number {bound} and at most {high:g}")
    return x


def seconds(delegate, hook: str, fn: Callable[..., Any], *args: Any) -> float:
    """A seconds hook's answer: a finite number in [0, MAX_SECONDS]."""
    return _number(ask(delegate, hook, fn, *args), f"{delegate.name} {hook}", 0.0, MAX_SECONDS, True)


def scales(delegate, unit) -> Scales:
    """unit_scales' answer: a sim.unit.Scales of finite factors in (0, MAX_SCALE]."""
    what = f"{delegate.name} unit_scales"
    value = ask(delegate, "unit_scales", delegate.unit_scales, unit)
    if not isinstance(value, Scales):
        raise DelegateError(f"{what} returned {_shown(value)}, not a sim.unit.Scales")
    for field in ("rate", "power", "dispatch", "clock"):
        _number(getattr(value, field), f"{what} ({field})", 0.0, MAX_SCALE, False)
    _number(value.vtcm_mb, f"{what} (vtcm_mb)", 0.0, math.inf, True)   # 0: the unit's whole VTCM
    return value


def node_units(delegate, partition) -> dict[int, str]:
    """node_units' answer: a dict of the partition's own nodes to unit names."""
    what = f"{delegate.name} node_units"
    value = ask(delegate, "node_units", delegate.node_units, partition)
    if not isinstance(value, dict):
        raise DelegateError(f"{what} returned {_shown(value)}, not a dict of node -> unit name")
    nodes = set(partition.nodes)
    for node, unit in value.items():
        if isinstance(node, bool) or not isinstance(node, int) or node not in nodes:
            raise DelegateError(f"{what} names {_shown(node)}, not a node of its partition")
        if not isinstance(unit, str) or not unit:
            raise DelegateError(f"{what} gives node {node} {_shown(unit)}, not a unit name")
    return dict(value)


def fused_nodes(delegate, partition) -> frozenset[int]:
    """fused_nodes' answer: a set (frozenset, set, tuple or list) of the partition's own nodes."""
    return _node_set(delegate, partition, "fused_nodes", delegate.fused_nodes)


def absorbed_nodes(delegate, partition) -> frozenset[int]:
    """absorbed_nodes' answer: a set (frozenset, set, tuple or list) of the partition's own nodes."""
    return _node_set(delegate, partition, "absorbed_nodes", delegate.absorbed_nodes)


def _node_set(delegate, partition, hook: str, method) -> frozenset[int]:
    what = f"{delegate.name} {hook}"
    value = ask(delegate, hook, method, partition)
    if not isinstance(value, (frozenset, set, tuple, list)):
        raise DelegateError(f"{what} returned {_shown(value)}, not a frozenset of nodes")
    nodes = set(partition.nodes)
    for node in value:
        if isinstance(node, bool) or not isinstance(node, int) or node not in nodes:
            raise DelegateError(f"{what} names {_shown(node)}, not a node of its partition")
    return frozenset(value)


def mode(delegate, kernel) -> NumericMode:
    """A kernel's mode: a NumericMode or its name; None is REFERENCE (a kernel of the delegate's own)."""
    value = ask(delegate, "kernel mode", getattr, kernel, "mode")
    if value is None:
        return NumericMode.REFERENCE
    if isinstance(value, NumericMode):
        return value
    if isinstance(value, str) and value.upper() in NumericMode.__members__:
        return NumericMode[value.upper()]
    names = ", ".join(NumericMode.__members__)
    raise DelegateError(f"{delegate.name} kernel mode is {_shown(value)}, not one of {names}")


def kernel_unit(delegate, kernel) -> str | None:
    """A kernel's unit: a profile unit's name, or None for the delegate's kind."""
    value = ask(delegate, "kernel unit", getattr, kernel, "unit")
    if value is not None and (not isinstance(value, str) or not value):
        raise DelegateError(f"{delegate.name} kernel unit is {_shown(value)}, not a unit name")
    return value
