"""float32 GEMM throughput: ember against NumPy (OpenBLAS) and PyTorch.

Prints, for square n x n @ n x n products, the GFLOP/s (2 n^3 flops per
product, best of several runs) of ember, NumPy and torch (when importable)
on one thread, ember's ratio to the faster of the two, and ember on two
threads.  The libraries take turns within each round, so a noisy machine
slows them alike.

For a fair comparison run it with OpenBLAS choosing its own kernel:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 \\
        PYTHONPATH=python python bench/bench_gemm.py [--cpu-time] [sizes...]

--cpu-time times the one-thread runs by the calling thread's CPU time
(time.thread_time) instead of the wall clock: on a machine shared with
other work it counts only the time the thread actually ran.  The two-thread
column is always wall-clock time.
"""

import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads it

import numpy as np  # noqa: E402

import ember  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

SIZES = [256, 512, 1024, 2048]


def rounds_for(n):
    """More rounds for small sizes, so each measurement is long enough."""
    return max(3, min(30, int(3e9 / (2 * n**3))))


def best_time(fn, best, clock=time.perf_counter):
    start = clock()
    fn()
    return min(best, clock() - start)


def measure(n, clock):
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    ea, eb = ember.tensor(a), ember.tensor(b)
    contenders = {
        "ember": lambda: ember.matmul(ea, eb),
        "numpy": lambda: np.matmul(a, b),
    }
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        contenders["torch"] = lambda: torch.matmul(ta, tb)
    best = {name: float("inf") for name in contenders}
    best["ember2"] = float("inf")
    for fn in contenders.values():
        fn()  # warm up: first-touch pages, thread pools, kernel choice
    for _ in range(rounds_for(n)):
        ember.set_num_threads(1)
        for name, fn in contenders.items():
            best[name] = best_time(fn, best[name], clock)
        ember.set_num_threads(2)
        best["ember2"] = best_time(contenders["ember"], best["ember2"])
    ember.set_num_threads(1)
    flops = 2.0 * n**3
    return {name: flops / t / 1e9 for name, t in best.items()}


def main(argv):
    cpu_time = "--cpu-time" in argv
    clock = time.thread_time if cpu_time else time.perf_counter
    sizes = [int(arg) for arg in argv if arg != "--cpu-time"] or SIZES
    if torch is not None:
        torch.set_num_threads(1)
    ember.set_num_threads(1)
    peers = ["numpy"] + (["torch"] if torch is not None else [])
    header = (f"{'n':>6} {'ember':>8} " + " ".join(f"{p:>8}" for p in peers)
              + f" {'ratio':>7} {'ember 2T':>9}")
    print("float32 GEMM, GFLOP/s, one thread unless noted; "
          f"ratio = ember / best peer; kernel {ember._C._gemm_kernel()}; "
          f"one-thread clock: {'thread CPU time' if cpu_time else 'wall'}")
    print(header)
    for n in sizes:
        r = measure(n, clock)
        best_peer = max(r[p] for p in peers)
        print(f"{n:>6} {r['ember']:>8.1f} "
              + " ".join(f"{r[p]:>8.1f}" for p in peers)
              + f" {r['ember'] / best_peer:>7.2f} {r['ember2']:>9.1f}",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
