"""The HTML report in headless Chromium: its embedded plots render (skipped where no Chromium is installed)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from runtime.report.render import write_report
from runtime.sweep.runner import run_file

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


@pytest.mark.skipif(BROWSER is None, reason="no Chromium on this machine (apt-get install chromium)")
def test_the_html_report_renders_its_plots_in_headless_chromium(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("device: pixel4\nmodel: {zoo: tiny_cnn, args: {resolution: 16}}\nruns: {warmup: 1, count: 2}\n"
                        "matrix:\n  delegates: [[], [gpu: {}]]\n")
    run_file(scenario, tmp_path / "out")
    html = write_report(tmp_path / "out" / "results.json", "html")
    shot = tmp_path / "shot.png"
    subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1000,1600", html.as_uri()], capture_output=True, timeout=120, check=True)
    from matplotlib.image import imread

    pixels = (imread(shot)[..., :3] * 255).round().astype(int)
    # matplotlib's first colour (tab:blue, 31/119/180) appears only in the drawn bars and slices
    blue = np.all(np.abs(pixels - np.array([31, 119, 180])) <= 6, axis=-1)
    assert blue.sum() > 2000
