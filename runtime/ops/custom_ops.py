"""Custom ops: the registry a user extends with register_custom_op, holding from the start the custom ops
published models carry (TFLite's SSD post-processing and MediaPipe's ops)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from runtime.ops import detection, mediapipe
from runtime.ops.custom_spec import MAX_OPTION_BYTES, CustomOp, ShapeRule, flex_options, params

__all__ = ["CustomOp", "CUSTOM_OPS", "register", "register_custom_op", "unregister_custom_op", "lookup", "params",
           "flex_options", "MAX_OPTION_BYTES"]

# Listed here, where the registry is made, rather than registered as a side effect of importing a package.
CUSTOM_OPS: dict[str, CustomOp] = {spec.name: spec for spec in (*detection.SPECS, *mediapipe.SPECS)}


def register_custom_op(name: str, kernel: Callable[..., Any], *, parse: Callable[[bytes], Any] | None = None,
                       shapes: ShapeRule | None = None, gpu: bool = False, replace: bool = False,
                       input_types: Sequence[Sequence[str]] | None = None,
                       output_types: Sequence[str] | None = None) -> CustomOp:
    """Make models whose ops carry custom code `name` runnable: `kernel(node, *inputs)` gets NumPy
    arrays (node.params holds what `parse` made of the op's bytes) and returns the output array or
    a tuple of them. `shapes(input_shapes, params)` checks the op before it runs and returns its
    output shapes; `input_types` / `output_types` name the NumPy dtypes each input may have and
    each output has, checked when the model is read. Registering a name twice is an error unless
    `replace`."""
    if not isinstance(name, str) or not name:
        raise ValueError("a custom op needs a non-empty name")
    if not callable(kernel):
        raise TypeError(f"custom op {name!r}: the kernel must be callable")
    ins = tuple(frozenset(t) for t in input_types) if input_types is not None else None
    outs = tuple(output_types) if output_types is not None else None
    return register(CustomOp(name, kernel, parse, shapes, gpu, ins, outs), replace)


def register(spec: CustomOp, replace: bool = False) -> CustomOp:
    """Add one custom op to the registry (register_custom_op builds the CustomOp for you)."""
    if spec.name in CUSTOM_OPS and not replace:
        raise ValueError(f"custom op {spec.name!r} is registered already (pass replace=True to change it)")
    CUSTOM_OPS[spec.name] = spec
    return spec


def unregister_custom_op(name: str) -> None:
    CUSTOM_OPS.pop(name, None)


def lookup(custom_code: str | None) -> CustomOp | None:
    return CUSTOM_OPS.get(custom_code) if custom_code is not None else None
