"""Script-compiler speed, side by side in one process, one thread.
`make bench` runs it.

Rows (goals from ember issue 5):
    y = 2*a*a + 3*b - a/(b+1) on 4M float32      ms per call
        scripted (one fused kernel)               <= 1.0x torch.compile, and
                                                  >= 4x faster than NumPy eager
        peak extra memory                         = the output alone
    100-iteration scripted loop x = x + 1.0
        on a 1-element tensor                     us per iteration,
                                                  <= 0.5x TorchScript
        (as compiled: unrolled by 8, each 8 adds one fused kernel; and
        with unrolling and fusion off: one VM CALL per iteration)
Peers: NumPy eager, numexpr, PyTorch eager, torch.compile (Inductor, which
compiles C++ on first use: its first call is excluded), TorchScript.  Times
are the best of many repeats, libraries interleaved, so that noise from a
shared machine hits all alike; ratios are what the goals compare.
Peak extra memory: ember's allocator peak (ember.memory.stats) and, for
NumPy and numexpr, tracemalloc (NumPy reports its allocations to it), each
over the output size.
"""

import gc
import os
import sys
import time
import tracemalloc

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

import ember  # noqa: E402

try:
    import torch
except ImportError:
    torch = None
try:
    import numexpr
except ImportError:
    numexpr = None

N = 4 * 1024 * 1024
LOOP_ITERATIONS = 100


def chain(a, b):
    return 2 * a * a + 3 * b - a / (b + 1)


def loop(x):
    for _ in range(100):
        x = x + 1.0
    return x


def best_time(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def chain_contenders(a_np, b_np):
    a, b = ember.from_numpy(a_np), ember.from_numpy(b_np)
    scripted = ember.jit.script(chain)
    contenders = {"ember script": lambda: scripted(a, b),
                  "NumPy": lambda: chain(a_np, b_np)}
    if numexpr is not None:
        contenders["numexpr"] = lambda: numexpr.evaluate(
            "2*a*a + 3*b - a/(b+1)", local_dict={"a": a_np, "b": b_np})
    if torch is not None:
        ta, tb = torch.from_numpy(a_np), torch.from_numpy(b_np)
        contenders["torch eager"] = lambda: chain(ta, tb)
        try:
            compiled = torch.compile(chain)
            compiled(ta, tb)  # compiles C++ now, not in the timing
            contenders["torch.compile"] = lambda: compiled(ta, tb)
        except Exception as exc:  # no compiler, no inductor: skip the peer
            print(f"torch.compile unavailable: {type(exc).__name__}: {exc}")
    expected = chain(a_np.astype(np.float64), b_np.astype(np.float64))
    got = scripted(a, b).numpy()
    if not np.allclose(got, expected, rtol=1e-5, atol=1e-5):
        sys.exit("ember script: wrong result")
    return contenders, scripted, (a, b)


def ember_peak_extra(fn, args):
    """Bytes ember's allocator had in use at the peak of one call, beyond
    what was in use before it (the inputs)."""
    gc.collect()
    base = ember.memory.stats()["allocated_bytes"]
    ember.memory.reset_peak_stats()
    result = fn(*args)
    peak = ember.memory.stats()["peak_allocated_bytes"]
    del result
    return peak - base


def tracemalloc_peak_extra(fn):
    gc.collect()
    tracemalloc.start()
    result = fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return peak


def bench_chain(repeat):
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal(N, dtype=np.float32)
    b_np = rng.random(N, dtype=np.float32) + 0.5
    contenders, scripted, args = chain_contenders(a_np, b_np)
    scripted(*args)  # compile before timing
    times = {name: float("inf") for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            times[name] = min(times[name], best_time(fn, 1))
    output_bytes = N * 4
    memory = {"ember script": ember_peak_extra(scripted, args) / output_bytes,
              "NumPy": tracemalloc_peak_extra(contenders["NumPy"]) / output_bytes}
    if "numexpr" in contenders:
        memory["numexpr"] = tracemalloc_peak_extra(contenders["numexpr"]) / output_bytes
    return times, memory


def script_without_unrolling(fn, *args):
    """fn scripted with unrolling and fusion switched off (EMBER_JIT_OPT_LIMIT,
    read when the first call compiles): one CALL per iteration on the VM."""
    os.environ["EMBER_JIT_OPT_LIMIT"] = "unroll=0,fusion=0"
    try:
        scripted = ember.jit.script(fn)
        scripted(*args)
    finally:
        del os.environ["EMBER_JIT_OPT_LIMIT"]
    return scripted


def bench_loop(repeat):
    x = ember.ones(1)
    scripted = ember.jit.script(loop)
    scripted(x)
    plain_vm = script_without_unrolling(loop, x)
    result = {"ember script": best_time(lambda: scripted(x), repeat),
              "  no unrolling": best_time(lambda: plain_vm(x), repeat),
              "ember eager": best_time(lambda: loop(x), repeat)}
    if torch is not None:
        tx = torch.ones(1)
        ts = torch.jit.script(loop)
        for _ in range(5):
            ts(tx)  # the profiling executor optimises after a few runs
        result["TorchScript"] = best_time(lambda: ts(tx), repeat)
        result["torch eager"] = best_time(lambda: loop(tx), repeat)
    if float(scripted(x)[0]) != 101.0 or float(plain_vm(x)[0]) != 101.0:
        sys.exit("ember script loop: wrong result")
    return {k: v / LOOP_ITERATIONS * 1e6 for k, v in result.items()}


def main(argv):
    repeat = int(argv[1]) if len(argv) > 1 else 20
    ember.set_num_threads(1)
    if torch is not None:
        torch.set_num_threads(1)
    if numexpr is not None:
        numexpr.set_num_threads(1)

    times, memory = bench_chain(repeat)
    ours = times["ember script"]
    print(f"\ny = 2*a*a + 3*b - a/(b+1), {N // (1024 * 1024)}M float32, one thread "
          f"(best of {repeat})")
    print(f"{'':16}{'ms':>9}{'ember/peer':>12}{'peak extra / output':>22}")
    for name, t in times.items():
        extra = memory.get(name)
        extra_text = f"{extra:.2f}" if extra is not None else "-"
        print(f"{name:16}{t * 1e3:9.3f}{ours / t:11.2f}x{extra_text:>22}")
    goals = []
    if "torch.compile" in times:
        ratio = ours / times["torch.compile"]
        goals.append(f"vs torch.compile {ratio:.2f}x (goal <= 1.0x: "
                     f"{'met' if ratio <= 1.0 else 'NOT met'})")
    speedup = times["NumPy"] / ours
    goals.append(f"{speedup:.1f}x faster than NumPy (goal >= 4x: "
                 f"{'met' if speedup >= 4 else 'NOT met'})")
    goals.append(f"peak extra memory {memory['ember script']:.2f} x output "
                 f"(goal 1.0: {'met' if memory['ember script'] <= 1.01 else 'NOT met'})")
    print("goals: " + "; ".join(goals))

    per_iteration = bench_loop(repeat * 10)
    print(f"\n{LOOP_ITERATIONS}-iteration loop x = x + 1.0 on 1 element, one thread")
    print(f"{'':16}{'us/iter':>9}{'ember/peer':>12}")
    ours = per_iteration["ember script"]
    for name, t in per_iteration.items():
        print(f"{name:16}{t:9.3f}{ours / t:11.2f}x")
    if "TorchScript" in per_iteration:
        ratios = [per_iteration[name] / per_iteration["TorchScript"]
                  for name in ("ember script", "  no unrolling")]
        print(f"goal: <= 0.5x TorchScript per iteration: {ratios[0]:.2f}x as compiled, "
              f"{ratios[1]:.2f}x without unrolling "
              f"({'met' if max(ratios) <= 0.5 else 'NOT met'})")


if __name__ == "__main__":
    main(sys.argv)
