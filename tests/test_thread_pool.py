"""The worker pool behind large operators (c/th/THParallel.c): how many
threads it starts with, and that results do not depend on the thread
count, on more threads than CPUs, or on whether the workers were polling
or asleep when the operator came (Note [Workers poll before they sleep])."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest

import ember

N = 1 << 20  # large enough to split across threads


def _threads_at_start(**environment):
    env = {k: v for k, v in os.environ.items()
           if k not in ("EMBER_NUM_THREADS", "OMP_NUM_THREADS")}
    env.update(environment)
    out = subprocess.run([sys.executable, "-c", "import ember; print(ember.get_num_threads())"],
                         env=env, capture_output=True, text=True, check=True).stdout
    return int(out)


def test_default_thread_count_reads_the_environment():
    assert _threads_at_start() == os.cpu_count()
    # PyTorch's pool reads OMP_NUM_THREADS; a script that sets it for
    # PyTorch sets it for ember too; ember's own variable comes first.
    assert _threads_at_start(OMP_NUM_THREADS="3") == 3
    assert _threads_at_start(OMP_NUM_THREADS="3", EMBER_NUM_THREADS="2") == 2


@pytest.fixture
def threads():
    saved = ember.get_num_threads()
    yield ember.set_num_threads
    ember.set_num_threads(saved)


def _operands():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(N).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    m = rng.standard_normal((256, 256)).astype(np.float32)
    return a, b, m


@pytest.mark.parametrize("count", [1, 2, 3, 2 * (os.cpu_count() or 1) + 1])
def test_results_do_not_depend_on_the_thread_count(threads, count):
    """Elementwise results are the same bits on any number of threads
    (each element is computed alone); a sum and a product are split
    differently, so they agree with NumPy within rounding.  The last count
    is more threads than CPUs."""
    a, b, m = _operands()
    threads(count)
    ea, eb, em = ember.from_numpy(a), ember.from_numpy(b), ember.from_numpy(m)
    out = ember.empty(N)
    ember.mul(ea, eb, out=out)
    np.testing.assert_array_equal(out.numpy(), a * b)
    np.testing.assert_array_equal((ea + eb).numpy(), a + b)
    np.testing.assert_allclose(ea.sum().item(), a.sum(dtype=np.float64), rtol=1e-5)
    np.testing.assert_allclose((em @ em).numpy(), m @ m, rtol=1e-4, atol=1e-3)


def test_operators_reach_polling_and_sleeping_workers(threads):
    """Back to back the workers are still polling for the next job; after
    a pause longer than their polls (0.2 ms) they sleep and must be woken."""
    a, b, _ = _operands()
    threads(2)
    ea, eb = ember.from_numpy(a), ember.from_numpy(b)
    out = ember.empty(N)
    expected = a * b
    for pause in [0.0] * 50 + [0.005, 0.0, 0.02, 0.0, 0.005]:
        time.sleep(pause)
        out.zero_()
        ember.mul(ea, eb, out=out)
        np.testing.assert_array_equal(out.numpy(), expected)
