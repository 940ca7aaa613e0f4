"""The kinds of built-in delegate, defined once: scenario keys, CLI choices and --use_* flags come from here.

Kept free of imports so that naming a kind (a scenario check, a CLI parser) loads no delegate.
"""

from __future__ import annotations

import enum

__all__ = ["DelegateKind", "BUILTIN_KINDS", "EXTERNAL"]


class DelegateKind(enum.Enum):
    """A built-in delegate, by the name scenarios and command lines give it."""

    GPU = "gpu"
    NNAPI = "nnapi"
    HEXAGON = "hexagon"
    COREML = "coreml"
    QNN = "qnn"

    @property
    def flag(self) -> str:
        """TFLite's benchmark flag that turns it on: use_gpu, use_nnapi, ..."""
        return f"use_{self.value}"


# The names, in the order listings show them.
BUILTIN_KINDS: tuple[str, ...] = tuple(kind.value for kind in DelegateKind)

# A delegate that is not built in: loaded from "package.module:factory" or an installed plugin.
EXTERNAL = "external"
