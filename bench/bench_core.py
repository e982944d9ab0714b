"""Per-call overhead of ember's core operations, side by side with NumPy and
PyTorch in one process.  `make bench` runs it.

Printed as ratios, because absolute times on a shared machine mean little:
    ember/numpy   goal <= 1.0  (at most NumPy's time)
    ember/torch   goal <= 0.5  (at most half of PyTorch's)
Each number is the best of several repeats of a timed loop (the minimum is
the least noisy estimate of the cost itself).  Never used in a test.
"""

import argparse
import sys
import time
import timeit

import numpy as np

import ember

try:
    import torch
except ImportError:  # the oracle is optional
    torch = None


def best_time_us(stmt, number, repeat, clock=time.perf_counter):
    timer = timeit.Timer(stmt, timer=clock)
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e6


def cases():
    """(name, ember call, numpy call, torch call); None where absent."""
    data = [1.0, 2.0, 3.0, 4.0]
    et = ember.zeros(4, 6)
    na = np.zeros((4, 6), dtype=np.float32)
    tt = torch.zeros(4, 6) if torch else None
    arr = np.zeros(24, dtype=np.float32)
    e4 = ember.zeros(4)
    a4 = np.zeros(4, dtype=np.float32)
    t4 = torch.zeros(4) if torch else None
    return [
        ("tensor([4 floats])", lambda: ember.tensor(data),
         lambda: np.array(data), torch and (lambda: torch.tensor(data))),
        ("empty(4)", lambda: ember.empty(4), lambda: np.empty(4),
         torch and (lambda: torch.empty(4))),
        ("view(6, 4)", lambda: et.view(6, 4), lambda: na.reshape(6, 4),
         torch and (lambda: tt.view(6, 4))),
        ("reshape(6, 4)", lambda: et.reshape(6, 4), lambda: na.reshape(6, 4),
         torch and (lambda: tt.reshape(6, 4))),
        ("transpose(0, 1)", lambda: et.transpose(0, 1),
         lambda: na.swapaxes(0, 1), torch and (lambda: tt.transpose(0, 1))),
        ("t[1:3]", lambda: et[1:3], lambda: na[1:3],
         torch and (lambda: tt[1:3])),
        ("from_numpy", lambda: ember.from_numpy(arr),
         lambda: np.frombuffer(arr, dtype=np.float32),
         torch and (lambda: torch.from_numpy(arr))),
        ("numpy()", lambda: e4.numpy(), lambda: a4.view(),
         torch and (lambda: t4.numpy())),
    ]


def fmt_ratio(a, b):
    return "   -  " if a is None or b is None else f"{a / b:6.2f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with this thread's CPU clock instead of "
                             "the wall clock (steadier on a loaded machine)")
    args = parser.parse_args(argv)
    clock = time.thread_time if args.cpu_time else time.perf_counter
    print(f"ember {ember.__version__}, numpy {np.__version__}, torch "
          f"{torch.__version__ if torch else 'not installed'}")
    print(f"{'thread CPU' if args.cpu_time else 'wall'} times in "
          f"microseconds per call (best of {args.repeat} x {args.number})")
    header = (f"{'operation':<20} {'ember':>8} {'numpy':>8} {'torch':>8}"
              f" {'e/numpy':>8} {'e/torch':>8}")
    print(header)
    print("-" * len(header))
    misses = []
    for name, e_call, n_call, t_call in cases():
        e = best_time_us(e_call, args.number, args.repeat, clock)
        n = best_time_us(n_call, args.number, args.repeat, clock)
        t = (best_time_us(t_call, args.number, args.repeat, clock)
             if t_call else None)
        t_text = f"{t:8.3f}" if t is not None else "       -"
        print(f"{name:<20} {e:8.3f} {n:8.3f} {t_text} {fmt_ratio(e, n):>8}"
              f" {fmt_ratio(e, t):>8}")
        if e > n or (t is not None and e > 0.5 * t):
            misses.append(name)
    print()
    print("goal: e/numpy <= 1.00 and e/torch <= 0.50;",
          "all met" if not misses else "missed by: " + ", ".join(misses))
    return 0


if __name__ == "__main__":
    sys.exit(main())
