"""Contract cases of the conformance kit: each hook of delegates.api called as the runtime calls it.

A delegate's hooks must take the runtime's arguments and give back the types the API declares."""

from __future__ import annotations

import inspect
from typing import Any

from delegates import contract
from delegates.api import Delegate, DelegateKernel, DelegationSummary

__all__ = ["contract_problems"]

# Run by the kit's other cases, where the runtime's own checks name what is wrong.
_EXERCISED = frozenset({"is_node_supported", "create_kernel", "prepare", "invoke"})


def contract_problems(delegate: Delegate, graph: Any = None, profile: Any = None) -> list[tuple[str, str]]:
    """(hook, what is wrong) for each declared hook the delegate breaks: an attribute of the wrong
    type, a method that cannot take the runtime's arguments, or one that raises or returns the wrong
    type when called as the runtime calls it on `graph` (a graph the delegate takes; without one,
    only attributes and signatures are checked). The kernel it makes for `graph` is checked too."""
    problems = _attributes(delegate, Delegate) + _signatures(delegate, Delegate)
    if problems or graph is None:  # calling hooks that cannot take their arguments repeats the finding
        return problems
    samples, kernel = _samples(delegate, graph, profile)
    problems += _results(delegate, samples)
    if kernel is not None:
        problems += _attributes(kernel, DelegateKernel) + _signatures(kernel, DelegateKernel)
    return problems


def _label(obj: Any, hook: contract.Hook) -> str:
    return f"{type(obj).__name__}.{hook.name}"


def _kind(value: Any) -> str:
    return "None" if value is None else f"{type(value).__name__} {value!r:.60}"


def _declares(hook: contract.Hook) -> str:
    return f"the contract (delegates.api) declares {contract.describe_type(contract.expected_type(hook))}"


def _attributes(obj: Any, owner: type) -> list[tuple[str, str]]:
    problems = []
    for hook in contract.hooks(owner):
        if hook.method:
            continue
        try:
            value = hook.of(obj)
        except Exception as exc:
            problems.append((f"{owner.__name__}.{hook.name}", f"reading {_label(obj, hook)} raised "
                                                              f"{type(exc).__name__}: {exc}"))
            continue
        if not contract.matches(value, contract.expected_type(hook)):
            problems.append((f"{owner.__name__}.{hook.name}",
                             f"{_label(obj, hook)} is {_kind(value)}; {_declares(hook)}"))
    return problems


def _signatures(obj: Any, owner: type) -> list[tuple[str, str]]:
    problems = []
    for hook in contract.hooks(owner):
        if not hook.method:
            continue
        where = f"{owner.__name__}.{hook.name}"
        fn = hook.of(obj)
        if not callable(fn):
            problems.append((where, f"{_label(obj, hook)} is {_kind(fn)}, not a method; the runtime calls "
                                    f"{hook.signature}"))
            continue
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):  # a builtin without a readable signature: judged by its results
            continue
        try:
            signature.bind(*hook.params)
        except TypeError:
            problems.append((where, f"{_label(obj, hook)}{signature} cannot be called as the runtime calls it: "
                                    f"{hook.signature}"))
    return problems


def _samples(delegate: Delegate, graph: Any, profile: Any) -> tuple[dict[str, Any], DelegateKernel | None]:
    """The arguments the runtime passes, by parameter name, from applying the delegate to `graph`
    on the phone; and the kernel it made (None when applying it failed: other cases report why)."""
    from runtime.interpreter.delegation import DelegateStep, apply_delegates
    from sim.soc import SoC

    step = next((s for s in apply_delegates(graph, [delegate]).plan if isinstance(s, DelegateStep)), None)
    kernel = step.kernel if step is not None else None
    unit = _unit(SoC(profile), delegate, kernel)
    samples = {"op": graph.ops[0], "graph": graph, "unit": unit, "spec": unit.spec, "profile": profile,
               "summary": DelegationSummary(len(graph.ops), len(graph.ops), 1, 1, ())}
    if step is not None:
        samples["partition"] = step.partition
    return samples, kernel


def _unit(soc: Any, delegate: Delegate, kernel: DelegateKernel | None) -> Any:
    """The unit the runtime would charge: the kernel's, else the first of the delegate's kind, else the CPU."""
    names = [kernel.unit] if kernel is not None and isinstance(kernel.unit, str) else []
    names += [n for n, u in soc.units.items() if delegate.unit in (u.spec.kind.value, n)]
    return next((soc.unit(n) for n in names if n in soc.units), soc.cpu)


def _results(delegate: Delegate, samples: dict[str, Any]) -> list[tuple[str, str]]:
    problems = []
    for hook in contract.hooks(Delegate):
        if not hook.method or hook.name in _EXERCISED or not all(p in samples for p in hook.params):
            continue
        where, call = f"Delegate.{hook.name}", f"{_label(delegate, hook)}({', '.join(hook.params)})"
        try:
            result = hook.of(delegate)(*(samples[p] for p in hook.params))
        except Exception as exc:
            problems.append((where, f"{call} raised {type(exc).__name__}: {exc}"))
            continue
        if not contract.matches(result, contract.expected_type(hook)):
            problems.append((where, f"{call} returned {_kind(result)}; {_declares(hook)}"))
    return problems
