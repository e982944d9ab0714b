"""Random sampling speed, side by side with PyTorch in one process, one
thread.  `make bench` runs it.

Rows (goals from ember issue 13), each at most 1.0x PyTorch's time:
    multinomial over 1M categories: 1 and 1000 draws without replacement,
        1M draws with replacement
    randperm(1M)
Times are the best of several repeats, the libraries interleaved so that
noise from a shared machine hits both alike.  Printed as ratios ember /
PyTorch.  The values differ (ember's bit generator is xoshiro256**, not
PyTorch's Mersenne Twister), the work does not.
"""

import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

import ember  # noqa: E402
from bench_autograd import ratio_row  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

N = 1_000_000


def cases(lib):
    """name -> a call drawing from `lib`, on the same 1M weights."""
    weights = lib.from_numpy(np.random.default_rng(0).random(N, dtype=np.float32))
    return {
        "multinomial 1M categories, 1 draw": lambda: lib.multinomial(weights, 1),
        "multinomial 1M categories, 1000 draws": lambda: lib.multinomial(weights, 1000),
        "multinomial 1M cat., 1M draws, replacement":
            lambda: lib.multinomial(weights, N, replacement=True),
        "randperm(1M)": lambda: lib.randperm(N),
    }


def measure(repeats):
    libs = [ember] + ([torch] if torch is not None else [])
    calls = {lib.__name__: cases(lib) for lib in libs}
    times = {}
    for _ in range(repeats):
        for name, table in calls.items():
            for case, call in table.items():
                start = time.perf_counter()
                call()
                elapsed = (time.perf_counter() - start) * 1e3
                best = times.setdefault(case, {})
                best[name] = min(best.get(name, elapsed), elapsed)
    return times


def main():
    ember.set_num_threads(1)
    if torch is not None:
        torch.set_num_threads(1)
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    print(f"random sampling, one thread, best of {repeats} (ratio = ember / torch time)")
    for case, values in measure(repeats).items():
        print(ratio_row(case, "ms", values, "torch", 1.0))


if __name__ == "__main__":
    main()
