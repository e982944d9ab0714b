"""index_copy_ and put_, side by side with NumPy and PyTorch in one process.

    .venv/bin/python bench/bench_index.py [--cpu-time]

Small rows show the per-call overhead (microseconds per call), large rows
the kernels (past the parallel grain; everything on one thread:
ember.set_num_threads(1), torch.set_num_threads(1)).  NumPy's peers:
a[idx] = s for index_copy_, np.put for put_ and np.add.at for put_ with
accumulate.  Printed as ratios ember/peer (lower is faster); each time is
the best of several repeats.  Never used in a test.
"""

import argparse
import sys
import time

import numpy as np

import ember
from bench_core import best_time_us, fmt_ratio

try:
    import torch
except ImportError:  # the peer is optional
    torch = None


def _data(rng):
    n = 1 << 20
    return {
        "small": np.zeros((8, 4), dtype=np.float32),
        "small_rows": np.array([5, 2], dtype=np.int64),
        "small_source": np.ones((2, 4), dtype=np.float32),
        "matrix": np.zeros((1024, 1024), dtype=np.float32),
        "rows": rng.permutation(1024)[:512].astype(np.int64),
        "row_source": rng.random((512, 1024), dtype=np.float32),
        "flat_positions": rng.integers(-n, n, size=n // 4).astype(np.int64),
        "flat_values": rng.random(n // 4, dtype=np.float32),
        "distinct_positions": rng.permutation(n)[:n // 4].astype(np.int64),
    }


def _namespaces(data):
    out = {"numpy": dict(data, np=np)}
    out["ember"] = {k: ember.from_numpy(v) for k, v in data.items()}
    out["ember"]["matrix_t"] = out["ember"]["matrix"].t()
    if torch is not None:
        out["torch"] = {k: torch.from_numpy(v) for k, v in data.items()}
        out["torch"]["matrix_t"] = out["torch"]["matrix"].t()
    out["numpy"]["matrix_t"] = data["matrix"].T
    return out


# (name, calls per repeat, {library: statement})
ROWS = [
    ("index_copy_ 8x4, 2 rows", 20000, {
        "ember": "small.index_copy_(0, small_rows, small_source)",
        "numpy": "small[small_rows] = small_source",
        "torch": "small.index_copy_(0, small_rows, small_source)"}),
    ("put_ 8x4, 2 elements", 20000, {
        "ember": "small.put_(small_rows, small_source[0, :2])",
        "numpy": "np.put(small, small_rows, small_source[0, :2])",
        "torch": "small.put_(small_rows, small_source[0, :2])"}),
    ("index_copy_ 1Ki^2 f32, 512 rows", 20, {
        "ember": "matrix.index_copy_(0, rows, row_source)",
        "numpy": "matrix[rows] = row_source",
        "torch": "matrix.index_copy_(0, rows, row_source)"}),
    ("index_copy_ 1Ki^2 f32, 512 cols", 10, {
        "ember": "matrix.index_copy_(1, rows, row_source.t())",
        "numpy": "matrix[:, rows] = row_source.T",
        "torch": "matrix.index_copy_(1, rows, row_source.t())"}),
    ("put_ 1Mi f32, 256Ki distinct", 20, {
        "ember": "matrix.put_(distinct_positions, flat_values)",
        "numpy": "np.put(matrix, distinct_positions, flat_values)",
        "torch": "matrix.put_(distinct_positions, flat_values)"}),
    ("put_ accumulate 1Mi f32, 256Ki", 20, {
        "ember": "matrix.put_(flat_positions, flat_values, accumulate=True)",
        "numpy": "np.add.at(matrix.reshape(-1), flat_positions, flat_values)",
        "torch": "matrix.put_(flat_positions, flat_values, accumulate=True)"}),
    ("put_ transposed 1Mi f32, 256Ki", 20, {
        "ember": "matrix_t.put_(distinct_positions, flat_values)",
        "numpy": None,  # np.put needs a contiguous target
        "torch": "matrix_t.put_(distinct_positions, flat_values)"}),
]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with this thread's CPU clock instead of "
                             "the wall clock (steadier on a loaded machine)")
    args = parser.parse_args(argv)
    clock = time.thread_time if args.cpu_time else time.perf_counter
    ember.set_num_threads(1)
    if torch is not None:
        torch.set_num_threads(1)
    namespaces = _namespaces(_data(np.random.default_rng(0)))
    print(f"{'thread CPU' if args.cpu_time else 'wall'} microseconds per call, "
          f"one thread, best of {args.repeat}")
    header = (f"{'operation':<32} {'ember':>9} {'numpy':>9} {'torch':>9}"
              f" {'e/numpy':>8} {'e/torch':>8}")
    print(header)
    print("-" * len(header))
    for name, number, statements in ROWS:
        times = {}
        for lib in ("ember", "numpy", "torch"):
            stmt = statements.get(lib)
            if stmt is None or lib not in namespaces:
                times[lib] = None
                continue
            ns = namespaces[lib]
            exec(f"def run():\n    {stmt}\n", ns)  # no eval in the timed call
            times[lib] = best_time_us(ns["run"], number, args.repeat, clock)
        cells = " ".join("        -" if times[lib] is None else f"{times[lib]:9.1f}"
                         for lib in ("ember", "numpy", "torch"))
        print(f"{name:<32} {cells} {fmt_ratio(times['ember'], times['numpy']):>8}"
              f" {fmt_ratio(times['ember'], times['torch']):>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
