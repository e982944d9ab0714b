"""Shared checks for the autograd tests: gradcheck in float64 and parity
with PyTorch's gradients on the same program.

A program is written once as `fn(lib, *tensors)` where `lib` is the ember
or torch module, so `lambda lib, a, b: lib.mul(a, b).sum()` or
`lambda lib, a: a.exp()` runs unchanged on both libraries.
"""

import numpy as np
import pytest

import ember
from ember.autograd import gradcheck, gradgradcheck


def leaf(array, requires_grad=None):
    """An ember leaf over a copy of `array` (strides kept: pass a
    non-contiguous array to get a non-contiguous tensor)."""
    if requires_grad is None:
        requires_grad = array.dtype.kind == "f"
    copy = np.lib.stride_tricks.as_strided(
        np.empty_like(array, order="K"), array.shape, _strides_like(array))
    copy[...] = array
    t = ember.from_numpy(copy)
    return t.requires_grad_() if requires_grad else t


def _strides_like(array):
    # np.empty_like(order="K") keeps the memory order; reuse its strides.
    return np.empty_like(array, order="K").strides


def noncontiguous(array):
    """The same values in a transposed-and-stepped layout."""
    big = np.zeros(array.shape[::-1] + (2,), dtype=array.dtype)
    view = big[..., 0]
    view[...] = array.T
    return view.T


def random_array(rng, shape, dtype=np.float64, low=-1.0, high=1.0):
    return rng.uniform(low, high, size=shape).astype(dtype)


def check_gradcheck(fn, *arrays, gradgrad=False, atol=1e-5, rtol=1e-3, eps=1e-6):
    """gradcheck (and optionally gradgradcheck) of fn(ember, *tensors) in
    float64 at the given points."""
    inputs = tuple(leaf(np.asarray(a, dtype=np.float64) if np.asarray(a).dtype.kind == "f"
                        else np.asarray(a)) for a in arrays)

    def program(*tensors):
        return fn(ember, *tensors)

    assert gradcheck(program, inputs, eps=eps, atol=atol, rtol=rtol)
    if gradgrad:
        assert gradgradcheck(program, inputs, eps=eps, atol=atol, rtol=rtol)


def check_against_torch(fn, *arrays, atol=1e-6, rtol=1e-5, seed=0):
    """Same outputs and same gradients as torch for fn(lib, *tensors),
    backpropagating one random cotangent per floating output."""
    torch = pytest.importorskip("torch")
    ember_inputs = [leaf(a) for a in arrays]
    torch_inputs = [torch.from_numpy(np.array(a)).requires_grad_(a.dtype.kind == "f")
                    for a in arrays]
    ember_out = fn(ember, *ember_inputs)
    torch_out = fn(torch, *torch_inputs)
    ember_outs = ember_out if isinstance(ember_out, (tuple, list)) else (ember_out,)
    torch_outs = torch_out if isinstance(torch_out, (tuple, list)) else (torch_out,)
    assert len(ember_outs) == len(torch_outs)
    rng = np.random.default_rng(seed)
    roots, ember_cots, torch_cots = [], [], []
    for e, t in zip(ember_outs, torch_outs):
        e_values, t_values = np.asarray(e.detach()), t.detach().numpy()
        np.testing.assert_allclose(e_values, t_values, atol=atol, rtol=rtol)
        assert e.requires_grad == t.requires_grad
        if t.requires_grad:
            cot = rng.standard_normal(t_values.shape).astype(t_values.dtype)
            roots.append((e, t))
            ember_cots.append(ember.from_numpy(cot.copy()))
            torch_cots.append(torch.from_numpy(cot.copy()))
    if not roots:
        return
    ember.autograd.backward([e for e, _ in roots], ember_cots)
    torch.autograd.backward([t for _, t in roots], torch_cots)
    for e, t in zip(ember_inputs, torch_inputs):
        if t.grad is None:
            assert e.grad is None or not np.any(np.asarray(e.grad))
            continue
        assert e.grad is not None, "torch has a gradient, ember none"
        assert e.grad.shape == tuple(t.grad.shape)
        assert e.grad.dtype == getattr(ember, str(t.grad.dtype).removeprefix("torch."))
        np.testing.assert_allclose(np.asarray(e.grad), t.grad.numpy(), atol=atol, rtol=rtol)
