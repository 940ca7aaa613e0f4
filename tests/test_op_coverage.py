"""Every builtin op of the schema is either run by a kernel here or listed as unsupported with its reason."""

from __future__ import annotations

from runtime.ops.op_coverage import REFERENCE_OPS, UNSUPPORTED, coverage, implemented
from runtime.ir.optypes import OpType

# The share of LiteRT's reference-resolver ops with a kernel here may only grow.
COVERAGE_FLOOR = 0.95


def test_every_builtin_op_has_a_kernel_or_a_reason():
    have = implemented()
    unexplained = sorted(op.name for op in OpType if op not in have and op not in UNSUPPORTED)
    assert not unexplained, f"no kernel and no reason: {unexplained}"


def test_no_op_is_both_implemented_and_listed_unsupported():
    both = sorted(op.name for op in implemented() & set(UNSUPPORTED))
    assert not both, f"listed as unsupported but implemented: {both}"


def test_every_reason_is_a_sentence_a_user_can_read():
    assert all(isinstance(r, str) and len(r) > 20 for r in UNSUPPORTED.values())


def test_reference_resolver_coverage():
    done, total = coverage()
    missing = sorted(op.name for op in REFERENCE_OPS - implemented())
    assert done / total >= COVERAGE_FLOOR, f"{done} of {total} reference ops implemented; missing {missing}"
