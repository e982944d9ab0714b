"""DataLoader speed, side by side with PyTorch (torch.utils.data).

Rows (goal from ember issue 13):
    DataLoader over a TensorDataset, batch 64, 2 workers   batches/s, >= 1.0x PyTorch
    the same in the main process (num_workers=0)            batches/s, no goal
One epoch of 4096 CIFAR-sized samples (3x32x32 float32 and an int64 label),
worker start-up included, as a training loop sees it.  Best of a few
epochs, libraries interleaved so that noise from a shared machine hits both
alike.  Printed as ratios ember / PyTorch of batches per second (higher is
better for ember).
"""

import os
import sys
import time

os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

import ember  # noqa: E402
import ember.utils.data  # noqa: E402

try:
    import torch
    import torch.utils.data  # noqa: F401
except ImportError:
    torch = None

SAMPLES = 4096
BATCH_SIZE = 64


def make_dataset(lib):
    rng = np.random.default_rng(0)
    images = rng.standard_normal((SAMPLES, 3, 32, 32)).astype(np.float32)
    labels = rng.integers(0, 10, SAMPLES).astype(np.int64)
    return lib.utils.data.TensorDataset(lib.from_numpy(images), lib.from_numpy(labels))


def batches_per_second(lib, dataset, num_workers):
    loader = lib.utils.data.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True,
                                       num_workers=num_workers)
    start = time.perf_counter()
    count = 0
    for images, labels in loader:
        count += 1
    elapsed = time.perf_counter() - start
    assert count == SAMPLES // BATCH_SIZE and images.shape[0] == BATCH_SIZE
    return count / elapsed


def measure(repeats):
    libs = [ember] + ([torch] if torch is not None else [])
    datasets = {lib.__name__: make_dataset(lib) for lib in libs}
    results = {0: {}, 2: {}}
    for _ in range(repeats):
        for num_workers in results:
            for lib in libs:
                rate = batches_per_second(lib, datasets[lib.__name__], num_workers)
                results[num_workers].setdefault(lib.__name__, []).append(rate)
    return {w: {name: max(rates) for name, rates in r.items()} for w, r in results.items()}


def ratio_row(label, values, goal):
    ours, theirs = values["ember"], values.get("torch")
    if theirs is None:
        return f"{label:<44} ember {ours:8.1f} batches/s  (torch unavailable)"
    ratio = ours / theirs
    verdict = "" if goal is None else (
        "  goal >= %.1fx: %s" % (goal, "met" if ratio >= goal else "missed"))
    return (f"{label:<44} ember {ours:8.1f} batches/s  torch {theirs:8.1f} batches/s  "
            f"ratio {ratio:5.2f}x{verdict}")


def main():
    ember.set_num_threads(1)
    if torch is not None:
        torch.set_num_threads(1)
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    results = measure(repeats)
    print(f"DataLoader, {SAMPLES} samples of 3x32x32, best of {repeats} epochs "
          f"(ratio = ember / torch batches per second)")
    print(ratio_row("TensorDataset, batch 64, 2 workers", results[2], 1.0))
    print(ratio_row("TensorDataset, batch 64, main process", results[0], None))


if __name__ == "__main__":
    main()
