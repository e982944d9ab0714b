"""The C convolution kernels (c/th/THConv.c through _C._conv2d and its two
backward products) checked against NumPy, with the bad arguments and the
re-entrant ones a direct caller can pass.  Small, for the leak gates."""

import numpy as np
import pytest

import ember
from ember import _C


def reference_conv2d(x, w, stride, pad, dilation, groups):
    """The definition, in NumPy loops over output positions."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    x = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    per_group = o // groups
    for oc in range(o):
        g = oc // per_group
        for y in range(oh):
            for xx in range(ow):
                ys, xs = y * stride[0], xx * stride[1]
                patch = x[:, g * cg:(g + 1) * cg,
                          ys:ys + dilation[0] * (kh - 1) + 1:dilation[0],
                          xs:xs + dilation[1] * (kw - 1) + 1:dilation[1]]
                out[:, oc, y, xx] = (patch * w[oc]).sum(axis=(1, 2, 3))
    return out


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("geometry", [((1, 1), (0, 0), (1, 1), 1), ((2, 1), (1, 0), (1, 2), 2)])
def test_forward_and_backward_products_match_numpy(dtype, geometry):
    stride, pad, dilation, groups = geometry
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 6, 5)).astype(dtype)
    w = rng.standard_normal((4, 4 // groups, 3, 2)).astype(dtype)
    b = rng.standard_normal(4).astype(dtype)
    ints = (*stride, *pad, *dilation, groups)
    out = _C._conv2d(ember.tensor(x), ember.tensor(w), ember.tensor(b), *ints).numpy()
    expected = reference_conv2d(x.astype(np.float64), w.astype(np.float64), stride, pad,
                                dilation, groups) + b.reshape(1, -1, 1, 1)
    tolerance = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, expected, rtol=tolerance, atol=tolerance)
    # The backward products are the adjoints of the forward one:
    # <conv(x, w), g> = <x, backward_input(g, w)> = <w, backward_weight(g, x)>.
    g = rng.standard_normal(out.shape).astype(dtype)
    plain = _C._conv2d(ember.tensor(x), ember.tensor(w), None, *ints).numpy()
    grad_x = _C._conv2d_backward_input(ember.tensor(g), ember.tensor(w), 6, 5, *ints).numpy()
    grad_w = _C._conv2d_backward_weight(ember.tensor(g), ember.tensor(x), 3, 2, *ints).numpy()
    inner = (plain.astype(np.float64) * g).sum()
    np.testing.assert_allclose((x.astype(np.float64) * grad_x).sum(), inner, rtol=tolerance)
    np.testing.assert_allclose((w.astype(np.float64) * grad_w).sum(), inner, rtol=tolerance)


def test_direct_path_and_empty_batch():
    x = ember.ones(0, 2, 3, 3)
    w = ember.ones(3, 2, 1, 1)
    assert _C._conv2d(x, w, None, 1, 1, 0, 0, 1, 1, 1).shape == (0, 3, 3, 3)
    grad_w = _C._conv2d_backward_weight(ember.ones(0, 3, 3, 3), x, 1, 1, 1, 1, 0, 0, 1, 1, 1)
    assert grad_w.tolist() == np.zeros((3, 2, 1, 1)).tolist()
    ones = _C._conv2d(ember.ones(1, 2, 2, 2), w, None, 1, 1, 0, 0, 1, 1, 1)
    assert ones.tolist() == np.full((1, 3, 2, 2), 2.0).tolist()


@pytest.mark.parametrize("call, error, match", [
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3), ember.ones(1, 2, 1, 1), None), TypeError,
     "takes 10 arguments"),
    (lambda: _C._conv2d([1], ember.ones(1, 2, 1, 1), None, 1, 1, 0, 0, 1, 1, 1), TypeError,
     "must be Tensor"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3), ember.ones(1, 2, 1, 1), 3, 1, 1, 0, 0, 1, 1, 1),
     TypeError, "must be Tensor"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3).transpose(2, 3).contiguous().transpose(2, 3),
                        ember.ones(1, 2, 1, 1), None, 1, 1, 0, 0, 1, 1, 1),
     RuntimeError, "contiguous"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3, dtype=ember.int64),
                        ember.ones(1, 2, 1, 1, dtype=ember.int64), None, 1, 1, 0, 0, 1, 1, 1),
     RuntimeError, "float32 or float64"),
    (lambda: _C._conv2d(ember.ones(1, 3, 3, 3), ember.ones(1, 2, 1, 1), None, 1, 1, 0, 0, 1, 1, 1),
     RuntimeError, "channels and groups"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3), ember.ones(1, 2, 5, 1), None, 1, 1, 0, 0, 1, 1, 1),
     RuntimeError, "larger than the padded input"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3), ember.ones(1, 2, 1, 1), ember.ones(2), 1, 1, 0, 0,
                        1, 1, 1), RuntimeError, "bad bias"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3), ember.ones(1, 2, 1, 1), None, 0, 1, 0, 0, 1, 1, 1),
     RuntimeError, "stride and dilation must be positive"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3), ember.ones(1, 2, 1, 1), None, 1, 1, 0, 0, 1, 1, 0),
     RuntimeError, "groups must be positive"),
    (lambda: _C._conv2d_backward_input(ember.ones(1, 1, 2, 2), ember.ones(1, 2, 1, 1), 3, 3, 1, 1,
                                       0, 0, 1, 1, 1), RuntimeError, "wrong shape"),
    (lambda: _C._conv2d_backward_weight(ember.ones(1, 1, 2, 2), ember.ones(1, 3, 3, 3), 1, 1, 1, 1,
                                        0, 0, 1, 1, 2), RuntimeError, "groups must divide"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3), ember.ones(1, 2, 1, 1), None, 1, 1, 0, 0, 1, 1,
                        2**70), RuntimeError, "Overflow when unpacking long"),
])
def test_bad_arguments_raise(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_an_index_that_rebinds_the_input_sees_the_pinned_tensor():
    """An int argument's __index__ runs Python after the tensors were passed:
    the kernel must read the tensors the call was made with."""
    x = ember.ones(1, 1, 3, 3)
    w = ember.ones(1, 1, 2, 2)

    class Rebinding:
        def __index__(self):
            x.data = ember.zeros(1, 1, 1, 1)   # frees the old THTensor unless pinned
            return 1

    out = _C._conv2d(x, w, None, Rebinding(), 1, 0, 0, 1, 1, 1)
    assert out.tolist() == np.full((1, 1, 2, 2), 4.0).tolist()
