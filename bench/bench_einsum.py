"""einsum: ember against PyTorch, side by side, one thread.

Prints, for each equation and shape, the best time (microseconds) of
ember.einsum and torch.einsum and their ratio ember / torch (below 1:
ember is faster).  The two take turns within each round, so a noisy
machine slows them alike.  The attention score product
'bhqd,bhkd->bhqk' is the case issue 13 sets a target for (ratio <= 1.0).

    PYTHONPATH=python python bench/bench_einsum.py [--cpu-time]

--cpu-time times by the calling thread's CPU time (time.thread_time)
instead of the wall clock, as bench_gemm.py does.
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

CASES = [
    ("bhqd,bhkd->bhqk", [(8, 8, 128, 64), (8, 8, 128, 64)]),
    ("bhqd,bhkd->bhqk", [(2, 4, 32, 16), (2, 4, 32, 16)]),
    ("bhqk,bhkd->bhqd", [(8, 8, 128, 128), (8, 8, 128, 64)]),
    ("ij,jk->ik", [(256, 256), (256, 256)]),
    ("bi,oi->bo", [(64, 512), (256, 512)]),
    ("ab,bc,cd->ad", [(16, 512), (512, 512), (512, 16)]),
    ("bii->bi", [(64, 64, 64)]),
    ("bij->", [(64, 64, 64)]),
]


def best_time(fn, best, clock):
    start = clock()
    fn()
    return min(best, clock() - start)


def rounds_for(seconds_per_call):
    return max(5, min(200, int(0.5 / max(seconds_per_call, 1e-6))))


def measure(equation, shapes, clock):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    ember_ops = [ember.tensor(a) for a in arrays]
    contenders = {"ember": lambda: ember.einsum(equation, *ember_ops)}
    if torch is not None:
        torch_ops = [torch.from_numpy(a) for a in arrays]
        contenders["torch"] = lambda: torch.einsum(equation, *torch_ops)
    start = time.perf_counter()
    for fn in contenders.values():
        fn()  # warm up
    rounds = rounds_for((time.perf_counter() - start) / len(contenders))
    best = {name: float("inf") for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            best[name] = best_time(fn, best[name], clock)
    return best


def main(argv):
    cpu_time = "--cpu-time" in argv
    clock = time.thread_time if cpu_time else time.perf_counter
    ember.set_num_threads(1)
    if torch is not None:
        torch.set_num_threads(1)
    print("einsum, float32, one thread, best time in microseconds; ratio = ember / torch; "
          f"clock: {'thread CPU time' if cpu_time else 'wall'}")
    print(f"{'equation':<18} {'shapes':<34} {'ember':>9} {'torch':>9} {'ratio':>6}")
    for equation, shapes in CASES:
        best = measure(equation, shapes, clock)
        shown = " ".join("x".join(map(str, s)) for s in shapes)
        ours = best["ember"] * 1e6
        if torch is None:
            print(f"{equation:<18} {shown:<34} {ours:>9.1f} {'-':>9} {'-':>6}")
            continue
        theirs = best["torch"] * 1e6
        print(f"{equation:<18} {shown:<34} {ours:>9.1f} {theirs:>9.1f} {ours / theirs:>6.2f}",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
