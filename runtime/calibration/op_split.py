"""The op split per unit (NPU / GPU / CPU) the simulated delegates give a measured model, beside the measurement's own.

Qualcomm AI Hub's TFLite profiles run the QNN delegate first, then the GPU delegate, then the CPU
(its default compute units), and publish how many of the .tflite's ops ran on each. Partitioning the
same file with `--use_qnn=true --use_gpu=true` on the simulated phone must give the same counts when
the support rules are right; a row whose op total differs (the rebuilt file lowers differently) says
nothing about the rules and is counted apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from delegates.kinds import DelegateKind
from runtime.calibration.rows import OpSplit, Row, model_key

__all__ = ["SplitCheck", "SplitSummary", "AIHUB_FLAGS", "simulated_split", "check_splits", "summarize"]

# AI Hub's TFLite runtime: the QNN delegate first, then the GPU delegate, then XNNPACK on the CPU.
AIHUB_FLAGS = (f"--{DelegateKind.QNN.flag}=true", f"--{DelegateKind.GPU.flag}=true")
# Unit kinds a delegate's partitions run on, as AI Hub names the compute units.
_NPU_UNITS = ("dsp", "npu", "ane")
_GPU_UNITS = ("gpu",)


@dataclass(frozen=True)
class SplitCheck:
    """One measured row's op split and the simulated one."""

    row: Row
    simulated: OpSplit

    @property
    def measured(self) -> OpSplit:
        assert self.row.split is not None
        return self.row.split

    @property
    def total_matches(self) -> bool:
        """Whether the rebuilt file has as many ops as the measured one (else the split says nothing)."""
        return self.simulated.total == self.measured.total

    @property
    def agrees(self) -> bool:
        return self.simulated == self.measured


@dataclass(frozen=True)
class SplitSummary:
    """How many rows had a split, how many of them a file of the same op count, and how many of those agree."""

    rows: int
    same_total: int
    agree: int


def simulated_split(graph, profile, flags: Sequence[str] = AIHUB_FLAGS) -> OpSplit:
    """Ops per unit after applying the delegates `flags` turn on, in their order, to `graph`."""
    from delegates.registry import parse_flags
    from runtime.interpreter.delegation import DelegateStep, apply_delegates

    delegates, _ = parse_flags(list(flags), profile)
    plan = apply_delegates(graph, delegates).plan
    npu = gpu = 0
    for step in plan:
        if isinstance(step, DelegateStep):
            unit = _unit_kind(step.delegate.unit, profile)
            npu += len(step.partition.nodes) if unit in _NPU_UNITS else 0
            gpu += len(step.partition.nodes) if unit in _GPU_UNITS else 0
    return OpSplit(npu, gpu, len(graph.ops) - npu - gpu)


def _unit_kind(unit: str, profile) -> str:
    """A delegate names its unit by kind or by the profile's unit name; this is the kind."""
    for spec in profile.units:
        if spec.name == unit:
            return spec.kind.value
    return unit


def check_splits(rows: Iterable[Row], graph_of: Callable[[Row], object], profile,
                 on_row: Callable[[int, int, str], None] | None = None) -> list[SplitCheck]:
    """A SplitCheck for every row that reports a split (one partitioning per distinct model)."""
    wanted = [r for r in rows if r.split is not None]
    splits: dict[tuple, OpSplit] = {}
    out = []
    for n, row in enumerate(wanted):
        if on_row:
            on_row(n, len(wanted), row.label)
        key = model_key(row)   # a zoo model's arguments and quantization make another graph
        if key not in splits:
            splits[key] = simulated_split(graph_of(row), profile)
        out.append(SplitCheck(row, splits[key]))
    return out


def summarize(checks: Sequence[SplitCheck]) -> SplitSummary:
    same = [c for c in checks if c.total_matches]
    return SplitSummary(len(checks), len(same), sum(c.agrees for c in same))
