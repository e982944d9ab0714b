"""Fused elementwise kernel vs its peers, side by side in one process.

The expression (ember issue 5):   y = 2*a*a + 3*b - a/(b+1)
on 4M float32 elements, one thread, run as
    ember FusedKernel   (the program written by hand, as the jit emits it)
    ember eager         (seven ops, six temporaries)
    NumPy, numexpr, torch eager, torch.compile   (when importable)
Goals: FusedKernel time <= torch.compile's and >= 4x faster than NumPy;
peak extra memory of a call == the output's bytes.

Every library runs on one thread (ember.set_num_threads, torch, numexpr;
OpenBLAS pinned before NumPy is imported).  Times are the best of N calls,
interleaved (one call of each library per round), so a noisy neighbour
slows all of them alike.  A peer that is missing or fails prints
"unavailable" with the reason; nothing is asserted.

Peak extra memory: ember's allocator statistics (ember.memory.stats():
peak_allocated_bytes over a call minus what was allocated before it);
NumPy's through tracemalloc, which NumPy reports its buffers to.
"""

import os

# Before NumPy is imported: OpenBLAS sizes its thread pool at load time.
os.environ["OPENBLAS_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402

import ember  # noqa: E402
from ember import memory  # noqa: E402

try:
    import torch
except ImportError:
    torch = None
try:
    import numexpr
except ImportError:
    numexpr = None

N_DEFAULT = 4 * 1024 * 1024
EXPRESSION = "2*a*a + 3*b - a/(b+1)"
# The expression as a FusedKernel program: registers 0 and 1 are a and b.
PROGRAM = [("const", 2, 2.0), ("mul", 3, 2, 0), ("mul", 4, 3, 0),
           ("const", 5, 3), ("mul", 6, 5, 1), ("add", 7, 4, 6),
           ("const", 8, 1), ("add", 9, 1, 8), ("div", 10, 0, 9),
           ("sub", 11, 7, 10)]


def expression(a, b):
    return 2 * a * a + 3 * b - a / (b + 1)


def set_threads(n):
    ember.set_num_threads(n)
    if torch is not None:
        torch.set_num_threads(n)
    if numexpr is not None:
        numexpr.set_num_threads(n)


def candidates(an, bn):
    """name -> zero-argument callable, or an "unavailable: ..." string."""
    a, b = ember.from_numpy(an), ember.from_numpy(bn)
    kernel = ember._C.FusedKernel(2, PROGRAM, [11], name="y")
    out = {"ember fused": lambda: kernel(a, b)[0],
           "ember eager": lambda: expression(a, b),
           "numpy": lambda: expression(an, bn)}
    if numexpr is not None:
        out["numexpr"] = lambda: numexpr.evaluate(
            EXPRESSION, local_dict={"a": an, "b": bn})
    else:
        out["numexpr"] = "unavailable: not installed"
    if torch is None:
        out["torch eager"] = out["torch.compile"] = "unavailable: no torch"
        return out
    ta, tb = torch.from_numpy(an), torch.from_numpy(bn)
    out["torch eager"] = lambda: expression(ta, tb)
    try:
        compiled = torch.compile(expression)
        compiled(ta, tb)  # compiles now, not in the timed calls
        out["torch.compile"] = lambda: compiled(ta, tb)
    except Exception as exc:  # no compiler toolchain, ...
        out["torch.compile"] = f"unavailable: {type(exc).__name__}: {exc}"
    return out


def as_numpy(value):
    return np.asarray(value.numpy() if hasattr(value, "numpy") else value)


def check(runs, an, bn):
    """Marks a library whose result is wrong; the fused kernel must equal
    ember eager bit for bit, the rest NumPy within float32 rounding."""
    want = expression(an, bn)
    eager = as_numpy(runs["ember eager"]())
    for name, run in runs.items():
        if isinstance(run, str):
            continue
        got = as_numpy(run())
        ok = (np.array_equal(got.view(np.uint32), eager.view(np.uint32))
              if name == "ember fused"
              else np.allclose(got, want, rtol=1e-5, atol=1e-5))
        if not ok:
            runs[name] = "wrong result"


def best_times(runs, rounds):
    """Best seconds per call of each library, one call each per round."""
    best = {name: float("inf") for name, run in runs.items()
            if not isinstance(run, str)}
    for _ in range(rounds):
        for name in best:
            start = time.perf_counter()
            runs[name]()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def ember_peak_extra(run):
    """Bytes ember allocated at the peak of one call, beyond what was
    allocated before it (the result is kept alive to the end)."""
    before = memory.stats()["allocated_bytes"]
    memory.reset_peak_stats()
    result = run()
    peak = memory.stats()["peak_allocated_bytes"] - before
    del result
    return peak


def numpy_peak_extra(run):
    tracemalloc.start()
    result = run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del result
    return peak


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=N_DEFAULT,
                        help="elements (float32)")
    parser.add_argument("--rounds", type=int, default=30,
                        help="calls per library (best is kept)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    set_threads(args.threads)
    rng = np.random.default_rng(0)
    an = rng.random(args.n, dtype=np.float32)
    bn = rng.random(args.n, dtype=np.float32)
    runs = candidates(an, bn)
    check(runs, an, bn)
    times = best_times(runs, args.rounds)

    print(f"y = {EXPRESSION}, {args.n} float32, {args.threads} thread(s), "
          f"best of {args.rounds} interleaved; ember fused loops: "
          f"{ember._C._fused_isa()}")
    fused = times.get("ember fused")
    print(f"{'library':<15} {'ms':>8} {'fused speedup':>14}")
    for name, run in runs.items():
        if isinstance(run, str):
            print(f"{name:<15} {run}")
            continue
        ms = times[name] * 1e3
        ratio = times[name] / fused if fused else float("nan")
        print(f"{name:<15} {ms:>8.2f} {ratio:>13.2f}x")

    out_bytes = 4 * args.n
    print(f"\npeak extra memory of one call (output: {out_bytes} bytes)")
    if not isinstance(runs["ember fused"], str):
        peak = ember_peak_extra(runs["ember fused"])
        print(f"  ember fused  {peak:>12} bytes = {peak / out_bytes:.2f}x "
              f"output")
    peak = ember_peak_extra(runs["ember eager"])
    print(f"  ember eager  {peak:>12} bytes = {peak / out_bytes:.2f}x output")
    peak = numpy_peak_extra(runs["numpy"])
    print(f"  numpy        {peak:>12} bytes = {peak / out_bytes:.2f}x output")

    print("\ngoals:")
    compiled = times.get("torch.compile")
    if fused and compiled:
        print(f"  fused <= torch.compile time: {fused <= compiled} "
              f"({fused * 1e3:.2f} vs {compiled * 1e3:.2f} ms)")
    if fused:
        speedup = times["numpy"] / fused
        print(f"  fused >= 4x NumPy: {speedup >= 4} ({speedup:.2f}x)")


if __name__ == "__main__":
    main()
