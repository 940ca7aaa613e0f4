"""Graph validation names the op and tensor at fault; the dataclasses are frozen."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from runtime.ir.errors import ModelError
from runtime.ir.graph import DType, Graph, Op, OpType, Tensor
from runtime.ops.validate import validate_graph


def t(name, shape=(1, 4), data=None):
    return Tensor(name=name, shape=shape, dtype=DType.FLOAT32, data=data)


def graph(tensors, ops, inputs=(0,), outputs=(2,)):
    return Graph(tensors=tuple(tensors), ops=tuple(ops), inputs=inputs, outputs=outputs)


def test_sound_graph_validates():
    g = graph([t("a"), t("b"), t("c")], [Op(OpType.ADD, (0, 1), (2,))], inputs=(0, 1))
    assert validate_graph(g) is g


def test_dangling_tensor_is_named():
    g = graph([t("a"), t("b"), t("c")], [Op(OpType.ADD, (0, 7), (2,))])
    with pytest.raises(ModelError, match=r"op #0 ADD reads dangling tensor #7"):
        validate_graph(g)


def test_use_before_definition_names_op_and_tensor():
    ops = [Op(OpType.RELU, (1,), (2,)), Op(OpType.RELU, (0,), (1,))]
    g = graph([t("a"), t("mid"), t("c")], ops)
    with pytest.raises(ModelError, match=r"op #0 RELU uses tensor #1 'mid' before it is defined \(written later\)"):
        validate_graph(g)


def test_broadcast_shape_mismatch_is_named():
    g = graph([t("a", (1, 4)), t("b", (1, 3)), t("c")], [Op(OpType.ADD, (0, 1), (2,))], inputs=(0, 1))
    with pytest.raises(ModelError, match=r"op #0 ADD: shapes \[1, 4\] of tensor #0 'a' and \[1, 3\]"):
        validate_graph(g)


def test_conv_channel_mismatch_is_named():
    tensors = [t("x", (1, 4, 4, 3)), t("w", (8, 3, 3, 5), np.zeros((8, 3, 3, 5), np.float32)),
               t("y", (1, 4, 4, 8))]
    g = graph(tensors, [Op(OpType.CONV_2D, (0, 1), (2,))])
    with pytest.raises(ModelError, match=r"op #0 CONV_2D: input tensor #0 'x' has 3 channels"):
        validate_graph(g)


def test_double_write_and_constant_size():
    g = graph([t("a"), t("b"), t("c")], [Op(OpType.RELU, (0,), (1,)), Op(OpType.RELU, (0,), (1,))],
              outputs=(1,))
    with pytest.raises(ModelError, match="already written by op #0"):
        validate_graph(g)
    g = graph([t("a"), t("w", (2, 2), np.zeros(3, np.float32)), t("c")], [Op(OpType.ADD, (0, 1), (2,))])
    with pytest.raises(ModelError, match="constant data has 3 elements but shape"):
        validate_graph(g)


def test_unproduced_output():
    g = graph([t("a"), t("b"), t("c")], [Op(OpType.RELU, (0,), (1,))], outputs=(2,))
    with pytest.raises(ModelError, match="graph output tensor #2 'c' is never produced"):
        validate_graph(g)


def test_frozen_and_readonly():
    x = t("w", (2,), np.ones(2, np.float32))
    with pytest.raises(dataclasses.FrozenInstanceError):
        x.name = "other"
    with pytest.raises(ValueError):
        x.data[0] = 5


def test_dtype_round_trip():
    for d in (DType.FLOAT32, DType.INT8, DType.UINT8, DType.INT32, DType.FLOAT16, DType.BOOL):
        assert DType.from_code(d.code) is d
        assert DType.from_numpy(d.np) is d


# -- options: the common classes at import, the others on first use --------------------------------------


def test_the_lazy_options_lists_name_exactly_what_options_extra_holds():
    from runtime.ir import options, options_extra

    assert options.EXTRA_OPS == set(options_extra.FOR_OP) and options.EXTRA_TABLES == set(options_extra.TABLES)
    assert not options.EXTRA_OPS & set(options._FOR_OP) and not options.EXTRA_TABLES & set(options._TABLES)
    for name, cls in options.TABLES.items():
        assert getattr(options, name) is cls and name == cls.__name__
    for op, cls in options.FOR_OP.items():
        assert options.FOR_OP[op] is cls and op in options.FOR_OP
    assert len(options.FOR_OP) == len(list(options.FOR_OP)) and "RELU" not in options.FOR_OP


def test_the_uncommon_options_are_made_only_when_asked_for():
    import os
    import subprocess
    import sys
    from pathlib import Path

    probe = ("import sys\nimport runtime.ir.options as o\n"
             "before = 'runtime.ir.options_extra' in sys.modules\n"
             "misses = (o.FOR_OP.get('RELU'), o.TABLES.get('NoSuchOptions'), 'RELU' in o.FOR_OP)\n"
             "common = o.FOR_OP['CONV_2D'](), o.TABLES['ReshapeOptions']()\n"
             "after_common = 'runtime.ir.options_extra' in sys.modules\n"
             "tile = o.FOR_OP['TILE']\n"
             "print(before, misses == (None, None, False), after_common, 'runtime.ir.options_extra' in sys.modules, "
             "tile is o.TileOptions)\n")
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", probe], cwd=root, env=dict(os.environ, PYTHONPATH=str(root)),
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True", "False", "True", "True"]
