"""Every capture test starts with capture reset and switched on by nothing but its own calls."""

import pytest

from cas.evals.capture import pipeline as capture


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.delenv("CAS_CAPTURE", raising=False)
    monkeypatch.delenv("CAS_CAPTURE_SAMPLE_RATE", raising=False)
    capture.reset()
    yield
    capture.reset()
