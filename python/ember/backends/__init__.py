"""ember.backends: the switches PyTorch programs set on their backends.

PyTorch's torch.backends holds flags for the libraries behind its kernels
(cuDNN, cuBLAS, MPS, oneDNN).  ember's CPU kernels are its own and always
compute float32 products in float32, deterministically, so these flags
change nothing here; they exist, with PyTorch's names and defaults, so a
program that sets them (`cudnn.benchmark = True` is in most training
scripts) runs unchanged, and reading one back gives what was set.
"""

from . import cpu, cuda, cudnn, mkldnn, mps  # noqa: F401

__all__ = ["cpu", "cuda", "cudnn", "mkldnn", "mps"]
