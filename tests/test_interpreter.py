"""The Interpreter speaks LiteRT's Python API: same details, same errors, same results."""

from __future__ import annotations

import numpy as np
import pytest

from runtime import zoo
from runtime.ir.graph import Signature
from runtime.interpreter.api import Interpreter
from runtime.model.tflite_write import dumps
from tests.conftest import FIXTURES
try:  # the oracle; the tests that need it skip without it
    from ai_edge_litert import interpreter as litert
except ImportError:
    litert = None


@pytest.fixture(scope="module")
def model() -> bytes:
    g = zoo.build("tiny_cnn")
    sig = Signature("serving_default", (("image", g.inputs[0]),), (("probs", g.outputs[0]),))
    g = type(g)(g.tensors, g.ops, g.inputs, g.outputs, g.name, (sig,))
    return dumps(g)


def both(model):
    ours = Interpreter(model_content=model)
    ref = litert.Interpreter(model_content=model) if litert else None
    for it in (ours, ref):
        if it is not None:
            it.allocate_tensors()
    return ours, ref


def _plain(d):
    return {k: (v.tolist() if isinstance(v, np.ndarray) else _plain(v) if isinstance(v, dict) else v)
            for k, v in d.items()}


@pytest.mark.skipif(litert is None, reason="LiteRT not installed")
def test_details_equal_litert(model):
    ours, ref = both(model)
    assert [_plain(d) for d in ours.get_input_details()] == [_plain(d) for d in ref.get_input_details()]
    assert [_plain(d) for d in ours.get_output_details()] == [_plain(d) for d in ref.get_output_details()]
    # The tensor list holds the kernels' temporaries too: those of the reference kernels, which are
    # the testbed's (LiteRT's default resolver hands nodes to XNNPACK, which adds none of them).
    ref = litert.Interpreter(model_content=model, experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    ref.allocate_tensors()
    assert [_plain(d) for d in ours.get_tensor_details()] == [_plain(d) for d in ref.get_tensor_details()]
    assert ours.get_signature_list() == ref.get_signature_list()


@pytest.mark.skipif(litert is None, reason="LiteRT not installed")
@pytest.mark.parametrize("value", [np.zeros((1, 32, 32, 3), np.float64), np.zeros((1, 32, 3), np.float32),
                                   np.zeros((1, 31, 32, 3), np.float32)])
def test_set_tensor_errors_match_litert(model, value):
    ours, ref = both(model)
    index = ours.get_input_details()[0]["index"]
    with pytest.raises(ValueError) as want:
        ref.set_tensor(index, value)
    with pytest.raises(ValueError) as got:
        ours.set_tensor(index, value)
    assert str(got.value) == str(want.value)


@pytest.mark.skipif(litert is None, reason="LiteRT not installed")
def test_set_tensor_before_allocate_is_litert_value_error(model):
    ours, ref = Interpreter(model_content=model), litert.Interpreter(model_content=model)
    index = ours.get_input_details()[0]["index"]
    value = np.zeros((1, 32, 32, 3), np.float32)
    with pytest.raises(ValueError) as want:
        ref.set_tensor(index, value)
    with pytest.raises(ValueError) as got:
        ours.set_tensor(index, value)
    assert str(got.value) == str(want.value)


@pytest.mark.skipif(litert is None, reason="LiteRT not installed")
def test_reading_tensors_before_allocate_or_after_a_resize_is_litert_value_error(model):
    ours, ref = Interpreter(model_content=model), litert.Interpreter(model_content=model)
    index = ours.get_input_details()[0]["index"]

    def message(it, read):
        with pytest.raises(ValueError) as err:
            read(it)
        return str(err.value)

    for read in (lambda it: it.get_tensor(index), lambda it: it.tensor(index)()):
        assert message(ours, read) == message(ref, read)
    for it in (ours, ref):
        it.allocate_tensors()
        it.resize_tensor_input(index, [2, 32, 32, 3])
    assert message(ours, lambda it: it.get_tensor(index)) == message(ref, lambda it: it.get_tensor(index))


DYNAMIC = sorted((FIXTURES / "quant").glob("*_dynamic.tflite"))


@pytest.mark.skipif(litert is None, reason="LiteRT not installed")
@pytest.mark.parametrize("path", DYNAMIC, ids=[p.stem for p in DYNAMIC])
def test_tensor_details_list_the_temporaries_the_reference_kernels_add(path):
    # The testbed's kernels are LiteRT's reference ones, so its tensor list is BUILTIN_REF's:
    # the model's tensors, and after allocation the temporaries kernels add in Init and Prepare
    # (hybrid input quantization buffers, scaling factors, row sums, reduction scratch, ...).
    ours = Interpreter(model_path=path)
    ref = litert.Interpreter(model_path=str(path), experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    assert [_plain(d) for d in ours.get_tensor_details()] == [_plain(d) for d in ref.get_tensor_details()]
    ours.allocate_tensors()
    ref.allocate_tensors()
    got, want = ours.get_tensor_details(), ref.get_tensor_details()
    assert len(got) == len(want) > len(ours.graph.tensors)
    assert [_plain(d) for d in got] == [_plain(d) for d in want]
    for d in ref.get_input_details():  # a kernel types some slots only when it first runs (MEAN)
        ours.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
        ref.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    ours.invoke()
    ref.invoke()
    assert [_plain(d) for d in ours.get_tensor_details()] == [_plain(d) for d in ref.get_tensor_details()]


def test_invoke_before_allocate_and_bad_index(model):
    it = Interpreter(model_content=model)
    with pytest.raises(RuntimeError, match="not ready"):
        it.invoke()
    with pytest.raises(ValueError, match="Invalid tensor index 999"):
        it.get_tensor(999)


@pytest.mark.parametrize("kwargs,message", [
    ({}, "must be specified"), ({"num_threads": 0}, "num_threads should >= 1"),
    ({"num_threads": 1.5}, "type of num_threads should be int"),
])
def test_constructor_errors(model, kwargs, message):
    if kwargs:
        kwargs["model_content"] = model
    with pytest.raises(ValueError, match=message):
        Interpreter(**kwargs)


def test_signature_runner_and_resize(model):
    it = Interpreter(model_content=model)
    run = it.get_signature_runner()
    x = np.random.default_rng(0).standard_normal((2, 32, 32, 3)).astype(np.float32)
    out = run(image=x)["probs"]
    assert out.shape == (2, 10)
    # Each batch row equals a batch-1 run of the same image.
    single = Interpreter(model_content=model)
    single.allocate_tensors()
    single.set_tensor(0, x[1:2])
    single.invoke()
    np.testing.assert_allclose(out[1:2], single.get_tensor(single.get_output_details()[0]["index"]), rtol=1e-5)
    with pytest.raises(ValueError, match="Invalid Input name"):
        run(picture=x)


@pytest.mark.skipif(litert is None, reason="LiteRT not installed")
def test_outputs_equal_litert_after_switching_import(model):
    ours, ref = both(model)
    x = np.random.default_rng(3).standard_normal((1, 32, 32, 3)).astype(np.float32)
    for it in (ours, ref):
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
    out = ours.get_output_details()[0]["index"]
    np.testing.assert_allclose(ours.get_tensor(out), ref.get_tensor(out), atol=1e-6)


@pytest.mark.skipif(litert is None, reason="LiteRT not installed")
@pytest.mark.parametrize("value", [np.empty((1, 32, 32, 3), object), "text", None, np.zeros((1, 32, 32, 3), "S4")])
def test_set_tensor_of_text_or_objects_names_litert_string_type(model, value):
    ours, ref = both(model)
    with pytest.raises(ValueError) as want:
        ref.set_tensor(0, value)
    with pytest.raises(ValueError) as got:
        ours.set_tensor(0, value)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("index", [0.5, "0", None, [0]])
def test_a_tensor_index_that_is_no_integer_is_a_type_error_naming_it(model, index):
    # LiteRT's binding refuses these too (a TypeError listing its signature); 0.5 and "0" were
    # taken as tensor 0 here.
    it = Interpreter(model_content=model)
    it.allocate_tensors()
    value = np.zeros((1, 32, 32, 3), np.float32)
    for call in (lambda: it.set_tensor(index, value), lambda: it.get_tensor(index), lambda: it.tensor(index),
                 lambda: it.resize_tensor_input(index, [1, 32, 32, 3])):
        with pytest.raises(TypeError, match=r"Interpreter: (tensor|input)_index must be an int, not "):
            call()
    assert it.get_tensor(np.int64(0)).shape == (1, 32, 32, 3)  # numpy integers are integers


@pytest.mark.skipif(litert is None, reason="LiteRT not installed")
@pytest.mark.parametrize("subgraph", [1, 5, -1])
def test_get_tensor_of_a_subgraph_out_of_range_is_litert_value_error(model, subgraph):
    ours, ref = both(model)
    with pytest.raises(ValueError) as want:
        ref.get_tensor(0, subgraph)
    with pytest.raises(ValueError) as got:  # was subgraph 0's tensor, silently
        ours.get_tensor(0, subgraph)
    assert str(got.value) == str(want.value)


@pytest.mark.skipif(litert is None, reason="LiteRT not installed")
@pytest.mark.parametrize("size", [5, [[1, 32], [32, 3]], np.zeros((2, 2), np.int32)])
def test_resize_to_a_shape_that_is_not_1d_is_litert_value_error(model, size):
    ours, ref = Interpreter(model_content=model), litert.Interpreter(model_content=model)
    with pytest.raises(ValueError) as want:
        ref.resize_tensor_input(0, size)
    with pytest.raises(ValueError) as got:  # a 2-D list was flattened into a shape
        ours.resize_tensor_input(0, size)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("size", [None, ["a", 32, 32, 3], [[1, 2], [3]], [float("nan"), 32, 32, 3],
                                  [float("inf"), 32, 32, 3]])
def test_resize_to_dimensions_that_are_no_integers_names_the_input(model, size):
    it = Interpreter(model_content=model)
    with pytest.raises(ValueError, match=r"Shape should be 1D|Cannot resize input 0 to .*every dimension must be"):
        it.resize_tensor_input(0, size)


@pytest.mark.parametrize("size", [[2, 32, 32, 3], [1, 32, 32], [1, 32, 32, 3, 1]])
def test_strict_resize_of_an_input_without_a_signature_changes_nothing(model, size):
    # LiteRT: every dimension of such an input is fixed (its RuntimeError); it was resized here.
    it = Interpreter(model_content=model)
    with pytest.raises(ValueError, match="ResizeInputTensorStrict"):
        it.resize_tensor_input(0, size, strict=True)
    it.resize_tensor_input(0, [1, 32, 32, 3], strict=True)
    it.allocate_tensors()


@pytest.mark.parametrize("resolver", [99, -1, "BUILTIN", True, None])
def test_an_unknown_op_resolver_type_is_litert_value_error(model, resolver):
    with pytest.raises(ValueError, match=f"^Unrecognized passed in op resolver type: {resolver}$"):
        Interpreter(model_content=model, experimental_op_resolver_type=resolver)


def test_every_op_resolver_type_is_taken_ours_or_litert(model):
    from runtime.interpreter.api import OpResolverType
    kinds = [OpResolverType.AUTO, OpResolverType.BUILTIN, OpResolverType.BUILTIN_REF,
             OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES]
    if litert is not None:
        kinds += list(litert.OpResolverType)
    for kind in kinds:
        Interpreter(model_content=model, experimental_op_resolver_type=kind)


@pytest.mark.parametrize("limit", [0.5, 1e-9])
def test_a_memory_limit_under_one_byte_is_refused_by_name(model, limit):
    # It truncated to 0 bytes, which the reader then reported as "truncated or malformed" model bytes.
    with pytest.raises(ValueError, match=r"^memory_limit must be a positive number of bytes, not "):
        Interpreter(model_content=model, memory_limit=limit)


def test_get_tensor_of_another_subgraph_is_refused_naming_it():
    # It returned subgraph 0's tensor of that index; an IF's branches keep no values between runs.
    from tests.test_control_flow import if_model

    it = Interpreter(model_content=dumps(if_model()))
    it.allocate_tensors()
    with pytest.raises(ValueError, match="reads the tensors of subgraph 0 only, not of subgraph 1 .*'then'"):
        it.get_tensor(0, 1)
    with pytest.raises(ValueError, match="^Invalid subgraph index 3 exceeds max subgraph index 3$"):
        it.get_tensor(0, 3)
