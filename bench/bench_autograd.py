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
    the MLP step, and a 256-512-512-10 one (batch 128),
        on every CPU (both libraries' default thread
        count)                                              ms/step, <= 1.0x PyTorch
                                                            (issue 15: no training step
                                                            slower than PyTorch's; what
                                                            the worker pool's hand-off
                                                            costs, Note [Workers poll
                                                            before they sleep])
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


def make_mlp(lib, widths=(784, 128, 10), batch=64, seed=0):
    rng = np.random.default_rng(seed)
    layers = []
    for fan_in, fan_out in zip(widths[:-1], widths[1:]):
        layers += [lib.nn.Linear(fan_in, fan_out), lib.nn.ReLU()]
    model = lib.nn.Sequential(*layers[:-1])
    optimizer = lib.optim.SGD(model.parameters(), lr=0.01)
    inputs = lib.from_numpy(rng.standard_normal((batch, widths[0])).astype(np.float32))
    targets = lib.from_numpy(rng.integers(0, widths[-1], batch).astype(np.int64))
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


ALL_CPUS_MLPS = {"MLP 784-128-10 step (batch 64, SGD)": ((784, 128, 10), 64),
                 "MLP 256-512-512-10 step (batch 128, SGD)": ((256, 512, 512, 10), 128)}


def measure_all_cpus(repeats, steps=10):
    """ms per step of each ALL_CPUS_MLPS model, both libraries at
    os.cpu_count() threads (their default): the best of `repeats` blocks of
    `steps` steps.  Each block follows one untimed step, so that the other
    library's threads, still polling for work after its own block (both
    pools do), have gone quiet: the two libraries share this process's
    CPUs, a user's program runs one of them."""
    threads = os.cpu_count() or 1
    libs = [ember] + ([torch] if torch is not None else [])
    for lib in libs:
        lib.set_num_threads(threads)
    times = {label: {} for label in ALL_CPUS_MLPS}
    try:
        states = {(label, lib): make_mlp(lib, widths, batch)
                  for label, (widths, batch) in ALL_CPUS_MLPS.items() for lib in libs}
        for _ in range(max(1, repeats // steps)):
            for (label, lib), state in states.items():
                mlp_step(lib, *state)
                start = time.perf_counter()
                for _ in range(steps):
                    mlp_step(lib, *state)
                times[label].setdefault(lib.__name__, []).append(
                    (time.perf_counter() - start) / steps * 1e3)
    finally:
        for lib in libs:
            lib.set_num_threads(1)
    return threads, {label: best(values) for label, values in times.items()}


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
    threads, all_cpus = measure_all_cpus(repeats * 2)
    print(f"on every CPU ({threads} threads each)")
    for label, values in all_cpus.items():
        print(ratio_row(label, "ms", values, "torch", 1.0))
    for name, error in errors.items():
        print(f"  {name} MLP unavailable: {error}")


if __name__ == "__main__":
    main()
