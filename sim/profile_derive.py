"""Profiles derived from another phone's by published differences: a `derive:` section resolved to plain profile data."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable, Mapping

from runtime.ir.yamlcheck import Key
from sim.profile_parse import ProfileCtx, parse_mapping, parse_number, parse_text, show_value

__all__ = ["DROPPED", "base_path", "derive"]

# What a derived phone does not inherit: the base's fit says nothing about how the derived phone's
# rows would be predicted.
DROPPED = ("calibration", "error_band")


def base_path(profile_dir: Path, name: str) -> Path:
    """The base a `derive:` names: the calibrated profile of that name if one is shipped, else its prior,
    so a derived phone follows its base when the base is refitted."""
    shipped = profile_dir / f"{name}.yaml"
    return shipped if shipped.is_file() else profile_dir / "priors" / f"{name}.yaml"


def derive(ctx: ProfileCtx, data: Mapping[str, Any], profile_dir: Path,
           read: Callable[[Path], Mapping[str, Any]]) -> dict[str, Any]:
    """The profile data a deriving file stands for: its base's data (read by `read`), every number
    under each `scale:` path multiplied by new / old, then the file's own top-level keys over it."""
    spec = parse_mapping(ctx, data["derive"], ("derive",))
    for key in spec:
        if key not in ("base", "scale"):
            raise ctx.fail(("derive", key), "unknown key; expected one of base, scale")
    if "base" not in spec:
        raise ctx.fail(("derive", "base"), "required key is missing")
    name = parse_text(ctx, spec["base"], ("derive", "base"))
    path = base_path(profile_dir, name)
    if "/" in name or not path.is_file():
        raise ctx.fail(("derive", "base"), f"no profile {show_value(name)} to derive from (looked for {path})")
    merged = copy.deepcopy(dict(read(path)))
    for key in DROPPED:
        merged.pop(key, None)
    for dotted_path, ratio in parse_mapping(ctx, spec.get("scale", {}), ("derive", "scale")).items():
        where = ("derive", "scale", dotted_path)
        _scale(ctx, merged, tuple(dotted_path.split(".")), _ratio(ctx, ratio, where), where)
    merged.update({k: v for k, v in data.items() if k != "derive"})
    return merged


def _ratio(ctx: ProfileCtx, value: Any, where: Key) -> float:
    """A [new, old] pair of published figures (4.47 GHz against 4.32 GHz): the factor is new / old."""
    if not isinstance(value, list) or len(value) != 2:
        raise ctx.fail(where, f"must be a [new, old] pair of positive numbers, got {show_value(value)}")
    new, old = (parse_number(ctx, v, where + (i,), "a positive number", lambda x: x > 0) for i, v in enumerate(value))
    if not 0 < new / old < 1e300:   # [1e299, 1e-299]: an infinite factor, blamed on the base's numbers otherwise
        raise ctx.fail(where, f"{new:g} / {old:g} is not a factor a float can hold")
    return new / old


def _scale(ctx: ProfileCtx, data: dict, path: tuple[str, ...], factor: float, where: Key) -> None:
    node: Any = data
    for key in path[:-1]:
        if not isinstance(node, dict) or key not in node:
            raise ctx.fail(where, f"the base profile has no {'.'.join(path)}")
        node = node[key]
    last = path[-1]
    if not isinstance(node, dict) or last not in node:
        raise ctx.fail(where, f"the base profile has no {'.'.join(path)}")
    target = node[last]
    if isinstance(target, dict):
        numbers = {k: v for k, v in target.items() if _is_number(v)}
        if not numbers:
            raise ctx.fail(where, f"{'.'.join(path)} holds no numbers to scale")
        target.update({k: v * factor for k, v in numbers.items()})
    elif _is_number(target):
        node[last] = target * factor
    else:
        raise ctx.fail(where, f"{'.'.join(path)} is not a number or a mapping of numbers")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
