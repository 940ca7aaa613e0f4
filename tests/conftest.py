"""Shared fixtures and hypothesis profiles: 'ci' (bounded, default) and 'nightly' (long)."""

from __future__ import annotations

import os
import pathlib

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("nightly", max_examples=2000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def fixtures_dir() -> pathlib.Path:
    return FIXTURES


def pytest_sessionstart(session):
    # In CI the oracle must be there: a missing LiteRT would silently skip the parity tests.
    from tests.litert_oracle import available

    if os.environ.get("CI") and not available():
        pytest.exit("LiteRT (ai-edge-litert) is not installed; CI needs it as the test oracle", returncode=1)


@pytest.fixture(autouse=True)
def _no_progress_heartbeat(monkeypatch):
    """The progress bar's timer redraws it every REDRAW_S of host time; in tests a timer driven by host
    time would make what stderr shows depend on the machine's speed, so tests call beat() by hand."""
    from runtime.report import progress

    monkeypatch.setattr(progress, "REDRAW_S", 1e6)
