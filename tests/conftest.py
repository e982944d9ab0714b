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
    from hypothesis.database import DirectoryBasedExampleDatabase
except ImportError:  # hypothesis is a test extra; without it its tests fail to import
    settings = None

if settings is not None:
    # Note [Hypothesis profiles]: `make test` and CI must pass on every run of
    # a fresh clone, so the default profile is deterministic: derandomize
    # draws each test's examples from a seed fixed by the test's own code (the
    # same examples on every run of a commit), with no example database
    # (nothing carried over from an earlier run) and no deadline (2 loaded
    # cores make timings noise).  Exploring is `make fuzz`'s job: profile
    # "fuzz", random seeds (pytest --hypothesis-seed=$EMBER_FUZZ_SEED, printed
    # so a failure can be replayed), more examples, and a saved database that
    # replays earlier failures first.
    settings.register_profile(
        "deterministic", deadline=None, derandomize=True, database=None,
        print_blob=True)
    # CI is the deterministic profile under the name .ci/run has always used.
    settings.register_profile("ci", settings.get_profile("deterministic"))
    # The leak gates run 5-50x slower (ASan with the slow unwinder, the debug
    # interpreter, valgrind): fewer examples, as reproducible.
    settings.register_profile(
        "leakgate", settings.get_profile("deterministic"), max_examples=25,
        suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile(
        "fuzz", deadline=None, derandomize=False, max_examples=1000, print_blob=True,
        database=DirectoryBasedExampleDatabase(
            os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         ".hypothesis", "fuzz-examples")),
        suppress_health_check=[HealthCheck.too_slow])
    profile = os.environ.get("EMBER_HYPOTHESIS_PROFILE") or (
        "ci" if os.environ.get("CI") else "deterministic")
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


@pytest.fixture
def default_allocator_restored():
    """Every test that uses it starts and ends with the built-in allocator
    installed; one that leaves another installed fails (and is undone)."""
    from ember import memory
    start = memory.get_allocator()
    assert isinstance(start, memory.CAllocator) and start.name == "cpu"
    yield
    current = memory.get_allocator()
    if not (isinstance(current, memory.CAllocator) and current.name == "cpu"):
        memory.set_allocator(start)
        pytest.fail(f"test left {current!r} installed")


# `make gpu-check` on a machine with a GPU sets EMBER_REQUIRE_GPU=1: there a
# test skipped for want of a GPU means the GPU path is broken (CuPy cannot
# see the device), so the skip is reported as a failure.
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("EMBER_REQUIRE_GPU") == "1" and report.skipped \
            and "GPU" in str(report.longrepr):
        report.outcome = "failed"
        report.longrepr = f"skipped on a machine with a GPU: {report.longrepr}"
