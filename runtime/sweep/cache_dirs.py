"""A scenario's delegate cache folders (GPU serialization_dir, NNAPI and QNN cache_dir) placed inside the output folder.

The scenario names them relative to `-o` (runtime/scenario/spec.py refuses absolute ones and `..` unless
the user allows it); here each becomes `-o`/folder before the cells run, and a folder that a symlink
inside `-o` leads out of is refused, so a run writes its compiled programs nowhere else.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import MappingProxyType
from typing import Sequence

from runtime.ir.errors import ScenarioError
from runtime.scenario.apps import AppsScenario
from runtime.scenario.spec import ALLOW_OUTSIDE_FLAG, CACHE_DIR_OPTIONS, DelegateSpec

__all__ = ["place_cache_dirs"]


def place_cache_dirs(cells: Sequence, out: Path, allow_outside: bool = False) -> tuple:
    """The cells with every relative cache folder joined to `out` (absolute ones, allowed, stay as given)."""
    return tuple(_place_cell(sc, Path(out), allow_outside) for sc in cells)


def _place_cell(sc, out: Path, allow_outside: bool):
    def place(specs: tuple[DelegateSpec, ...]) -> tuple[DelegateSpec, ...]:
        return tuple(_place_spec(sc, spec, out, allow_outside) for spec in specs)

    if isinstance(sc, AppsScenario):
        return dataclasses.replace(sc, apps=tuple(dataclasses.replace(a, delegates=place(a.delegates))
                                                  for a in sc.apps))
    return dataclasses.replace(sc, delegates=place(sc.delegates))


def _place_spec(sc, spec: DelegateSpec, out: Path, allow_outside: bool) -> DelegateSpec:
    options = dict(spec.options)
    keys = [k for k in CACHE_DIR_OPTIONS if k in options and str(options[k])]
    if not keys:
        return spec
    for key in keys:
        folder = out / str(options[key])          # an absolute folder (allowed) replaces `out`
        if not allow_outside:
            _check_inside(sc, spec.kind, key, folder, out)
        options[key] = str(folder)
    return dataclasses.replace(spec, options=MappingProxyType(options))


def _check_inside(sc, kind: str, key: str, folder: Path, out: Path) -> None:
    """A folder that resolves outside `out` got there through a symlink (the scenario check refused the rest)."""
    real, root = folder.resolve(), out.resolve()
    if real != root and root not in real.parents:
        raise ScenarioError(f"{sc.source} ({sc.label}): delegates: {kind}.{key}: {folder} leads outside the output "
                            f"folder {out} (to {real}, through a symlink); remove the link, or run with "
                            f"{ALLOW_OUTSIDE_FLAG} if you trust this file")
