"""What a custom op is (its kernel, parameter parser, shape rule and types) and how its parameters are read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from runtime.ir.errors import ModelError

__all__ = ["CustomOp", "Shape", "ShapeRule", "params", "flex_options", "MAX_OPTION_BYTES"]

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
