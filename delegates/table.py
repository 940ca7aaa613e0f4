"""The supported-ops table, generated from the delegates' rule tables (Markdown)."""

from __future__ import annotations

from typing import Iterable

from delegates.api import Delegate, DelegateError
from delegates.builtin import BuiltinDelegate
from delegates.kinds import DelegateKind
from delegates.rulekit import doc

__all__ = ["supported_ops_table", "DEFAULT_COLUMNS"]

DEFAULT_COLUMNS = tuple(k.value for k in (DelegateKind.GPU, DelegateKind.HEXAGON, DelegateKind.COREML,
                                           DelegateKind.NNAPI, DelegateKind.QNN))


def _resolve(item: Delegate | str) -> tuple[str, Delegate]:
    from delegates.registry import CLASSES, make_delegate

    if isinstance(item, str):
        return item, make_delegate(item)
    if not isinstance(item, BuiltinDelegate):
        raise DelegateError(f"{item.name} has no rule table to list")
    return next((key for key, cls in CLASSES.items() if isinstance(item, cls)), item.name), item


def _cell(rules) -> str:
    if rules is None:
        return "-"
    text = "; ".join(doc(r).rstrip(".") for r in rules) if rules else "yes"
    return text.replace("|", "\\|")


def supported_ops_table(delegates_or_names: Iterable[Delegate | str] = DEFAULT_COLUMNS) -> str:
    """Rows: op types; columns: delegates; cells: "yes", the conditions an op must meet (each
    rule's reason), or "-" when the delegate does not take the op at all. Rules every op must pass
    are listed under the table."""
    columns = [_resolve(item) for item in delegates_or_names]
    tables = [delegate.rule_table() for _, delegate in columns]
    ops = sorted(set().union(*tables), key=lambda t: t.name)
    lines = ["| op | " + " | ".join(label for label, _ in columns) + " |",
             "|---" * (len(columns) + 1) + "|"]
    lines += [f"| {op.name} | " + " | ".join(_cell(table.get(op)) for table in tables) + " |"
              for op in ops]
    notes = [f"- {label}, every op: " + "; ".join(doc(r).rstrip(".") for r in delegate.common_rules())
             for label, delegate in columns if delegate.common_rules()]
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"
