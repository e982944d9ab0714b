"""`make gpu-check`: every GPU test in one run, with one summary.

    python tools/gpu_check.py

Runs the CUDA test files (the kernel sources' NVRTC and CPU-emulation checks,
and the host side with its tests that need a GPU) and prints one summary:
the device found (or why none), the tests passed/failed/skipped, and each
GPU benchmark's ratio.  On a machine with a GPU a skipped GPU test counts as
a failure (EMBER_REQUIRE_GPU=1), so a broken CuPy install cannot pass by
skipping everything.  Exit status: 0 when nothing failed.
"""

import os
import subprocess
import sys

import ember

CUDA_TESTS = ["tests/test_cuda_host.py", "tests/test_cuda_kernels.py",
              "tests/test_cuda_binary_reduce_kernels.py", "tests/test_cuda_reduce_scan_kernels.py",
              "tests/test_cuda_launcher.py", "tests/test_cuda_indexing.py",
              "tests/test_cuda_index_ops.py", "tests/test_cuda_half.py",
              "tests/test_cuda_half_reductions.py", "tests/test_cuda_casts.py"]
GPU_BENCHMARKS = ["bench/bench_cuda.py"]


def device_line():
    if ember.cuda.is_available():
        return f"device: {ember.cuda.get_device_name()} ({ember.cuda.device_count()} visible)"
    try:
        ember.empty(1, device="cuda")
    except RuntimeError as error:
        return f"device: none ({str(error).splitlines()[0]})"
    return "device: none"


def main():
    env = dict(os.environ, PYTHONPATH="python")
    if ember.cuda.is_available():
        env["EMBER_REQUIRE_GPU"] = "1"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          *CUDA_TESTS], env=env, capture_output=True, text=True)
    sys.stdout.write(run.stdout[-4000:])
    lines = run.stdout.strip().splitlines()
    tests = lines[-1].strip("= ") if lines else "no pytest output"
    print("== gpu-check summary")
    print("  " + device_line())
    print(f"  tests: {tests}")
    status = run.returncode
    for name in GPU_BENCHMARKS:
        bench = subprocess.run([sys.executable, name], env=env, capture_output=True, text=True)
        for line in (bench.stdout + bench.stderr[-2000:]).strip().splitlines():
            print(f"  {line}")
        status = status or bench.returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
