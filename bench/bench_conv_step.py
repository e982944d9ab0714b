"""Where ember's Conv2d layer step (conv(x).sum().backward(), the cases of
bench_layers.py) spends its time: inside the three C products, measured
in the step itself, and outside them (the sum, the expanded gradient made
contiguous, the bias gradient, the accumulation into x.grad, autograd).

    PYTHONPATH=python python bench/bench_conv_step.py [--only SUBSTRING]
        [--rounds N]

Prints per case the calling thread's CPU time (ms) of the round whose step
was fastest: the step, the products' sum and each product, and the rest.
The products are timed by wrapping the entries of _convolution._PRODUCTS,
which the autograd Function calls, so nothing else in the step changes.
One thread; compare the products' columns with bench_conv_products.py
(each product alone) and the step with bench_layers.py --cpu-time.
"""

import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import ember  # noqa: E402
from ember.nn import _convolution  # noqa: E402

from bench_conv_products import CASES  # noqa: E402

PRODUCT_NAMES = ("forward", "input grad", "weight grad")


def timed_products(spent):
    """_PRODUCTS[2] with each product adding its thread CPU time to spent."""
    def timed(name, product):
        def run(*args):
            start = time.thread_time()
            try:
                return product(*args)
            finally:
                spent[name] += time.thread_time() - start
        return run
    return tuple(timed(name, product)
                 for name, product in zip(PRODUCT_NAMES, _convolution._PRODUCTS[2]))


def split_step(batch, channels, size, kernel, rounds):
    """(step, {product: time}) of the fastest of `rounds` steps, in seconds."""
    ember.manual_seed(0)
    conv = ember.nn.Conv2d(channels, channels, kernel, padding=kernel // 2)
    x = ember.randn(batch, channels, size, size, requires_grad=True)
    spent = dict.fromkeys(PRODUCT_NAMES, 0.0)
    untimed = _convolution._PRODUCTS[2]
    _convolution._PRODUCTS[2] = timed_products(spent)
    try:
        conv(x).sum().backward()
        best = (float("inf"), None)
        for _ in range(rounds):
            for name in spent:
                spent[name] = 0.0
            start = time.thread_time()
            conv(x).sum().backward()
            best = min(best, (time.thread_time() - start, dict(spent)), key=lambda r: r[0])
        return best
    finally:
        _convolution._PRODUCTS[2] = untimed


def main():
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else ""
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 5
    ember.set_num_threads(1)
    print("conv2d layer step, one thread; thread CPU time in ms (fastest step of "
          f"{rounds})")
    print(f"{'case':18s} {'step':>8s} {'products':>9s} "
          + " ".join(f"{name:>11s}" for name in PRODUCT_NAMES) + f" {'outside':>8s}")
    for name, *shape in CASES:
        if only not in name:
            continue
        step, products = split_step(*shape, rounds)
        inside = sum(products.values())
        print(f"{name:18s} {step * 1e3:8.2f} {inside * 1e3:9.2f} "
              + " ".join(f"{products[p] * 1e3:11.2f}" for p in PRODUCT_NAMES)
              + f" {(step - inside) * 1e3:8.2f}")


if __name__ == "__main__":
    main()
