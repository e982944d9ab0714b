"""ember.backends.cpu: what the CPU offers ember's kernels."""

from .. import _C

# ember's GEMM family -> PyTorch's name for the capability.
_CAPABILITY_OF_KERNEL = {"avx512": "AVX512", "avx2": "AVX2", "generic": "DEFAULT"}


def get_cpu_capability():
    """The vector instruction set ember's GEMM uses on this CPU, in PyTorch's
    names ("AVX512", "AVX2" or "DEFAULT")."""
    return _CAPABILITY_OF_KERNEL[_C._gemm_kernel()]
