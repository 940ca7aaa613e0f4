"""A delegated partition's invoke, checked (and, for an external delegate, watched): the kernel must hand back the partition's outputs
as the CPU holds them (a NumPy array of the tensor's type and shape each), or the invoke is a DelegateError
naming the delegate, the tensor, what was expected and what came back."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from delegates import guard
from delegates.registry import is_builtin
from runtime.ir.errors import DelegateError
from runtime.ir.graph import Graph

__all__ = ["invoke_partition"]


def invoke_partition(step, inputs: Mapping[int, np.ndarray], graph: Graph,
                     shapes: Sequence[tuple[int, ...]]) -> tuple[dict[int, np.ndarray], list[int]]:
    """Run step.kernel.invoke(inputs) and check its result: an external delegate's within the time
    budget (delegates.guard), a built-in one's unwatched (its cost is simulated time, never the host's). Returns the outputs by tensor index and the output tensors holding NaN or infinity
    (which are not an error: the caller flags them)."""
    name = step.delegate.name
    what = f"{name} invoke"
    try:
        outputs = (step.kernel.invoke(inputs) if is_builtin(step.delegate)
                   else guard.call(what, step.kernel.invoke, inputs))
    except DelegateError:
        raise
    except (Exception, SystemExit) as exc:  # the delegate's own bug (or sys.exit): InvokeWithCPUFallback
        raise DelegateError(f"{what} failed: {type(exc).__name__}: {exc}") from exc  # treats it as a delegate error
    if not isinstance(outputs, Mapping):
        raise DelegateError(f"{name} invoke returned {_got(outputs)}; expected a mapping of tensor index -> "
                            f"array for its outputs {', '.join(graph.describe_tensor(t) for t in step.partition.outputs)}")
    checked: dict[int, np.ndarray] = {}
    nonfinite: list[int] = []
    for t in step.partition.outputs:
        tensor = graph.tensors[t]
        dtype, shape = tensor.dtype.np, tuple(shapes[t])
        want = f"a {np.dtype(dtype).name} array of shape {list(shape)}"
        try:
            present = t in outputs
            value = outputs[t] if present else None
        except Exception as exc:
            raise DelegateError(f"{name} invoke returned a mapping that fails when read: "
                                f"{type(exc).__name__}: {exc}") from None
        if not present:
            raise DelegateError(f"{name} returned no value for {graph.describe_tensor(t)}; expected {want}")
        if isinstance(value, np.generic) and value.dtype == dtype and shape == ():
            value = np.asarray(value)
        bad = (not isinstance(value, np.ndarray) or value.dtype != dtype
               or (value.shape != shape and not tensor.is_dynamic))
        if bad:
            raise DelegateError(f"{name} returned {_got(value)} for {graph.describe_tensor(t)}; expected {want}")
        if value.dtype.kind in "fc" and not np.isfinite(value).all():
            nonfinite.append(t)
        checked[t] = value
    return checked, nonfinite


def _got(value: Any) -> str:
    """What a kernel returned, as the error shows it."""
    if value is None:
        return "None"
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {list(value.shape)}" if value.ndim else f"a 0-d {value.dtype} array"
    if isinstance(value, np.generic):
        return f"a {value.dtype} scalar"
    if isinstance(value, (str, bytes)):
        return f"a {type(value).__name__} {value[:40]!r}"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"a {type(value).__name__}"
