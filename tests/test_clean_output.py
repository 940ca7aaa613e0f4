"""No Python or library warning reaches a user: the CLI's commands on small and published models, warnings as errors."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SELFIE = "tests/fixtures/published/selfie_segmentation.tflite"
DIGITS = "tests/fixtures/eval/digits"
SCENARIO = """\
device: pixel4
model: {zoo: tiny_cnn, args: {resolution: 16}}
runs: {warmup: 1, count: 2}
matrix:
  delegates: [[], [gpu]]
"""
# Each command runs in one process under `python -W error`: a warning raised anywhere becomes an
# exception, which either reaches stderr as a traceback or turns the command's exit code non-zero.
DRIVER = """
import json, sys
from runtime.cli.main import main
for argv in json.loads(sys.argv[1]):
    print("COMMAND", argv[0], main(argv), flush=True)
"""


def commands(tmp: Path) -> list[list[str]]:
    (tmp / "s.yaml").write_text(SCENARIO)
    return [
        ["inspect", "--graph", SELFIE],
        ["benchmark", "--graph", SELFIE, "--device", "pixel4", "--num_runs", "1", "--warmup_runs", "1"],
        ["partition", "--graph", SELFIE, "--device", "pixel4", "--use_gpu"],
        ["inference-diff", "--graph", SELFIE, "--device", "pixel4", "--delegate", "gpu", "--num_runs", "1"],
        ["inference-diff", "--graph", f"{DIGITS}/digits_int8.tflite", "--device", "pixel3", "--delegate", "hexagon",
         "--num_runs", "2"],
        ["run", str(tmp / "s.yaml"), "-o", str(tmp / "out")],
        ["eval", "classification", "--model_file", f"{DIGITS}/digits_int8.tflite", "--ground_truth_images_path",
         f"{DIGITS}/images", "--ground_truth_labels", f"{DIGITS}/ground_truth_labels.txt", "--model_output_labels",
         f"{DIGITS}/labels.txt", "--device", "pixel4", "--use_gpu", "--num_images", "4"],
    ]


def test_no_warning_text_reaches_stderr_from_the_cli(tmp_path):
    argvs = commands(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-W", "error", "-c", DRIVER, json.dumps(argvs)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    codes = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("COMMAND ")]
    assert done.returncode == 0 and codes == [[a[0], "0"] for a in argvs], done.stderr[-3000:]
    # the tool's own warnings ("dtb benchmark: warning: the model lies outside ...") are what it means to
    # say; anything else holding "warning" is Python's or a library's
    theirs = [line for line in done.stderr.splitlines() if not re.match(r"dtb [\w -]+: warning: ", line)]
    assert not any("warning" in line.lower() for line in theirs), done.stderr[-3000:]
