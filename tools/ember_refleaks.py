"""pytest plugin: CPython `regrtest -R`-style reference-leak hunting.

Used by `make leak-refs` on a debug interpreter (PYDBG, e.g. python3.11d):

    PYTHONPATH=tools python -m pytest -p ember_refleaks --refleaks 1:3 tests

Each test runs WARMUPS + RUNS times through pytest's own runtestprotocol
(fixtures set up and torn down every time).  After each repetition, caches
that fill up legitimately are cleared and cyclic garbage collected, then
sys.gettotalrefcount(), sys.getallocatedblocks() and the number of open file
descriptors are read.  Like regrtest, a test leaks when every measured
(post-warm-up) delta of references, or every one of memory blocks, is >= 1,
or when any fd delta is non-zero.  A leaking test is reported as FAILED with
its deltas, so the run exits non-zero.

References held on NumPy's builtin dtype singletons (float64, int64, ...)
are left out of the reference total: NumPy 2.x leaks one reference to the
default descriptor on every np.empty/np.zeros/np.ones call without a dtype
(PyArray_Empty_int and PyArray_Zeros_int INCREF the descriptor they inferred
once too often; NumPy 1.26 did not).  Those singletons are never freed, so
the leak costs nothing, but it would make every such test look leaky.  The
price: an extra reference that ember itself leaks on such a singleton goes
unseen here.

Note [Stopping at a clean measured run]: a measured run whose deltas are all
clean (references < 1, memory blocks < 1, no new file descriptor) settles the
verdict for references and blocks, since a leak needs every measured delta
>= 1; the remaining runs are skipped.  Most tests are clean at their first
measured run, so the gate runs them 4 times instead of 6 (at 3:3).  What it
gives up: a file descriptor leaked only in a later run of a test that was
clean in an earlier one.

Note [One warm-up]: warm-ups keep the one-time growth of a first run (lazy
imports, caches, interned names) out of the measured deltas.  With the stop
above, a cache still filling in the first measured run costs one more run,
not a report; a false report needs growth in every measured run, which is
what a leak looks like anyway.  So `make leak-refs` runs 1:3: a clean test
runs twice.  Measured: test_views, test_refcount, test_issue11_lifetimes,
test_jit_vm and test_autograd took 70.0 s of CPU at 3:3 and 46.0 s at 1:3,
with the same 287 passed.

Not measured, run once as usual: tests marked @pytest.mark.noleakcheck, and
Hypothesis tests (each repetition draws different examples and grows
Hypothesis' own caches, so their deltas are noise).  A test that fails or
skips is reported from its first repetition and not repeated.

(pytest-leaks does the same job but loses track of the setup state when a
test skips inside its body, breaking every later test in another module.)
"""

import collections.abc
import copyreg
import gc
import linecache
import os
import re
import sys
import warnings
from inspect import isabstract

import pytest
from _pytest.runner import runtestprotocol


def pytest_addoption(parser):
    parser.getgroup("ember").addoption(
        "--refleaks", metavar="WARMUPS:RUNS", default=None,
        help="repeat each test WARMUPS+RUNS times and fail it if it leaks "
             "references, memory blocks or file descriptors (debug CPython only)")


def pytest_configure(config):
    spec = config.getoption("refleaks")
    if not spec:
        return
    m = re.fullmatch(r"(\d+):(\d+)", spec)
    if not m or int(m.group(2)) < 1:
        raise pytest.UsageError(f"--refleaks {spec!r}: expected WARMUPS:RUNS, e.g. 3:3")
    if not hasattr(sys, "gettotalrefcount"):
        raise pytest.UsageError("--refleaks needs a debug build of CPython (Debian's python3.11d, or the one PYDBG names)")
    config.pluginmanager.register(RefLeakHunter(int(m.group(1)), int(m.group(2))),
                                  "ember_refleak_hunter")


_BUILTIN_TYPECODES = "?bBhHiIlLqQefdgFDGO"
_numpy_singletons = None


def _numpy_singleton_refs():
    """Sum of the reference counts of NumPy's builtin dtype singletons."""
    global _numpy_singletons
    np = sys.modules.get("numpy")
    if np is None:
        return 0
    if _numpy_singletons is None:
        _numpy_singletons = tuple(np.dtype(c) for c in _BUILTIN_TYPECODES)
    return sum(sys.getrefcount(d) for d in _numpy_singletons)


def _total_refs():
    singletons = _numpy_singleton_refs()
    return sys.gettotalrefcount() - singletons


def _fd_count():
    return len(os.listdir("/proc/self/fd"))


def _abc_snapshot():
    import _abc
    snap = {}
    for name in collections.abc.__all__:
        abc = getattr(collections.abc, name)
        if isabstract(abc):
            for cls in abc.__subclasses__() + [abc]:
                snap[cls] = _abc._get_dump(cls)[0]
    return snap


class _State:
    """What the cleanup between repetitions restores (regrtest's dash_R_cleanup)."""

    def __init__(self):
        self.filters = warnings.filters[:]
        self.dispatch = copyreg.dispatch_table.copy()
        self.importer_cache = sys.path_importer_cache.copy()
        self.abcs = _abc_snapshot()

    def cleanup(self):
        warnings.filters[:] = self.filters
        copyreg.dispatch_table.clear()
        copyreg.dispatch_table.update(self.dispatch)
        sys.path_importer_cache.clear()
        sys.path_importer_cache.update(self.importer_cache)
        sys._clear_type_cache()
        for name in collections.abc.__all__:
            abc = getattr(collections.abc, name)
            if isabstract(abc):
                for cls in abc.__subclasses__() + [abc]:
                    for ref in self.abcs.get(cls, ()):
                        if ref() is not None:
                            cls.register(ref())
                    cls._abc_caches_clear()
        for mod in list(sys.modules.values()):
            if hasattr(mod, "__warningregistry__"):
                del mod.__warningregistry__
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            if stream is not None:
                stream.flush()
        re.purge()
        linecache.clearcache()
        if "struct" in sys.modules:
            sys.modules["struct"]._clearcache()
        if "typing" in sys.modules:
            for f in sys.modules["typing"]._cleanups:
                f()
        if "doctest" in sys.modules:
            sys.modules["doctest"].master = None
        gc.collect()
        gc.collect()


def _is_exempt(item):
    fn = getattr(item, "obj", None)
    return (item.get_closest_marker("noleakcheck") is not None
            or getattr(fn, "is_hypothesis_test", False))


class RefLeakHunter:
    def __init__(self, warmups, runs):
        self.warmups, self.runs = warmups, runs
        # Small ints are cached objects, so storing deltas allocates nothing.
        self._int_pool = {i: i for i in range(-1000, 1000)}

    def _pooled(self, value):
        return self._int_pool.setdefault(value, value)

    def pytest_collection_finish(self, session):
        # Everything alive now (interpreter, pytest, ember, the collected
        # test modules) moves to the permanent generation: the cleanup's
        # gc.collect() calls then scan only what the tests create, instead
        # of ~35,000 objects 16 times per test (most of the gate's time on
        # the debug interpreter).  Leaks are measured by totals, which
        # freezing does not change.
        gc.collect()
        gc.freeze()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        if _is_exempt(item):
            return None  # pytest's default protocol: runs once
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)

        n = self.warmups + self.runs
        rc = [0] * n
        blocks = [0] * n
        fds = [0] * n
        state = _State()
        for _ in range(2):  # settle caches the first cleanup itself fills
            state.cleanup()
        rc_before = _total_refs()
        blocks_before = sys.getallocatedblocks()
        fd_before = _fd_count()
        reports = None
        passed = True
        for i in range(n):
            reports = None
            item._report_sections = []  # captured output would pile up
            reports = runtestprotocol(item, nextitem=nextitem, log=False)
            if not all(r.passed for r in reports):
                passed = False  # failed, skipped or xfailed: report this run as is
                break
            state.cleanup()
            blocks_after = sys.getallocatedblocks()
            rc_after = _total_refs()
            fd_after = _fd_count()
            rc[i] = self._pooled(rc_after - rc_before)
            blocks[i] = self._pooled(blocks_after - blocks_before)
            fds[i] = self._pooled(fd_after - fd_before)
            rc_before, blocks_before, fd_before = rc_after, blocks_after, fd_after
            if i >= self.warmups and rc[i] < 1 and blocks[i] < 1 and fds[i] == 0:
                # Note [Stopping at a clean measured run]
                n = i + 1
                break
        if passed:
            rc, blocks, fds = rc[:n], blocks[:n], fds[:n]
            leaks = []
            for name, deltas, leaking in (
                    ("references", rc[self.warmups:], lambda d: all(x >= 1 for x in d)),
                    ("memory blocks", blocks[self.warmups:], lambda d: all(x >= 1 for x in d)),
                    ("file descriptors", fds[self.warmups:], any)):
                if leaking(deltas):
                    leaks.append(f"leaked {name} {deltas}, sum={sum(deltas)}")
            for rep in reports:
                if rep.when == "call":
                    rep.sections.append(
                        ("refleaks", f"{self.warmups}:{self.runs} deltas: refs {rc} "
                                     f"blocks {blocks} fds {fds}"))
                    if leaks:
                        rep.outcome = "failed"
                        rep.longrepr = (f"{item.nodeid} leaks over {n - self.warmups} runs after "
                                        f"{self.warmups} warm-ups:\n  " + "\n  ".join(leaks))
        for rep in reports:
            ihook.pytest_runtest_logreport(report=rep)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True
