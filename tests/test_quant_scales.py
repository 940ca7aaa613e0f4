"""Extreme but valid quantization scales, LiteRT the judge: we load exactly the models it loads and answer as it does."""

from __future__ import annotations

import numpy as np
import pytest

from runtime.interpreter.api import Interpreter
from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, QuantParams, Tensor
from runtime.ir.optypes import OpType
from runtime.ir.options import AddOptions, MulOptions
from runtime.model.tflite_write import save
from tests.delegate_kit import single_op
from tests.litert_oracle import available, run_litert

pytestmark = pytest.mark.skipif(not available(), reason="LiteRT (ai-edge-litert) is not installed")

I8 = DType.INT8
# float32's least denormal, a denormal, automl_video_traffic's MUL output scale, an ordinary one, 2**100
# (the old bound), and two past it up to float32's greatest.
SCALES = [1e-45, 1e-40, 2.97e-35, 0.05, 2.0**100, 1e35, 3e38]
OPTIONS = {OpType.MUL: MulOptions(), OpType.ADD: AddOptions()}


def _q(scale: float) -> QuantParams:
    return QuantParams((float(scale),), (0,))


def _model(op: OpType, where: str, scale: float):
    """An int8 op of two [16] inputs; `where` the extreme scale sits: "out" or the first input."""
    first, out = (0.05, scale) if where == "out" else (scale, 0.05)
    tensors = [Tensor("a", (16,), I8, quant=_q(first)), Tensor("b", (16,), I8, quant=_q(0.05))]
    return single_op(op, tensors, Tensor("y", (16,), I8, quant=_q(out)), OPTIONS[op])[0]


def _litert(path, feeds) -> np.ndarray | None:
    """LiteRT's output, or None when it refuses the model (an error, or its process aborting in Prepare)."""
    try:
        result = run_litert([(str(path), feeds)])[0]
    except RuntimeError:   # a TFLITE_CHECK failing aborts the process
        return None
    return None if isinstance(result, str) else next(v for k, v in result.items() if k.startswith("0:"))


def _ours(path, graph, feeds) -> np.ndarray | None:
    try:
        it = Interpreter(model_path=str(path))
        it.allocate_tensors()
    except ModelError:
        return None
    for t, v in feeds.items():
        it.set_tensor(t, v)
    it.invoke()
    return it.get_tensor(graph.outputs[0])


@pytest.mark.parametrize("op", [OpType.MUL, OpType.ADD])
@pytest.mark.parametrize("where", ["out", "in"])
def test_we_load_what_litert_loads_and_match_its_outputs(tmp_path, op, where):
    rng = np.random.default_rng(7)
    seen = []
    for k, scale in enumerate(SCALES):
        graph = _model(op, where, scale)
        path = tmp_path / f"m{k}.tflite"
        save(graph, path)
        feeds = {t: rng.integers(-128, 128, 16).astype(np.int8) for t in graph.inputs}
        theirs, ours = _litert(path, feeds), _ours(path, graph, feeds)
        assert (ours is None) == (theirs is None), (op.name, where, scale, "LiteRT loads" if theirs is not None
                                                    else "LiteRT refuses")
        if theirs is not None:
            np.testing.assert_array_equal(ours, theirs, err_msg=f"{op.name} {where} scale {scale}")
        seen.append(theirs is not None)
    assert any(seen[:3]) or op is not OpType.MUL   # MUL: LiteRT takes the tiny scales, automl's among them


def test_automl_video_traffic_mul_output_scale_loads():
    graph = _model(OpType.MUL, "out", 2.97e-35)
    it = Interpreter(graph=graph)
    it.allocate_tensors()


def test_an_add_litert_refuses_is_one_clear_error(tmp_path):
    graph = _model(OpType.ADD, "out", 2.97e-35)
    with pytest.raises(ModelError, match=r"ADD.*rescaling multiplier.*LiteRT's ADD needs each in \(0, 1\)"):
        Interpreter(graph=graph).allocate_tensors()


def test_a_fused_activation_keeps_the_bound_on_extreme_scales():
    """RELU6's bound 6 / scale is infinite for a denormal scale; LiteRT's answer then depends on the CPU."""
    from dataclasses import replace

    from runtime.ir.options import Activation

    graph = _model(OpType.MUL, "out", 1e-40)
    op = replace(graph.ops[0], options=MulOptions(Activation.RELU6))
    with pytest.raises(ModelError, match=r"needs a positive scale in \[2\*\*-100, 2\*\*100\]"):
        Interpreter(graph=replace(graph, ops=(op,))).allocate_tensors()
