"""The profile a calibration starts from: a shipped name or a file, and the prior a calibrated profile names."""

from __future__ import annotations

import reprlib
from pathlib import Path
from typing import Any, Mapping

from runtime.ir.yamlcheck import Key, parse

__all__ = ["load_base"]


def load_base(name_or_path: str) -> tuple[dict, dict, str, Path]:
    """The prior a calibration starts from: a calibrated profile names its prior file, which is
    used instead (so re-running a fit never compounds on its own output). Returns the data, its
    line table, the YAML text and the file's path."""
    from runtime.ir.errors import ProfileError
    from sim.profile import read_profile_text, resolve

    path = resolve(name_or_path)
    for _ in range(2):
        try:
            text = read_profile_text(path)   # a FIFO or /dev/zero is refused, not read forever
        except OSError as exc:
            raise ProfileError(f"{path}: cannot read the profile: {exc}") from None
        data, lines = parse(text, str(path), ProfileError)
        prior = _prior_of(data, lines, path)
        if not prior:
            return data, lines, text, path
        path = (path.parent / prior) if not Path(prior).is_absolute() else Path(prior)
    raise ProfileError(f"{path}: a prior profile must not itself name a prior")


def _prior_of(data: Any, lines: Mapping, path: Path) -> str | None:
    """The prior file a calibrated profile names (None for an uncalibrated one), after checking the
    keys the calibration reads before the profile's own loader does: the document, name, calibration.prior."""
    from runtime.ir.errors import ProfileError

    def where(key: Key) -> str:
        return f"{path}:{lines[key]}" if key in lines else str(path)

    if not isinstance(data, dict):
        raise ProfileError(f"{path}: a profile must be a mapping of keys, got {type(data).__name__}")
    if "derive" in data:   # the fit rewrites the numbers of the base's text, which a derived file does not hold
        base = data["derive"].get("base") if isinstance(data["derive"], dict) else None
        named = f" {reprlib.repr(base)}" if isinstance(base, str) else ""
        raise ProfileError(f"{where(('derive',))}: derive: a derived profile cannot be a calibration base: its "
                           f"figures are its base's, scaled; give its base{named} as --base")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ProfileError(f"{where(('name',))}: name: must be a non-empty string (the phone's name), got "
                           f"{'nothing' if name is None else type(name).__name__}")
    calibration = data.get("calibration")
    if calibration is None:
        return None
    if not isinstance(calibration, dict):
        raise ProfileError(f"{where(('calibration',))}: calibration: must be a mapping, got {type(calibration).__name__}")
    prior = calibration.get("prior")
    if prior is not None and (not isinstance(prior, str) or not prior.strip() or "\0" in prior):
        raise ProfileError(f"{where(('calibration', 'prior'))}: calibration.prior: must be a profile file name, got "
                           f"{type(prior).__name__}")
    return prior
