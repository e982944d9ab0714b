"""The same values as an ember tensor and a torch tensor, and their
comparison: shared by the layer suites that check ember against PyTorch
(import after torch is known to be installed)."""

import numpy as np
import torch

import ember

# (ember dtype, torch dtype, NumPy dtype), float64 first
DTYPES = [(ember.float64, torch.float64, np.float64), (ember.float32, torch.float32, np.float32)]
DTYPE_IDS = ["float64", "float32"]


def pair(array, dtypes=DTYPES[0], requires_grad=True):
    """(ember tensor, torch tensor) holding `array` in the dtypes given."""
    ours_dtype, theirs_dtype, numpy_dtype = dtypes
    array = np.asarray(array, dtype=numpy_dtype)
    return (ember.tensor(array, dtype=ours_dtype, requires_grad=requires_grad),
            torch.tensor(array, dtype=theirs_dtype, requires_grad=requires_grad))


def check_same(ours, theirs, rtol=1e-10, atol=1e-12):
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(),
                               rtol=rtol, atol=atol)


def tolerance(dtypes):
    """check_same's tolerances for a dtype pair: tight in float64."""
    return dict(rtol=1e-10, atol=1e-12) if dtypes[0] == ember.float64 else \
        dict(rtol=1e-5, atol=1e-6)
