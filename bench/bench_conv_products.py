"""Conv2d's three products one by one, ember against PyTorch, one thread:
the forward, the input gradient and the weight gradient of the cases of
bench_layers.py (batch 32, ResNet-18's 3x3 layers and a 5x5 MNIST-style
layer), to see which product a forward + backward loses in.

    PYTHONPATH=python python bench/bench_conv_products.py [--only SUBSTRING]
        [--rounds N] [--wall]

Prints per case and product the best calling-thread CPU time (ms; --wall:
wall time) of each and their ratio ember / torch.  PyTorch's products are
aten.convolution (forward) and aten.convolution_backward with one output
asked for; ember's are its private _C kernels, which the autograd Function
calls.
"""

import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import ember  # noqa: E402
import torch  # noqa: E402
from ember import _C  # noqa: E402

CASES = [  # name, batch, channels, size, kernel
    ("3x3 64ch 56x56", 32, 64, 56, 3),
    ("3x3 128ch 28x28", 32, 128, 28, 3),
    ("3x3 256ch 14x14", 32, 256, 14, 3),
    ("3x3 512ch 7x7", 32, 512, 7, 3),
    ("5x5 32ch 28x28", 32, 32, 28, 5),
]


def ember_products(batch, channels, size, kernel):
    pad = kernel // 2
    geometry = (1, 1, pad, pad, 1, 1, 1)
    x = ember.randn(batch, channels, size, size)
    w = ember.randn(channels, channels, kernel, kernel)
    b = ember.randn(channels)
    g = ember.randn(batch, channels, size, size)
    return {
        "forward": lambda: _C._conv2d(x, w, b, *geometry),
        "grad_input": lambda: _C._conv2d_backward_input(g, w, size, size, *geometry),
        "grad_weight": lambda: _C._conv2d_backward_weight(g, x, kernel, kernel, *geometry),
    }


def torch_products(batch, channels, size, kernel):
    pad = kernel // 2
    x = torch.randn(batch, channels, size, size)
    w = torch.randn(channels, channels, kernel, kernel)
    b = torch.randn(channels)
    g = torch.randn(batch, channels, size, size)
    conv = torch.ops.aten.convolution
    backward = torch.ops.aten.convolution_backward

    def grad(mask):
        return lambda: backward(g, x, w, [channels], [1, 1], [pad, pad], [1, 1], False,
                                [0, 0], 1, mask)
    return {
        "forward": lambda: conv(x, w, b, [1, 1], [pad, pad], [1, 1], False, [0, 0], 1),
        "grad_input": grad([True, False, False]),
        "grad_weight": grad([False, True, False]),
    }


def best_pair(ours, theirs, rounds, now):
    """The best time of each, the two taking turns within each round (a
    noisy machine slows them alike)."""
    ours()
    theirs()
    times = ([], [])
    for _ in range(rounds):
        for fn, out in ((ours, times[0]), (theirs, times[1])):
            start = now()
            fn()
            out.append(now() - start)
    return min(times[0]), min(times[1])


def main():
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else ""
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 5
    now = time.perf_counter if "--wall" in sys.argv else time.thread_time
    ember.set_num_threads(1)
    torch.set_num_threads(1)
    print(f"conv2d products, 1 thread, {'wall' if now is time.perf_counter else 'CPU'} ms")
    print(f"{'case':18s} {'product':12s} {'ember':>8s} {'torch':>8s} {'ratio':>6s}")
    for name, *args in CASES:
        if only not in name:
            continue
        ours, theirs = ember_products(*args), torch_products(*args)
        total = [0.0, 0.0]
        for product in ("forward", "grad_input", "grad_weight"):
            t_ember, t_torch = best_pair(ours[product], theirs[product], rounds, now)
            total[0] += t_ember
            total[1] += t_torch
            print(f"{name:18s} {product:12s} {t_ember * 1e3:8.2f} {t_torch * 1e3:8.2f} "
                  f"{t_ember / t_torch:5.2f}x")
        print(f"{name:18s} {'all three':12s} {total[0] * 1e3:8.2f} {total[1] * 1e3:8.2f} "
              f"{total[0] / total[1]:5.2f}x")


if __name__ == "__main__":
    main()
