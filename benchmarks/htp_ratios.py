"""Model-to-model latency ratios on a Snapdragon prior (QNN on the HTP, then the GPU) against Qualcomm AI Hub's.

Usage: python benchmarks/htp_ratios.py [--device sim/profiles/priors/galaxy_s24.yaml]

A reality check of the HTP's mechanisms, not a fit: ResNet18 / 50 / 101 in torchvision's layout
(random weights, batch-norm folded) and the zoo's MobileNet v2, each float and int8 (calibrated on
two Gaussian samples), run timing-only with --use_qnn=true --use_gpu=true; the script prints each
simulated latency and the ratios between models next to the same ratios of AI Hub's published
TFLite rows for the Galaxy S24 (quic/ai-hub-models perf.yaml, v0.46.1: inference_time_milliseconds
of resnet18 / resnet50 / resnet101 / mobilenet_v2, float and w8a8). Ratios only: the priors' absolute
rates are first estimates until `dtb calibrate` fits them.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from delegates.registry import parse_flags  # noqa: E402
from runtime.interpreter.api import Interpreter  # noqa: E402
from runtime.ir.optypes import OpType  # noqa: E402
from runtime.ir.options import Activation  # noqa: E402
from runtime.zoo import build  # noqa: E402
from runtime.zoo import layers as L  # noqa: E402
from runtime.zoo.builder import GraphBuilder  # noqa: E402
from runtime.zoo.quantize import to_int8  # noqa: E402
from sim.profile import load_profile  # noqa: E402

# AI Hub's Galaxy S24 TFLite rows (ms), quic/ai-hub-models v0.46.1 perf.yaml (all layers on the NPU).
AIHUB_S24 = {("resnet18", "float"): 0.924, ("resnet18", "w8a8"): 0.293, ("resnet50", "float"): 1.6,
             ("resnet50", "w8a8"): 0.576, ("resnet101", "float"): 2.399, ("resnet101", "w8a8"): 0.867,
             ("mobilenet_v2", "float"): 0.593, ("mobilenet_v2", "w8a8"): 0.289}
RATIOS = ((("resnet101", "float"), ("resnet18", "float")), (("resnet101", "w8a8"), ("resnet18", "w8a8")),
          (("resnet50", "float"), ("resnet50", "w8a8")), (("resnet18", "float"), ("resnet18", "w8a8")),
          (("mobilenet_v2", "float"), ("mobilenet_v2", "w8a8")), (("resnet50", "w8a8"), ("mobilenet_v2", "w8a8")))


def _block(b: GraphBuilder, x: int, c: int, stride: int, name: str, bottleneck: bool) -> int:
    """torchvision's BasicBlock (two 3x3) or Bottleneck (1x1, 3x3, 1x1 x4), with a 1x1 projection."""
    if bottleneck:
        y = L.conv(b, x, c, 1, 1, act=Activation.RELU, name=name + "a")
        y = L.conv(b, y, c, 3, stride, act=Activation.RELU, name=name + "b")
        y, out = L.conv(b, y, 4 * c, 1, 1, act=Activation.NONE, name=name + "c"), 4 * c
    else:
        y = L.conv(b, x, c, 3, stride, act=Activation.RELU, name=name + "a")
        y, out = L.conv(b, y, c, 3, 1, act=Activation.NONE, name=name + "b"), c
    if stride != 1 or b.shape(x)[-1] != out:
        x = L.conv(b, x, out, 1, stride, act=Activation.NONE, name=name + "d")
    return b.op(OpType.RELU, [L.add(b, x, y, name + "add")], None, name + "relu")


def resnet(depth: int):
    stages = {18: (False, (2, 2, 2, 2)), 50: (True, (3, 4, 6, 3)), 101: (True, (3, 4, 23, 3))}[depth]
    b = GraphBuilder(f"resnet{depth}", 0)
    x = L.conv(b, b.input("input", (1, 224, 224, 3)), 64, 7, 2, act=Activation.RELU, name="stem")
    x = L.pool(b, x, 3, 2)
    for stage, blocks in enumerate(stages[1]):
        for i in range(blocks):
            x = _block(b, x, 64 << stage, 2 if i == 0 and stage else 1, f"s{stage}b{i}", stages[0])
    return b.build([L.conv_classifier(b, L.global_avg_pool(b, x), 1000)])


def latency_ms(graph, device: str) -> float:
    profile = load_profile(device)
    delegates, _ = parse_flags(["--use_qnn=true", "--use_gpu=true"], profile)
    it = Interpreter(graph=graph, device=profile, experimental_delegates=delegates, num_threads=4, timing_only=True)
    it.allocate_tensors()
    it.invoke()
    span = it.simulation.soc.trace.inferences[-1]
    return (span.end - span.start) * 1e3


def main() -> None:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="sim/profiles/priors/galaxy_s24.yaml")
    args = parser.parse_args()
    times = {}
    for name in ("resnet18", "resnet50", "resnet101", "mobilenet_v2"):
        graph = build("mobilenet_v2") if name == "mobilenet_v2" else resnet(int(name[6:]))
        rng = np.random.default_rng(1)
        samples = [rng.standard_normal((1, 224, 224, 3)).astype(np.float32) for _ in range(2)]
        times[(name, "float")] = latency_ms(graph, args.device)
        times[(name, "w8a8")] = latency_ms(to_int8(graph, samples), args.device)
        print(f"{name}: float {times[(name, 'float')]:.3f} ms, w8a8 {times[(name, 'w8a8')]:.3f} ms", flush=True)
    print("\n| ratio | AI Hub (Galaxy S24) | simulated |\n|---|---|---|")
    for a, b in RATIOS:
        label = f"{a[0]} {a[1]} / {b[0]} {b[1]}"
        print(f"| {label} | {AIHUB_S24[a] / AIHUB_S24[b]:.2f} | {times[a] / times[b]:.2f} |")


if __name__ == "__main__":
    main()
