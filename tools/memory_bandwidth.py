"""What one core can read and write, beside PyTorch's sum and NumPy's add
(ember issue 15): builds tools/memory_bandwidth.c with gcc, then times each
variant on NumPy's 16M-float buffers (64 MiB each, as in bench/bench_ops.py),
alternating all of them round by round, by thread CPU time.  Prints the
median GB/s and the median of the per-round ratios to the reference.

    PYTHONPATH=python .venv/bin/python tools/memory_bandwidth.py [ROUNDS]

With ember importable, ember's a.sum() and add(out=) run beside them.
"""

import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

try:
    import torch
    torch.set_num_threads(1)
except ImportError:
    torch = None
try:
    import ember
    ember.set_num_threads(1)
except ImportError:
    ember = None

N = 16 * 1024 * 1024
READS = ["load+OR (ceiling)", "8 ymm sums", "8 zmm sums", "2 halves",
         "4 quarters", "prefetch 1 KB", "prefetch 8 KB"]
WRITES = ["plain stores", "stream ymm", "stream zmm", "128 B chunks (SSE2)",
          "8 KB blocks + copy"]


def build():
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(tempfile.mkdtemp(), "memory_bandwidth.so")
    subprocess.run(["gcc", "-O3", "-shared", "-fPIC", "-o", out,
                    os.path.join(here, "memory_bandwidth.c")], check=True)
    return ctypes.CDLL(out)


def table(title, variants, reference, nbytes, rounds):
    times = {name: [] for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            start = time.thread_time()
            run()
            times[name].append(time.thread_time() - start)
    print(f"\n{title} (load {os.getloadavg()[0]:.1f}, {rounds} rounds)")
    for name, ts in times.items():
        ratio = statistics.median(
            r / t for r, t in zip(times[reference], ts))
        print(f"  {name:22s} {nbytes / statistics.median(ts) / 1e9:6.1f} GB/s"
              f"  {ratio:5.3f}x {reference}")


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    lib = build()
    lib.run_read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int64]
    lib.run_write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_void_p, ctypes.c_int64]
    rng = np.random.default_rng(0)
    a = rng.random(N, dtype=np.float32)
    b = rng.random(N, dtype=np.float32)
    c = np.empty(N, dtype=np.float32)
    pa, pb, pc = a.ctypes.data, b.ctypes.data, c.ctypes.data

    reads = {name: (lambda v=v: lib.run_read(v, pa, N))
             for v, name in enumerate(READS)}
    reads["numpy a.sum()"] = a.sum
    reference = "numpy a.sum()"
    if torch is not None:
        ta = torch.from_numpy(a)
        reads["torch a.sum()"] = ta.sum
        reference = "torch a.sum()"
    if ember is not None:
        reads["ember a.sum()"] = ember.from_numpy(a).sum
    table("read 64 MiB", reads, reference, 4 * N, rounds)

    writes = {name: (lambda v=v: lib.run_write(v, pa, pb, pc, N))
              for v, name in enumerate(WRITES)}
    writes["numpy add(out=)"] = lambda: np.add(a, b, out=c)
    if torch is not None:
        tb, tc = torch.from_numpy(b), torch.from_numpy(c)
        writes["torch add(out=)"] = lambda: torch.add(ta, tb, out=tc)
    if ember is not None:
        ea, eb, ec = (ember.from_numpy(x) for x in (a, b, c))
        writes["ember add(out=)"] = lambda: ember.add(ea, eb, out=ec)
    table("c = a + b, 3 x 64 MiB", writes, "numpy add(out=)", 12 * N, rounds)


if __name__ == "__main__":
    main()
