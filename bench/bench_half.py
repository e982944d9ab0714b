"""Half precision speed: ember against PyTorch, side by side, as ratios.

    PYTHONPATH=python python bench/bench_half.py [--threads N]

Prints, on the same CPU and the same number of threads:
  - float16 and bfloat16 matmul of 1024 x 1024 by 1024 x 1024 (GFLOP/s,
    2 n^3 flops per product, best of several runs);
  - float32 -> bfloat16 and bfloat16 -> float32 casts of 16M elements,
    and the same for float16 (GB/s of bytes read plus bytes written).
and ember's rate over PyTorch's for each.  The libraries take turns within
each round, so a noisy machine slows them alike.  Never a test: timings
only.
"""

import argparse
import platform
import time

import ember

try:
    import torch
except ImportError:
    torch = None


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    wanted = ["avx2", "fma", "f16c", "avx512f", "avx512_bf16",
                              "avx512fp16", "amx_bf16"]
                    return " ".join(w for w in wanted if w in flags)
    except OSError:
        pass
    return "?"


# PyTorch's OpenMP workers keep spinning on the cores for a while after a
# parallel call returns, and ember's pool threads briefly too: run straight
# after the other library, a two-thread call shares its cores with them
# (on a 2-core Zen 4, ember's bfloat16 matmul measured 205 GFLOP/s right
# after torch's and 290-340 with a pause).  So each call waits IDLE_PAUSE
# seconds first, for both libraries alike.
IDLE_PAUSE = 0.05


def best_of(contenders, rounds):
    best = {name: float("inf") for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            time.sleep(IDLE_PAUSE)
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def report(label, unit, amount, best):
    rates = {name: amount / t for name, t in best.items()}
    line = f"{label:<28}" + "".join(f"{name} {rate:8.1f} {unit}   " for name, rate in rates.items())
    if "torch" in rates:
        line += f"ratio {rates['ember'] / rates['torch']:.2f}x"
    print(line)


def bench_matmul(n, dtype_name, rounds):
    gen = torch.Generator().manual_seed(n) if torch is not None else None
    if torch is not None:
        ta = torch.randn(n, n, generator=gen).to(getattr(torch, dtype_name))
        tb = torch.randn(n, n, generator=gen).to(getattr(torch, dtype_name))
        ea, eb = ember.from_dlpack(ta.clone()), ember.from_dlpack(tb.clone())
    else:
        ea = ember.randn(n, n).to(getattr(ember, dtype_name))
        eb = ember.randn(n, n).to(getattr(ember, dtype_name))
    contenders = {"ember": lambda: ember.matmul(ea, eb)}
    if torch is not None:
        contenders["torch"] = lambda: torch.matmul(ta, tb)
    best = best_of(contenders, rounds)
    report(f"matmul {dtype_name} {n}", "GFLOP/s", 2 * n**3 / 1e9, best)


def bench_cast(numel, src_name, dst_name, rounds):
    src_e = ember.randn(numel).to(getattr(ember, src_name))
    contenders = {"ember": lambda: src_e.to(getattr(ember, dst_name))}
    if torch is not None:
        src_t = torch.randn(numel).to(getattr(torch, src_name))
        contenders["torch"] = lambda: src_t.to(getattr(torch, dst_name))
    best = best_of(contenders, rounds)
    moved = numel * (src_e.element_size() + ember.empty(0, dtype=getattr(ember, dst_name)).element_size())
    report(f"cast {src_name}->{dst_name}", "GB/s", moved / 1e9, best)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for both libraries (default: theirs)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.threads is not None:
        ember.set_num_threads(args.threads)
        if torch is not None:
            torch.set_num_threads(args.threads)
    print(f"CPU: {cpu_name()} [{cpu_flags()}]")
    print(f"threads: ember {ember.get_num_threads()}"
          + (f", torch {torch.get_num_threads()}" if torch is not None else ""))
    for dtype_name in ("float16", "bfloat16"):
        bench_matmul(1024, dtype_name, args.rounds)
    numel = 16 * 1024 * 1024
    for pair in (("float32", "bfloat16"), ("bfloat16", "float32"),
                 ("float32", "float16"), ("float16", "float32")):
        bench_cast(numel, *pair, args.rounds)


if __name__ == "__main__":
    main()
