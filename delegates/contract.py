"""The delegate contract as data: each hook delegates.api declares, when the runtime uses it, its default.

Read from the API's own declarations and docstrings (a hook's docstring ends with a "When:" and a
"Default:" paragraph), so README's list of hooks and the conformance kit's contract checks cannot
drift from the code. `python -m delegates.contract` prints README's list.
"""

from __future__ import annotations

import ast
import functools
import inspect
import numbers
import re
import textwrap
import types
import typing
from dataclasses import dataclass
from typing import Any

from delegates import api
from delegates.api import Delegate, DelegateKernel

__all__ = ["Hook", "hooks", "expected_type", "matches", "describe_type", "markdown"]

_OWNERS = (Delegate, DelegateKernel)


@dataclass(frozen=True)
class Hook:
    """One declared hook: a method the runtime calls, or an attribute it reads."""

    owner: type            # Delegate or DelegateKernel
    name: str
    method: bool
    params: tuple[str, ...]  # the arguments the runtime passes, in order (methods only)
    summary: str           # what it is: the docstring before its When: paragraph
    when: str
    default: str

    def of(self, obj: Any) -> Any:
        """The hook as `obj` has it: its bound method or its attribute's value. The API declares
        every hook with a default, so this reads what is there; the conformance kit uses it to
        check each value against the declaration (an override may have the wrong type)."""
        return getattr(obj, self.name)

    @property
    def signature(self) -> str:
        """As README shows it: "init_seconds(spec, graph) -> float", or "name: str"."""
        shown = describe_type(expected_type(self))
        return f"{self.name}({', '.join(self.params)}) -> {shown}" if self.method else f"{self.name}: {shown}"


def _sections(doc: str, where: str) -> tuple[str, str, str]:
    """(summary, when, default) of a hook's docstring; each is one line of text."""
    parts = re.split(r"^(When|Default):", inspect.cleandoc(doc), flags=re.MULTILINE)
    found = dict(zip(parts[1::2], parts[2::2]))
    if set(found) != {"When", "Default"}:
        raise ValueError(f"{where}: a hook's docstring ends with a 'When:' and a 'Default:' paragraph")
    return tuple(" ".join(text.split()) for text in (parts[0], found["When"], found["Default"]))


def _body(owner: type) -> list[ast.stmt]:
    source = textwrap.dedent(inspect.getsource(owner))
    return ast.parse(source).body[0].body


def _declared(owner: type) -> list[Hook]:
    """The class body's public methods and annotated attributes, in order. An attribute's docstring
    is the string right below it (the convention documentation tools read)."""
    body, out = _body(owner), []
    for stmt, after in zip(body, [*body[1:], None]):
        if isinstance(stmt, ast.FunctionDef) and not stmt.name.startswith("_"):
            params = tuple(a.arg for a in stmt.args.args[1:])
            doc = ast.get_docstring(stmt) or ""
            out.append(Hook(owner, stmt.name, True, params, *_sections(doc, f"{owner.__name__}.{stmt.name}")))
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            name = stmt.target.id
            doc = (after.value.value if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                   and isinstance(after.value.value, str) else "")
            out.append(Hook(owner, name, False, (), *_sections(doc, f"{owner.__name__}.{name}")))
    return out


@functools.lru_cache(maxsize=None)
def hooks(owner: type | None = None) -> tuple[Hook, ...]:
    """Every declared hook of `owner` (Delegate or DelegateKernel), or of both."""
    if owner is None:
        return tuple(h for o in _OWNERS for h in hooks(o))
    if owner not in _OWNERS:
        raise ValueError(f"{owner.__name__} is not a class of the delegate API")
    return tuple(_declared(owner))


def _namespace() -> dict[str, Any]:
    """The names the API's annotations use, including those it imports only for type checkers."""
    from runtime.ir.partition import Partition
    from sim.numerics import NumericMode
    from sim.spec import Profile, UnitSpec
    from sim.unit import Scales, Unit

    return {**vars(api), "Partition": Partition, "NumericMode": NumericMode, "Profile": Profile,
            "UnitSpec": UnitSpec, "Scales": Scales, "Unit": Unit}


def expected_type(hook: Hook) -> Any:
    """What the hook returns (a method) or holds (an attribute), as the API annotates it."""
    if hook.method:
        return typing.get_type_hints(getattr(hook.owner, hook.name), _namespace())["return"]
    return typing.get_type_hints(hook.owner, _namespace())[hook.name]


def matches(value: Any, hint: Any) -> bool:
    """Whether `value` is of the annotated type: unions, and the element types of tuples,
    frozensets, lists and dicts, are checked; bool is not taken for a number."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is None or hint is type(None):
        return value is None
    if origin in (typing.Union, types.UnionType):
        return any(matches(value, a) for a in args)
    if hint in (int, float):
        kind = numbers.Integral if hint is int else numbers.Real
        return isinstance(value, kind) and not isinstance(value, bool)
    if hint is bool:
        return isinstance(value, bool)
    if origin is None:
        return isinstance(value, hint)
    if not isinstance(value, origin):
        return False
    if origin is dict:
        return all(matches(k, args[0]) and matches(v, args[1]) for k, v in value.items())
    return all(matches(item, args[0]) for item in value)  # tuple[X, ...], frozenset[X], list[X]


def describe_type(hint: Any) -> str:
    """An annotation as the reader wrote it: "frozenset[int]", "str | None", "Scales"."""
    if hint is None or hint is type(None):
        return "None"
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " | ".join(describe_type(a) for a in args)
    if args:
        inner = ", ".join("..." if a is Ellipsis else describe_type(a) for a in args)
        return f"{typing.get_origin(hint).__name__}[{inner}]"
    return getattr(hint, "__name__", str(hint))


def markdown(width: int = 100) -> str:
    """README's list of hooks, grouped by class, as api.py declares them (wrapped to `width`)."""
    lines: list[str] = []
    for owner in _OWNERS:
        lines += ["", f"`{owner.__name__}`:", ""] if lines else [f"`{owner.__name__}`:", ""]
        for h in hooks(owner):
            item = f"- `{h.signature}`: {h.summary} When: {h.when} Default: {h.default}"
            lines += textwrap.wrap(item, width, subsequent_indent="  ", break_on_hyphens=False,
                                   break_long_words=False)
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
