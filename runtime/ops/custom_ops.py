"""Custom ops: the registry a user extends with register_custom_op, and how an op's parameters are read.

The custom ops published models carry are registered by runtime.ops, beside the builtin kernels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from runtime.ir.errors import ModelError

__all__ = ["CustomOp", "CUSTOM_OPS", "register", "register_custom_op", "unregister_custom_op", "lookup", "params",
           "flex_options", "MAX_OPTION_BYTES"]

Shape = tuple[int, ...]
# (input shapes, the op's parameters) -> output shapes; raise ValueError with the reason when the
# op cannot run on them. None: the shapes the model declares.
ShapeRule = Callable[[Sequence[Shape], Any], Sequence[Shape]]

# A custom op's parameters are a few dozen bytes in real models; a larger blob is damage (and a
# FlexBuffer parser walks every entry it claims).
MAX_OPTION_BYTES = 1 << 16


@dataclass(frozen=True)
class CustomOp:
    """One custom op: its kernel (`kernel(node, *inputs) -> output or tuple of outputs`, as the
    builtin kernels), how its parameters are decoded from the file's bytes, and its output shapes."""

    name: str
    kernel: Callable[..., Any]
    parse: Callable[[bytes], Any] | None = None   # the op's custom_options bytes -> its parameters
    shapes: ShapeRule | None = None
    gpu: bool = False                              # TFLite's GPU delegate has a kernel for it
    input_types: tuple[frozenset[str], ...] | None = None   # NumPy dtype names each input may have
    output_types: tuple[str, ...] | None = None             # the dtype of each output


CUSTOM_OPS: dict[str, CustomOp] = {}


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


def params(spec: CustomOp, blob: bytes | None, where: str) -> Any:
    """The op's parameters, decoded once per op; a blob the parser cannot read names the op."""
    if spec.parse is None:
        return blob
    if blob is not None and len(blob) > MAX_OPTION_BYTES:
        raise ModelError(f"{where}: custom options of {len(blob)} bytes, more than {MAX_OPTION_BYTES}")
    try:
        return spec.parse(blob or b"")
    except ModelError:
        raise
    except Exception as exc:  # a parser of damaged bytes may fail any way; the message says which op
        raise ModelError(f"{where}: custom options cannot be read: {type(exc).__name__}: {exc}") from None


def flex_options(blob: bytes) -> dict:
    """A FlexBuffer map (TFLite's convention for custom op parameters); empty bytes are an empty map."""
    if not blob:
        return {}
    from flatbuffers import flexbuffers

    value = flexbuffers.Loads(bytes(blob))
    if not isinstance(value, dict):
        raise ValueError(f"a FlexBuffer map expected, found {type(value).__name__}")
    return value
