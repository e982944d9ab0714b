"""The layers of issue 12: ember against PyTorch, side by side, forward +
backward, one thread (and two with --threads 2).

Prints, per case, the best time (milliseconds) of ember and of PyTorch and
their ratio ember / torch with the issue's goal (at most 1.0x for each).
The two take turns within each round, so a noisy machine slows them alike.

    PYTHONPATH=python python bench/bench_layers.py [--threads N] [--quick]
        [--forward] [--only SUBSTRING] [--cpu-time] [--rounds N]

The sdpa cases also print ember's peak extra memory over one forward +
backward (ember.memory's peak_allocated_bytes, which counts tensors: the
kernel's per-thread block buffers, a few hundred KiB, are not tensors)
next to the size of one L x S score matrix.

--quick runs smaller shapes (a smoke run; the issue's goals are stated
for the full ones).  --forward times the forward alone (no autograd
graph), --only the cases whose name contains SUBSTRING.  --cpu-time
measures CPU time instead of wall time (the calling thread's with one
thread, the process's with more), which a loaded machine inflates far less.
--rounds sets the rounds per case (5, 3 with --quick): more rounds give
each library's best time more chances on a busy machine.
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


def conv_case(lib, batch, channels, size, kernel):
    conv = lib.nn.Conv2d(channels, channels, kernel, padding=kernel // 2)
    x = lib.randn(batch, channels, size, size, requires_grad=True)
    return lambda: conv(x).sum().backward()


def conv3d_case(lib, batch, channels, depth, size, kernel):
    conv = lib.nn.Conv3d(channels, channels, kernel, padding=kernel // 2)
    x = lib.randn(batch, channels, depth, size, size, requires_grad=True)
    return lambda: conv(x).sum().backward()


def maxpool_case(lib, batch, channels, size):
    x = lib.randn(batch, channels, size, size, requires_grad=True)
    return _step(lib, lambda: lib.nn.functional.max_pool2d(x, 2))


def avgpool_case(lib, batch, channels, size):
    x = lib.randn(batch, channels, size, size, requires_grad=True)
    return _step(lib, lambda: lib.nn.functional.avg_pool2d(x, 3, 2, 1))


def batchnorm_case(lib, batch, channels, size):
    norm = lib.nn.BatchNorm2d(channels)
    x = lib.randn(batch, channels, size, size, requires_grad=True)
    return _step(lib, lambda: norm(x))


def layernorm_case(lib, rows, width):
    norm = lib.nn.LayerNorm(width)
    x = lib.randn(rows, width, requires_grad=True)
    return _step(lib, lambda: norm(x))


def groupnorm_case(lib, batch, channels, groups, size):
    norm = lib.nn.GroupNorm(groups, channels)
    x = lib.randn(batch, channels, size, size, requires_grad=True)
    return _step(lib, lambda: norm(x))


def adaptive_avgpool_case(lib, batch, channels, size, out):
    x = lib.randn(batch, channels, size, size, requires_grad=True)
    return _step(lib, lambda: lib.nn.functional.adaptive_avg_pool2d(x, out))


FORWARD_ONLY = "--forward" in sys.argv


def _step(lib, forward):
    """forward + backward, or (--forward) the forward alone without a graph."""
    if FORWARD_ONLY:
        def run():
            with lib.no_grad():
                forward()
        return run
    return lambda: forward().sum().backward()


def lstm_case(lib, seq, batch, hidden):
    lstm = lib.nn.LSTM(hidden, hidden, num_layers=2)
    x = lib.randn(seq, batch, hidden, requires_grad=True)
    return lambda: lstm(x)[0].sum().backward()


def lstm_proj_case(lib, seq, batch, features, hidden, proj):
    lstm = lib.nn.LSTM(features, hidden, proj_size=proj)
    x = lib.randn(seq, batch, features, requires_grad=True)
    return lambda: lstm(x)[0].sum().backward()


def attention_case(lib, batch, heads, seq, dim):
    q, k, v = (lib.randn(batch, heads, seq, dim, requires_grad=True) for _ in range(3))
    return lambda: lib.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=True).sum().backward()


def attention_memory(args):
    """ember's peak extra memory (bytes) over one forward + backward of an
    sdpa case, and the size of one float32 L x S score matrix per (batch,
    head), the composite's smallest intermediate."""
    batch, heads, seq, _ = args
    step = attention_case(ember, *args)
    ember.memory.reset_peak_stats()
    base = ember.memory.stats()["allocated_bytes"]
    step()
    peak = ember.memory.stats()["peak_allocated_bytes"] - base
    return peak, batch * heads * seq * seq * 4


def cases(quick):
    batch = 4 if quick else 32
    yield "conv2d 3x3 64ch 56x56", conv_case, (batch, 64, 28 if quick else 56, 3)
    yield "conv2d 3x3 128ch 28x28", conv_case, (batch, 128, 28, 3)
    yield "conv2d 3x3 256ch 14x14", conv_case, (batch, 256, 14, 3)
    yield "conv2d 3x3 512ch 7x7", conv_case, (batch, 512, 7, 3)
    yield "conv2d 5x5 32ch 28x28 (MNIST-style)", conv_case, (batch, 32, 28, 5)
    # a video / volumetric layer: C3D-style 3x3x3, 16 frames of 28x28, batch 8
    yield "conv3d 3x3x3 32ch 16x28x28", conv3d_case, (batch // 4, 32, 8 if quick else 16, 28, 3)
    yield "max_pool2d 64ch 56x56", maxpool_case, (batch, 64, 56)
    yield "avg_pool2d 3x3/2 pad 1 64ch 56x56", avgpool_case, (batch, 64, 56)
    yield "batch_norm2d 64ch 56x56", batchnorm_case, (batch, 64, 56)
    yield "layer_norm GPT 8*256 rows x 384", layernorm_case, (2 * 256 if quick else 8 * 256,
                                                              384)
    yield "group_norm 64ch 32 groups 56x56", groupnorm_case, (batch, 64, 32, 56)
    yield "adaptive_avg_pool2d 64ch 56x56 -> 7x7", adaptive_avgpool_case, (batch, 64, 56, 7)
    yield "adaptive_avg_pool2d 512ch 7x7 -> 1x1", adaptive_avgpool_case, (batch, 512, 7, 1)
    yield "LSTM 2x256 seq 35 batch 20", lstm_case, (35, 20, 128 if quick else 256)
    yield "LSTM 128->256 proj 64 seq 50 batch 32", lstm_proj_case, (
        50, batch, 128, 128 if quick else 256, 64)
    yield "sdpa b8 h8 seq256 d64", attention_case, (8, 8, 128 if quick else 256, 64)
    # the seq-2048 case at batch 1 (batch 8 takes seconds a step here)
    yield "sdpa b1 h8 seq2048 d64", attention_case, (1, 8, 512 if quick else 2048, 64)


def clock(threads):
    if "--cpu-time" not in sys.argv:
        return time.perf_counter
    return time.thread_time if threads == 1 else time.process_time


def best_times(fns, rounds, now):
    """The best time of each of fns over `rounds` rounds, in which they take
    turns: a burst of load on the machine then slows one round of each,
    not all the rounds of one library."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            start = now()
            fn()
            best[i] = min(best[i], now() - start)
    return best


def main():
    threads = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 1
    quick = "--quick" in sys.argv
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else ""
    ember.set_num_threads(threads)
    if torch is not None:
        torch.set_num_threads(threads)
    now = clock(threads)
    step = "forward" if FORWARD_ONLY else "forward + backward"
    kind = "wall" if now is time.perf_counter else "CPU"
    print(f"layers, {step}, {threads} thread(s); {kind} times in ms (best of rounds)")
    print(f"{'case':40s} {'ember':>9s} {'torch':>9s} {'ratio':>7s}  goal")
    for name, make, args in cases(quick):
        if only not in name:
            continue
        ember.manual_seed(0)
        ours = make(ember, *args)
        ours()
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv \
            else 3 if quick else 5
        if torch is None:
            ember_time, = best_times([ours], rounds, now)
            print(f"{name:40s} {ember_time * 1e3:9.2f} {'-':>9s} {'-':>7s}  (torch not installed)")
            continue
        torch.manual_seed(0)
        theirs = make(torch, *args)
        theirs()
        ember_time, torch_time = best_times([ours, theirs], rounds, now)
        ratio = ember_time / torch_time
        verdict = "met" if ratio <= 1.0 else "missed"
        print(f"{name:40s} {ember_time * 1e3:9.2f} {torch_time * 1e3:9.2f} {ratio:6.2f}x  "
              f"<= 1.0x {verdict}")
        if make is attention_case:
            peak, scores = attention_memory(args)
            print(f"{'':40s} peak extra memory {peak / 2**20:.1f} MiB (inputs' grads "
                  f"included); one L x S score matrix: {scores / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
