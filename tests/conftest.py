"""pytest configuration shared by the suite and the leak gates (Makefile leak-*)."""

import os

import pytest

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
        "noleakcheck: run once, unmeasured, by the refcount gate (make leak-refs); "
        "Hypothesis tests get it automatically")
    config.addinivalue_line("markers", "slow: a slow test")
    config.addinivalue_line("markers", "cuda: needs a CUDA device (skipped without one)")


def pytest_collection_modifyitems(config, items):
    # Refcount gate policy (pytest-leaks, `pytest -R stab:run` on debug CPython):
    # each test is repeated and must leave sys.gettotalrefcount() and
    # sys.getallocatedblocks() flat.  A Hypothesis test draws different
    # examples on each repetition and fills Hypothesis' own caches, so its
    # deltas are noise; it runs once instead (its examples still exercise the
    # debug interpreter's refcount assertions).  ASan and valgrind check them
    # like any other test.  Mark other unrepeatable tests @pytest.mark.noleakcheck.
    if not config.getoption("leaks", None):
        return
    for item in items:
        fn = getattr(item, "obj", None)
        if item.get_closest_marker("noleakcheck") or getattr(fn, "is_hypothesis_test", False):
            item.add_marker(pytest.mark.no_leak_check)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    # pytest-leaks reports leaks ("LEAKED" tests) but exits 0: make them fail.
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None and tr.stats.get("leaked") and session.exitstatus == 0:
        session.exitstatus = 1
