"""An Interpreter's simulated phone: its delegates applied, the SoC, the executor over them, invoke and the CPU fallback."""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Generator, Sequence

from runtime.interpreter.delegation import Plan
from runtime.interpreter.executor import Executor
from runtime.ir.errors import DelegateError
from runtime.ir.graph import Graph
from sim.soc import SoC
from sim.unit import Tag

__all__ = ["AllocatedTensors", "Simulation", "make_simulation"]

_LOG = logging.getLogger("delegate_testbed")


@dataclass(frozen=True)
class AllocatedTensors:
    """What the Interpreter's allocate_tensors hands its simulation: the tensor shapes, the ops
    folded into constants, how to run one CPU op's math, and the tensor values the steps share."""

    shapes: Sequence[tuple[int, ...]]
    folded: frozenset[int]
    run_cpu: Callable[[int], object]
    values: list


class Simulation:
    """An Interpreter's simulated phone: the delegation, the SoC and the executor over them.

    Streams: several Simulations may share one SoC (`soc=`); each runs its own inferences as a
    SimPy process, contending for the same units and DRAM."""

    def __init__(self, graph: Graph, delegation, soc: SoC, threads: int, timing_only: bool, stream: int = 0):
        self.graph, self.delegation, self.soc = graph, delegation, soc
        self.threads, self.timing_only, self.stream = threads, timing_only, stream
        self.executor: Executor | None = None
        self.nonfinite: Counter = Counter()   # kept across re-allocations and the CPU fallback
        self.initialized = False
        self.count = 0
        self.latencies: list[float] = []

    def allocate(self, shapes, folded: frozenset[int], run_cpu, values) -> None:
        """(Re)build the jobs for the current shapes; pay delegate init once, at the first allocation."""
        self._allocation = AllocatedTensors(shapes, folded, run_cpu, values)
        self.executor = self._executor(self.delegation.plan)
        self.executor.nonfinite = self.nonfinite
        if not self.initialized:
            self.initialized = True
            self.soc.env.process(self.executor.initialize(Tag(self.stream, -1)))
            self.soc.env.run()

    def _executor(self, plan: Plan) -> "Executor":
        a = self._allocation
        return Executor(self.graph, plan, self.soc, a.shapes, self.threads, a.folded, a.run_cpu, a.values)

    def inference_process(self) -> Generator:
        """One inference as a SimPy process body; records its span in the trace."""
        env, k = self.soc.env, self.count
        self.count += 1
        start = env.now
        yield from self.executor.inference(Tag(self.stream, k), math=not self.timing_only)
        self.soc.trace.mark(self.stream, k, start, env.now)
        self.latencies.append(env.now - start)

    def invoke(self) -> float:
        """Run one inference alone on the phone; returns its simulated latency in seconds."""
        self.soc.env.process(self.inference_process())
        self.soc.env.run()
        return self.latencies[-1]

    def invoke_with_cpu_fallback(self) -> float:
        """TFLite's InvokeWithCPUFallback: when a delegate fails during invoke (an exception, a call
        past the time budget, a malformed output: all DelegateErrors here), remove every delegate,
        go back to the CPU plan, and run the inference again there on the inputs as they were set."""
        from runtime.interpreter.delegation import apply_delegates

        values = self._allocation.values
        saved = {t: None if values[t] is None else values[t].copy()  # a failing delegate may write over them
                 for t in self.graph.inputs}
        try:
            return self.invoke()
        except DelegateError as exc:
            for t, value in saved.items():
                values[t] = value
            self.count -= 1
            cpu = apply_delegates(self.graph, [])
            log = (*self.delegation.log, f"Invoke failed with a delegate error ({exc}); all delegates "
                   f"removed, running on the CPU.")
            # every delegate is gone, so each report says so: a record must not show them as running
            failed = tuple(dataclasses.replace(r, error=r.error or f"removed after an invoke failed: {exc}")
                           for r in self.delegation.per_delegate)
            self.delegation = type(cpu)(cpu.plan, log, failed, restored=True)
            _LOG.warning(log[-1])
            self.executor = self._executor(cpu.plan)
            self.executor.nonfinite = self.nonfinite
            return self.invoke()


def make_simulation(graph: Graph, delegates: list, device, soc: SoC | None, threads: int, timing_only: bool,
                    stream: int = 0) -> Simulation:
    """Apply the delegates as TFLite does and put the result on a phone (a profile name or path,
    a Profile, or an existing SoC shared with other streams; "generic" when none is named)."""
    from delegates.api import Delegate
    from runtime.interpreter.delegation import apply_delegates
    from runtime.ops.dynamic import dynamic_tensors
    from sim.profile import load_profile
    from sim.spec import Profile

    for d in delegates:
        if not isinstance(d, Delegate):
            raise ValueError(f"experimental_delegates takes testbed delegates (delegates.api.Delegate), "
                             f"got {type(d).__name__}")
    if soc is None:
        profile = device if isinstance(device, Profile) else load_profile(device or "generic")
        soc = SoC(profile)
    delegation = apply_delegates(graph, delegates, dynamic_tensors(graph))
    for line in delegation.log:
        _LOG.info(line)
    return Simulation(graph, delegation, soc, threads, timing_only, stream)
