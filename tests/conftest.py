"""pytest configuration shared by the suite and the leak gates (Makefile leak-*)."""

import os
import pathlib
import sys
import tempfile

import pytest

# The ASan and valgrind gates run without the PyTorch oracle (EMBER_NO_TORCH=1):
# under them torch takes minutes to import and brings leak reports of its own
# that say nothing about ember.  A None entry in sys.modules makes `import
# torch` raise ImportError, so pytest.importorskip("torch") skips.
if os.environ.get("EMBER_NO_TORCH") == "1":
    sys.modules["torch"] = None

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # hypothesis is a test extra; without it its tests fail to import
    settings = None

if settings is not None:
    # The leak gates run 5-50x slower (ASan with the slow unwinder, the debug
    # interpreter, valgrind): no deadline, fewer and reproducible examples.
    settings.register_profile(
        "leakgate", deadline=None, max_examples=25, derandomize=True, database=None,
        suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("ci", deadline=None, print_blob=True)
    profile = os.environ.get("EMBER_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else None)
    if profile:
        settings.load_profile(profile)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "noleakcheck: the refcount gate (make leak-refs, tools/ember_refleaks.py) runs "
        "this test once, unmeasured, instead of repeating it; Hypothesis tests are "
        "treated so automatically (each repetition draws new examples and grows "
        "Hypothesis' caches, so their deltas are noise)")
    config.addinivalue_line("markers", "slow: a slow test")
    config.addinivalue_line("markers", "cuda: needs a CUDA device (skipped without one)")


@pytest.fixture
def tmp_dir():
    """A fresh directory (pytest's tmp_path keeps references that the
    refcount gate, tools/ember_refleaks.py, counts as leaks)."""
    with tempfile.TemporaryDirectory() as directory:
        yield pathlib.Path(directory)
