"""Autograd speed, side by side with PyTorch in one process, one thread.
`make bench` runs it.

Rows (goals from ember issue 4):
    100-op chain on 1-element tensors, forward with graph   us/op, <= 1.0x PyTorch
    the same chain's backward                               us/op, <= 1.0x PyTorch
    MLP 784-128-10 training step (batch 64, ReLU,
        cross-entropy, SGD)                                 ms/step, <= 0.8x PyTorch
                                                            (issue 15; issue 4 asked 1.0x)
    a + b on 1 element, no grad (what autograd's
        existence costs the C fast path)                    us/call, vs NumPy (no goal:
                                                            compare with issue 3's 0.81x)
Times are the best of many repeats, libraries interleaved so that noise
from a shared machine hits both alike.  Printed as ratios ember / PyTorch.
"""

import gc
import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

import ember  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

CHAIN_LENGTH = 100


def chain(lib, x, w):
    y = x
    for i in range(CHAIN_LENGTH):
        y = y * w if i % 2 else y + w
    return y


def time_chain(lib):
    x = lib.ones(1, requires_grad=True)
    w = lib.full((1,), 1.0001, requires_grad=True)
    start = time.perf_counter()
    y = chain(lib, x, w)
    recorded = time.perf_counter()
    y.backward()
    finished = time.perf_counter()
    return ((recorded - start) / CHAIN_LENGTH * 1e6,
            (finished - recorded) / CHAIN_LENGTH * 1e6)


def make_mlp(lib, seed=0):
    rng = np.random.default_rng(seed)
    model = lib.nn.Sequential(lib.nn.Linear(784, 128), lib.nn.ReLU(), lib.nn.Linear(128, 10))
    optimizer = lib.optim.SGD(model.parameters(), lr=0.01)
    inputs = lib.from_numpy(rng.standard_normal((64, 784)).astype(np.float32))
    targets = lib.from_numpy(rng.integers(0, 10, 64).astype(np.int64))
    return model, optimizer, inputs, targets


def mlp_step(lib, model, optimizer, inputs, targets):
    optimizer.zero_grad()
    loss = lib.nn.functional.cross_entropy(model(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss


def time_mlp_step(lib, state):
    start = time.perf_counter()
    mlp_step(lib, *state)
    return (time.perf_counter() - start) * 1e3


def time_small_add(lib, a, b, calls=2000):
    start = time.perf_counter()
    for _ in range(calls):
        a + b
    return (time.perf_counter() - start) / calls * 1e6


def best(results):
    return {k: min(v) for k, v in results.items()}


def measure(repeats):
    libs = [ember] + ([torch] if torch is not None else [])
    chain_fwd, chain_bwd, mlp, small = {}, {}, {}, {}
    mlp_state, errors = {}, {}
    for lib in libs:
        try:
            mlp_state[lib.__name__] = make_mlp(lib)
            mlp_step(lib, *mlp_state[lib.__name__])  # warm-up
        except Exception as error:  # a missing piece shows as a row, not a crash
            errors[lib.__name__] = f"{type(error).__name__}: {error}"
    small_inputs = {"ember": (ember.ones(1), ember.ones(1)),
                    "numpy": (np.ones(1, dtype=np.float32), np.ones(1, dtype=np.float32))}
    gc.disable()
    try:
        for _ in range(repeats):
            for lib in libs:
                name = lib.__name__
                forward, backward = time_chain(lib)
                chain_fwd.setdefault(name, []).append(forward)
                chain_bwd.setdefault(name, []).append(backward)
                if name in mlp_state:
                    mlp.setdefault(name, []).append(time_mlp_step(lib, mlp_state[name]))
            for name, (a, b) in small_inputs.items():
                small.setdefault(name, []).append(time_small_add(None, a, b))
    finally:
        gc.enable()
    return best(chain_fwd), best(chain_bwd), best(mlp), best(small), errors


def ratio_row(label, unit, values, peer, goal):
    ours, theirs = values.get("ember"), values.get(peer)
    if ours is None:
        return f"{label:<44} ember unavailable"
    if theirs is None:
        return f"{label:<44} ember {ours:8.3f} {unit}  ({peer} unavailable)"
    ratio = ours / theirs
    verdict = "" if goal is None else ("  goal <= %.1fx: %s" % (goal, "met" if ratio <= goal else "missed"))
    return (f"{label:<44} ember {ours:8.3f} {unit}  {peer} {theirs:8.3f} {unit}  "
            f"ratio {ratio:5.2f}x{verdict}")


def main():
    ember.set_num_threads(1)
    if torch is not None:
        torch.set_num_threads(1)
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    chain_fwd, chain_bwd, mlp, small, errors = measure(repeats)
    print(f"autograd, one thread, best of {repeats} (ratio = ember / peer time)")
    print(ratio_row("100-op chain, forward with graph", "us/op", chain_fwd, "torch", 1.0))
    print(ratio_row("100-op chain, backward", "us/op", chain_bwd, "torch", 1.0))
    print(ratio_row("MLP 784-128-10 step (batch 64, SGD)", "ms", mlp, "torch", 0.8))
    print(ratio_row("1-element a + b without grad", "us", small, "numpy", None))
    for name, error in errors.items():
        print(f"  {name} MLP unavailable: {error}")


if __name__ == "__main__":
    main()
