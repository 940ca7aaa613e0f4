"""Upper bounds on the counts a user controls, checked before anything runs, so no request loops for hours.

Each simulated inference keeps its trace (an interval per op and copy) until the run is measured,
so run counts bound memory as well as time: 10,000 runs of MobileNet v1 hold about 100 MB.
"""

from __future__ import annotations

__all__ = ["MAX_RUNS", "MAX_WARMUP", "MAX_STREAMS", "MAX_THREADS", "MAX_CELLS", "MAX_INFERENCES",
           "MAX_EXPANSION", "MAX_SEED", "MAX_QUEUE", "MAX_TRACE_FRAMES", "MAX_MONITOR_TICKS",
           "MAX_CONFORMANCE_EXAMPLES", "MAX_WORKERS"]

MAX_RUNS = 10_000            # runs.count, dtb benchmark --num_runs (benchmark_model's default is 50)
MAX_WARMUP = 1_000           # runs.warmup, --warmup_runs
MAX_STREAMS = 16             # streams sharing one simulated phone
MAX_THREADS = 64             # cpu.threads (the interpreter's -1 means 64 on the simulated phone)
# A hard cap for memory: every cell is a checked Scenario held until the run ends, about 2 KB each
# (`dtb run --check` on 100,032 cells: 28-55 s, 330-370 MB at its peak, on 2 shared cores; so 500,000
# cells take about 1.2 GB). Over 100,000 cells, or an estimated hour of host time, `dtb run` asks for
# --yes first, before the matrix is expanded (runtime/sweep/guard.py).
MAX_CELLS = 500_000          # matrix cells of one scenario file
MAX_INFERENCES = 1_000_000   # cells x streams x (warmup + count) over one scenario file (bounds trace.json)
MAX_EXPANSION = 10_000_000   # matrix cells x values in the document: what expanding the matrix copies
MAX_SEED = 2**63 - 1         # inputs.seed
# A sustained (apps:) run: its frames are bounded by MAX_INFERENCES; these bound what else it holds or steps.
MAX_QUEUE = 1_000            # apps[].queue_size: frames waiting behind the running one (the rest are dropped)
MAX_TRACE_FRAMES = MAX_RUNS  # frames arriving within trace_s, whose op-level intervals are kept for trace.json
MAX_MONITOR_TICKS = 100_000  # duration_s / the monitor's tick (an hour at the profiles' 100 ms is 36,000)
# dtb conformance --examples: every instance of every op/dtype pair is generated before the first runs
# and kept (about 6 KB each, over 119 pairs: 1,000 examples hold about 700 MB), so a typo's extra zeros
# would fill the memory instead of running.
MAX_CONFORMANCE_EXAMPLES = 1_000
# dtb run --workers: worker processes of the LocalCluster `--executor dask` starts on this machine, each a
# Python process of its own (about 150 MB once the simulator is imported), so a typo's extra zeros would
# spawn processes until the machine gives out instead of running.
MAX_WORKERS = 256
