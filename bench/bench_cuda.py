"""ember.cuda speed on a GPU, side by side with CuPy and PyTorch (issue 14).

Rows (each a ratio; goals from the issue):
    a + b, 256M float32        bandwidth vs CuPy's                >= 0.9x
    sum, 256M float32          bandwidth vs PyTorch CUDA's        >= 0.9x
    a + b, 1 element           launch overhead vs CuPy's          <= 1.0x time
    matmul 4096 float32        vs PyTorch (both cuBLAS)           >= 0.95x
    2*a*a + 3*b - a/(b+1)      the jit's fused kernel (one generated kernel
      on 256M float32          a group) vs torch.compile's     <= 1.0x time
Times are CUDA events around `REPEATS` calls after a warm-up, best of
`ROUNDS`, the contenders interleaved.  Without a GPU (or CuPy) the script
says so and exits 0; PyTorch rows are skipped when torch has no CUDA.

    python bench/bench_cuda.py
"""

import sys

REPEATS = 20
ROUNDS = 5
BIG = 256 * 1024 * 1024


def _gpu_or_reason():
    import ember
    if not ember.cuda.is_available():
        return ember.cuda._probe()[1] or "no GPU"
    return None


def _timer(cupy):
    """Seconds per call of fn, by CUDA events around REPEATS calls."""
    def seconds(fn):
        fn()
        best = float("inf")
        for _ in range(ROUNDS):
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            for _ in range(REPEATS):
                fn()
            stop.record()
            stop.synchronize()
            best = min(best, cupy.cuda.get_elapsed_time(start, stop) / 1000 / REPEATS)
        return best
    return seconds


def _torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def main():
    reason = _gpu_or_reason()
    if reason is not None:
        print(f"bench_cuda: skipped ({reason})")
        return 0
    import cupy

    import ember
    seconds = _timer(cupy)
    torch = _torch_cuda()
    print(f"bench_cuda on {ember.cuda.get_device_name()}")

    a, b = ember.ones(BIG, device="cuda"), ember.ones(BIG, device="cuda")
    ca, cb = cupy.ones(BIG, cupy.float32), cupy.ones(BIG, cupy.float32)
    ours, theirs = seconds(lambda: a + b), seconds(lambda: ca + cb)
    gbs = 3 * 4 * BIG / ours / 1e9
    print(f"a + b 256M float32: {gbs:.0f} GB/s, {theirs / ours:.2f}x CuPy's bandwidth "
          f"(goal >= 0.9x)")
    ours = seconds(lambda: a.sum())
    if torch is not None:
        ta = torch.ones(BIG, device="cuda")
        theirs = seconds(lambda: ta.sum())
        print(f"sum 256M float32: {4 * BIG / ours / 1e9:.0f} GB/s, {theirs / ours:.2f}x "
              f"PyTorch's bandwidth (goal >= 0.9x)")
        del ta
    else:
        print(f"sum 256M float32: {4 * BIG / ours / 1e9:.0f} GB/s (no PyTorch CUDA to compare)")
    del a, b, ca, cb

    one_a, one_b = ember.ones(1, device="cuda"), ember.ones(1, device="cuda")
    c1, c2 = cupy.ones(1, cupy.float32), cupy.ones(1, cupy.float32)
    ours, theirs = seconds(lambda: one_a + one_b), seconds(lambda: c1 + c2)
    print(f"a + b 1 element: {ours * 1e6:.1f} us a call, {ours / theirs:.2f}x CuPy's "
          f"time (goal <= 1.0x)")

    n = 4096
    ma, mb = ember.randn(n, n).cuda(), ember.randn(n, n).cuda()
    ours = seconds(lambda: ma @ mb)
    if torch is not None:
        ta, tb = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
        theirs = seconds(lambda: ta @ tb)
        print(f"matmul 4096 float32: {2 * n ** 3 / ours / 1e12:.1f} TFLOP/s, "
              f"{theirs / ours:.2f}x PyTorch's rate (goal >= 0.95x)")
    else:
        print(f"matmul 4096 float32: {2 * n ** 3 / ours / 1e12:.1f} TFLOP/s "
              "(no PyTorch CUDA to compare)")
    del ma, mb
    _jit_chain(seconds, torch)
    return 0


def _chain(a, b):
    return 2 * a * a + 3 * b - a / (b + 1)


def _jit_chain(seconds, torch):
    import ember
    scripted = ember.jit.script(_chain)
    a, b = ember.rand(BIG, device="cuda"), ember.rand(BIG, device="cuda")
    ours = seconds(lambda: scripted(a, b))
    line = f"jit chain 2*a*a + 3*b - a/(b+1) 256M float32: {ours * 1e3:.2f} ms"
    if torch is None:
        print(line + " (no PyTorch CUDA to compare)")
        return
    ta, tb = torch.rand(BIG, device="cuda"), torch.rand(BIG, device="cuda")
    try:
        compiled, against = torch.compile(_chain), "torch.compile's"
        compiled(ta, tb)
    except Exception:  # no Triton: eager PyTorch, one kernel an op
        compiled, against = _chain, "eager PyTorch's (torch.compile unavailable)"
    theirs = seconds(lambda: compiled(ta, tb))
    print(f"{line}, {ours / theirs:.2f}x {against} time (goal <= 1.0x)")


if __name__ == "__main__":
    sys.exit(main())
