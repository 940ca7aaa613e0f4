"""A command imports what it needs: `dtb --help` and `dtb list devices` load no kernel, model or simulator
code, and a timing-only benchmark of a small model loads no numba, numba kernel or scipy.

Each case runs in a fresh interpreter and reads sys.modules afterwards: it counts imports, never time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_PROBE = """
import json, sys
from runtime.cli.main import main
try:
    code = main({argv!r})
except SystemExit as exc:
    code = exc.code
print(json.dumps({{"code": code, "modules": sorted(sys.modules)}}))
"""

# What the lightest commands must not load: numerics, kernels, model files, the simulator, sweeps, plots.
HEAVY = ("numpy", "numba", "scipy", "simpy", "matplotlib", "dask", "tflite", "flatbuffers", "runtime.ops",
         "runtime.interpreter", "runtime.model", "runtime.zoo", "runtime.sweep", "delegates.registry")
# What no timing-only run of a small model needs: numba and its kernels, scipy, plots, Dask.
NEVER_TIMING = ("numba", "llvmlite", "runtime.ops.fast_jit", "runtime.ops.fast_conv", "runtime.ops.fast_gemm",
                "runtime.ops.fast_qconv", "runtime.ops.fast_pool", "scipy", "matplotlib", "dask")


def loaded(argv: list[str]) -> set[str]:
    """The modules a fresh interpreter holds after `dtb argv` (which must exit 0)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("DTB_KERNELS", None)   # the default choice, the fast kernels
    out = subprocess.run([sys.executable, "-c", _PROBE.format(argv=argv)], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert result["code"] in (0, None), f"dtb {' '.join(argv)} exited {result['code']}"
    return set(result["modules"])


def under(modules: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == r or m.startswith(r + ".") for r in roots))


@pytest.mark.parametrize("argv", [["--help"], ["list", "devices"], ["list", "--help"]],
                         ids=" ".join)
def test_light_commands_load_no_heavy_module(argv):
    assert under(loaded(argv), HEAVY) == []


def test_help_loads_no_command_module():
    modules = loaded(["--help"])
    assert under(modules, ("runtime.cli",)) == ["runtime.cli", "runtime.cli.main"]
    assert under(modules, ("yaml", "sim", "delegates")) == []


def test_a_timing_only_benchmark_loads_no_numba_or_scipy():
    modules = loaded(["benchmark", "--zoo", "tiny_cnn", "--timing_only", "--num_runs", "2"])
    assert "runtime.cli.benchmark" in modules and "simpy" in modules   # it did run
    assert under(modules, NEVER_TIMING) == []
    assert under(modules, ("runtime.cli.eval", "runtime.cli.calibrate", "runtime.cli.tools")) == []


def test_a_sizeable_convolution_does_load_the_fast_kernels():
    # The other side of the previous test: numba stays lazy, not gone.
    modules = loaded(["infer", "--zoo", "mobilenet_v1", "--zoo_args", "alpha=0.25,resolution=64"])
    assert {"numba", "runtime.ops.fast_conv"} <= modules


def test_a_timing_only_benchmark_of_a_file_loads_no_numba_or_scipy(tmp_path):
    path = tmp_path / "mobilenet.tflite"
    assert "runtime.cli.infer" in loaded(["export", "--zoo", "mobilenet_v1", "--zoo_args", "alpha=0.25,resolution=64",
                                          "-o", str(path)])
    modules = loaded(["benchmark", "--graph", str(path), "--timing_only", "--num_runs", "2"])
    assert "runtime.cli.benchmark" in modules and under(modules, NEVER_TIMING) == []
