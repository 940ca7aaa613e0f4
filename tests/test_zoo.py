"""Zoo builders give valid graphs with healthy activations, and LiteRT agrees with their outputs."""

from __future__ import annotations

import numpy as np
import pytest

from runtime import zoo
from runtime.ir.errors import ModelError
from runtime.interpreter.api import Interpreter

SMALL = {
    "tiny_cnn": {},
    "mobilenet_v1": {"alpha": 0.25, "resolution": 96, "classes": 100},
    "mobilenet_v2": {"alpha": 0.35, "resolution": 96, "classes": 100},
    "squeezenet": {"resolution": 96, "classes": 100},
}


def run(graph, seed=1):
    it = Interpreter(graph=graph)
    it.allocate_tensors()
    d = it.get_input_details()[0]
    it.set_tensor(d["index"], np.random.default_rng(seed).standard_normal(d["shape"]).astype(np.float32))
    it.invoke()
    return it


@pytest.mark.parametrize("name", sorted(SMALL))
def test_outputs_are_probabilities_and_not_degenerate(name):
    it = run(zoo.build(name, **SMALL[name]))
    probs = it.get_tensor(it.get_output_details()[0]["index"])[0]
    assert np.isfinite(probs).all() and abs(probs.sum() - 1) < 1e-4
    entropy = -(probs * np.log(probs + 1e-12)).sum()
    # Neither one-hot nor uniform: the weights carry information.
    assert 0.1 < entropy < 0.98 * np.log(len(probs))


@pytest.mark.parametrize("name", ["mobilenet_v1", "mobilenet_v2"])
def test_activations_stay_normalised(name):
    graph = zoo.build(name, **SMALL[name])
    it = run(graph)
    for op in graph.ops:
        if op.type.name in ("CONV_2D", "DEPTHWISE_CONV_2D") and graph.tensors[op.outputs[0]].name != "logits":
            out = it.get_tensor(op.outputs[0])
            assert 0.05 < out.std() < 5, f"{graph.tensors[op.outputs[0]].name} std {out.std()}"


def test_same_seed_same_weights_and_different_seed_differs():
    a, b, c = (zoo.build("tiny_cnn", seed=s) for s in (0, 0, 1))
    wa, wb, wc = (g.tensors[g.ops[0].inputs[1]].data for g in (a, b, c))
    np.testing.assert_array_equal(wa, wb)
    assert not np.array_equal(wa, wc)


def test_mobilenet_v1_full_size_shape():
    g = zoo.build("mobilenet_v1")
    assert g.tensors[g.inputs[0]].shape == (1, 224, 224, 3)
    assert g.tensors[g.outputs[0]].shape == (1, 1001)
    assert sum(op.type.name == "DEPTHWISE_CONV_2D" for op in g.ops) == 13


def test_unknown_model_and_argument():
    with pytest.raises(ModelError, match="unknown zoo model 'vgg'"):
        zoo.build("vgg")
    with pytest.raises(ModelError, match="has no argument 'width'"):
        zoo.build("mobilenet_v1", width=2)
