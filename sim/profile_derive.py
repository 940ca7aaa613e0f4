"""Profiles derived from another phone's by published differences: a `derive:` section resolved to plain profile data."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable, Mapping

from runtime.ir.yamlcheck import Key
from sim.profile_parse import ProfileCtx, parse_mapping, parse_number, parse_text, show_value

__all__ = ["DROPPED", "OWN", "base_names", "base_path", "derive"]

# What a derived phone does not inherit: the base's fit says nothing about how the derived phone's
# rows would be predicted.
DROPPED = ("calibration", "error_band")
# What a derived phone must say itself.
OWN = ("name", "description")


def base_names(profile_dir: Path) -> list[str]:
    """The profiles a `derive:` may name: the shipped ones and their priors."""
    return sorted({p.stem for folder in (profile_dir, profile_dir / "priors") for p in folder.glob("*.yaml")})


def base_path(profile_dir: Path, name: str) -> Path:
    """The base a `derive:` names: the calibrated profile of that name if one is shipped, else its prior,
    so a derived phone follows its base when the base is refitted."""
    shipped = profile_dir / f"{name}.yaml"
    return shipped if shipped.is_file() else profile_dir / "priors" / f"{name}.yaml"


def derive(ctx: ProfileCtx, data: Mapping[str, Any], profile_dir: Path,
           read: Callable[[Path], Mapping[str, Any]]) -> tuple[dict[str, Any], dict[Key, int]]:
    """The profile data a deriving file stands for: its base's data (read by `read`), every number
    under each `scale:` path multiplied by new / old, then the file's own top-level keys over it; and
    the file's line table, in which what the base gave points at `derive.base` and what a scale
    changed at that scale, so an error in either names the line that brought it in."""
    spec = parse_mapping(ctx, data["derive"], ("derive",))
    for key in spec:
        if key not in ("base", "scale"):
            raise ctx.fail(("derive", key), "unknown key; expected one of base, scale")
    for key in OWN:
        if key not in data:
            raise ctx.fail((key,), "required key is missing: a derived profile names and describes its own phone "
                                   "(its base's would label the figures of another)")
    merged = _base(ctx, spec, profile_dir, read)
    lines = dict(ctx.lines)
    lines.update({(key,): ctx.lines.get(("derive", "base"), 1) for key in merged if key not in data})
    scaled: list[tuple[str, ...]] = []
    for dotted_path, ratio in parse_mapping(ctx, spec.get("scale", {}), ("derive", "scale")).items():
        where = ("derive", "scale", dotted_path)
        path = tuple(dotted_path.split("."))
        _check_scaled(ctx, path, where, data, scaled)
        _scale(ctx, merged, path, _ratio(ctx, ratio, where), where)
        scaled.append(path)
        lines[path] = ctx.lines.get(where, 1)
    merged.update({k: v for k, v in data.items() if k != "derive"})
    return merged, lines


def _base(ctx: ProfileCtx, spec: Mapping[str, Any], profile_dir: Path,
          read: Callable[[Path], Mapping[str, Any]]) -> dict[str, Any]:
    """A copy of the data of the shipped profile `base:` names, without what a derived phone does not inherit."""
    if "base" not in spec:
        raise ctx.fail(("derive", "base"), "required key is missing")
    name = parse_text(ctx, spec["base"], ("derive", "base"))
    known = base_names(profile_dir)
    if name not in known:   # never a path: a name of 300 characters was an OSError from the file system
        raise ctx.fail(("derive", "base"), f"no profile {show_value(name)} to derive from; a base is a shipped "
                                           f"profile's name: {', '.join(known)}")
    merged = copy.deepcopy(dict(read(base_path(profile_dir, name))))
    if "derive" in merged:   # no chains, no cycles
        raise ctx.fail(("derive", "base"), f"{name} derives from another profile itself; derive from a plain profile")
    for key in DROPPED:
        merged.pop(key, None)
    return merged


def _check_scaled(ctx: ProfileCtx, path: tuple[str, ...], where: Key, data: Mapping[str, Any],
                  scaled: list[tuple[str, ...]]) -> None:
    """A scale changes numbers no other scale changes, in a section the file leaves to its base."""
    if path[0] in data:   # the file's own key replaces the base's, scaled numbers and all
        raise ctx.fail(where, f"the file sets {path[0]} itself, which replaces the base's and this scale with "
                              f"it; scale the base's {path[0]} or write the figure, not both")
    for other in scaled:
        if other[:len(path)] == path or path[:len(other)] == other:
            raise ctx.fail(where, f"overlaps the scale of {'.'.join(other)}: a number under both would be "
                                  f"scaled twice")


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
