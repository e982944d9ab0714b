"""GEMM throughput: ember against NumPy (OpenBLAS) and PyTorch.

Prints the GEMM kernel family and blocking ember chose for this CPU, then,
for float32 and float64 square n x n @ n x n products, the GFLOP/s (2 n^3
flops per product, best of several runs) of ember, NumPy and torch (when
importable) on one thread, ember's ratio to the faster of the two, and
ember on two threads; then the small and skinny shapes of issue 15 (the
batch-64 MLP's products and their backward, 1 x N, N x 1, a batch of
8 x 64 x 64), and finally every ratio against its goal, one line each.
The libraries take turns within each round, so a noisy machine slows them
alike.

For a fair comparison run it with OpenBLAS choosing its own kernel:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=1 \\
        PYTHONPATH=python python bench/bench_gemm.py [--cpu-time] [sizes...]

--cpu-time times the one-thread runs by the calling thread's CPU time
(time.thread_time) instead of the wall clock: on a machine shared with
other work it counts only the time the thread actually ran.  The two-thread
runs, and the one-thread run they are compared with, are always timed by
the wall clock.
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
DTYPES = {"float32": "sgemm", "float64": "dgemm"}

# Goals of issue 15.
GEMM_GOAL = 0.9  # at least this times the faster peer, 256-4096
SHAPE_GOAL = 1.0  # small and skinny shapes: not slower than the faster peer
THREADS_GOAL = 1.8  # two threads' rate over one thread's, 1024 and above

# (label, shape of A, shape of B, transpose A, transpose B): what the
# batch-64 MLP 784-128-10 multiplies (linear's x @ W.t() and its backward
# products g @ W and g.t() @ x), a vector times a matrix both ways, a batch.
SHAPES = [
    ("64x784 @ (128x784).t()", (64, 784), (128, 784), False, True),
    ("64x128 @ 128x784", (64, 128), (128, 784), False, False),
    ("(64x128).t() @ 64x784", (64, 128), (64, 784), True, False),
    ("64x128 @ (10x128).t()", (64, 128), (10, 128), False, True),
    ("(64x10).t() @ 64x128", (64, 10), (64, 128), True, False),
    ("1x1024 @ 1024x1024", (1, 1024), (1024, 1024), False, False),
    ("1024x1024 @ 1024x1", (1024, 1024), (1024, 1), False, False),
    ("8x64x64 @ 8x64x64", (8, 64, 64), (8, 64, 64), False, False),
]


def rounds_for(flops):
    """More rounds for small products, so each measurement is long enough."""
    return max(3, min(30, int(3e9 / flops)))


def repeats_for(flops):
    """Small products are timed over a loop of calls."""
    return max(1, int(2e7 / flops))


def best_time(fn, best, clock, repeats=1):
    start = clock()
    for _ in range(repeats):
        fn()
    return min(best, (clock() - start) / repeats)


def t(x):
    """The last two dims swapped, in each library."""
    return x.swapaxes(-1, -2) if isinstance(x, np.ndarray) else x.transpose(-1, -2)


def contenders_for(a, b, ta, tb):
    """A matmul closure per library, operands already converted (and
    transposed as views, the way linear and its backward see them)."""
    def product(lib_a, lib_b, matmul):
        x = t(lib_a) if ta else lib_a
        y = t(lib_b) if tb else lib_b
        return lambda: matmul(x, y)

    contenders = {
        "ember": product(ember.tensor(a), ember.tensor(b), ember.matmul),
        "numpy": product(a, b, np.matmul),
    }
    if torch is not None:
        contenders["torch"] = product(torch.from_numpy(a), torch.from_numpy(b), torch.matmul)
    return contenders


def measure(contenders, flops, clock, two_threads):
    """GFLOP/s of each contender on one thread (by `clock`), and of ember on
    two threads and one thread by the wall clock when asked."""
    best = {name: float("inf") for name in contenders}
    walls = {"ember2": float("inf"), "ember1 wall": float("inf")}
    repeats = repeats_for(flops)
    for fn in contenders.values():
        fn()  # warm up: first-touch pages, thread pools, kernel choice
    for _ in range(rounds_for(flops * repeats)):
        ember.set_num_threads(1)
        for name, fn in contenders.items():
            best[name] = best_time(fn, best[name], clock, repeats)
        if two_threads:
            walls["ember1 wall"] = best_time(
                contenders["ember"], walls["ember1 wall"], time.perf_counter, repeats)
            ember.set_num_threads(2)
            walls["ember2"] = best_time(
                contenders["ember"], walls["ember2"], time.perf_counter, repeats)
    ember.set_num_threads(1)
    if two_threads:
        best.update(walls)
    return {name: flops / seconds / 1e9 for name, seconds in best.items()}


def print_blocking():
    info = ember._C._gemm_blocking()
    l1, l2, l3 = (size // 1024 for size in info["caches"])
    print(f"GEMM kernel family {info['kernel']}; caches L1 {l1}K, L2 {l2}K, L3 {l3}K")
    for dtype in DTYPES:
        b = info[dtype]
        print(f"  {dtype}: tile {b['mr']} x {b['nr']}, MC {b['mc']}, KC {b['kc']}, NC {b['nc']}")


def main(argv):
    cpu_time = "--cpu-time" in argv
    clock = time.thread_time if cpu_time else time.perf_counter
    sizes = [int(arg) for arg in argv if arg != "--cpu-time"] or SIZES
    if torch is not None:
        torch.set_num_threads(1)
    ember.set_num_threads(1)
    peers = ["numpy"] + (["torch"] if torch is not None else [])
    goals = []  # (label, ratio, goal)
    print_blocking()
    print("GFLOP/s, one thread unless noted; ratio = ember / best peer; "
          f"one-thread clock: {'thread CPU time' if cpu_time else 'wall'}")
    for dtype, name in DTYPES.items():
        print(f"{dtype} square products")
        print(f"{'n':>6} {'ember':>8} " + " ".join(f"{p:>8}" for p in peers)
              + f" {'ratio':>7} {'ember 2T':>9} {'2T/1T':>6}")
        rng = np.random.default_rng(0)
        for n in sizes:
            a = rng.standard_normal((n, n)).astype(dtype)
            b = rng.standard_normal((n, n)).astype(dtype)
            r = measure(contenders_for(a, b, False, False), 2.0 * n**3, clock, True)
            ratio = r["ember"] / max(r[p] for p in peers)
            scaling = r["ember2"] / r["ember1 wall"]
            print(f"{n:>6} {r['ember']:>8.1f} " + " ".join(f"{r[p]:>8.1f}" for p in peers)
                  + f" {ratio:>7.2f} {r['ember2']:>9.1f} {scaling:>6.2f}", flush=True)
            goals.append((f"{name} {n} vs best peer", ratio, GEMM_GOAL))
            if n >= 1024:
                goals.append((f"{name} {n} two threads vs one", scaling, THREADS_GOAL))
    print("float32 small and skinny shapes")
    print(f"{'product':>24} {'ember':>8} " + " ".join(f"{p:>8}" for p in peers)
          + f" {'ratio':>7}")
    rng = np.random.default_rng(1)
    for label, shape_a, shape_b, ta, tb in SHAPES:
        a = rng.standard_normal(shape_a).astype(np.float32)
        b = rng.standard_normal(shape_b).astype(np.float32)
        m, k = (shape_a[-1], shape_a[-2]) if ta else shape_a[-2:]
        n = shape_b[-2] if tb else shape_b[-1]
        batch = shape_a[0] if len(shape_a) == 3 else 1
        r = measure(contenders_for(a, b, ta, tb), 2.0 * batch * m * n * k, clock, False)
        ratio = r["ember"] / max(r[p] for p in peers)
        print(f"{label:>24} {r['ember']:>8.1f} " + " ".join(f"{r[p]:>8.1f}" for p in peers)
              + f" {ratio:>7.2f}", flush=True)
        goals.append((f"sgemm {label} vs best peer", ratio, SHAPE_GOAL))
    print("goals (issue 15)")
    for label, ratio, goal in goals:
        verdict = "met" if ratio >= goal else "MISSED"
        print(f"  {label}: {ratio:.2f}x (goal >= {goal:.1f}x) {verdict}")


if __name__ == "__main__":
    main(sys.argv[1:])
