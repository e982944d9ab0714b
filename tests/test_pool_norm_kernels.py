"""The C kernels of max/avg pooling (c/th/THPool.c) and batch norm
(c/th/THNorm.c) behind ember.nn.functional: against NumPy written from the
definitions (Note [Pooling windows], Note [Batch norm in three kernels]),
over Hypothesis-drawn shapes and parameters, float64 and float32;
gradchecks and gradgradchecks; PyTorch's indices, NaN handling and error
messages where torch is installed; the private _C entry points refuse bad
arguments with exceptions, not crashes."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

import ember
import ember.nn.functional as F
from ember import _C
from ember.autograd import gradcheck, gradgradcheck

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


# ---- NumPy references ------------------------------------------------------------

def out_size(size, kernel, stride, pad, dilation, ceil_mode):
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def max_pool_reference(x, kernel, stride, pad, dilation, ceil_mode):
    """(values, indices): the first largest tap of each window, a NaN winning
    (the last NaN kept), indices flat per plane; a window of no input
    element gives -inf at PyTorch's index: its first tap at or after 0."""
    n, c, h, w = x.shape
    oh, ow = (out_size(s, k, st_, p, d, ceil_mode)
              for s, k, st_, p, d in zip((h, w), kernel, stride, pad, dilation))
    values = np.empty((n, c, oh, ow), x.dtype)
    indices = np.empty((n, c, oh, ow), np.int64)
    for y in range(oh):
        for xx in range(ow):
            rows = [y * stride[0] - pad[0] + i * dilation[0] for i in range(kernel[0])]
            cols = [xx * stride[1] - pad[1] + j * dilation[1] for j in range(kernel[1])]
            taps = [(r, q) for r in rows if 0 <= r < h for q in cols if 0 <= q < w]
            first = [t[0] + -(-max(-t[0], 0) // d) * d for t, d in ((rows, dilation[0]),
                                                                    (cols, dilation[1]))]
            best = np.full((n, c), -np.inf, x.dtype)
            where = np.full((n, c), first[0] * w + first[1], np.int64)
            for r, q in taps:
                v = x[:, :, r, q]
                wins = (v > best) | np.isnan(v)
                best = np.where(wins, v, best)
                where = np.where(wins, r * w + q, where)
            values[:, :, y, xx], indices[:, :, y, xx] = best, where
    return values, indices


def avg_pool_reference(x, kernel, stride, pad, ceil_mode, count_include_pad, divisor):
    n, c, h, w = x.shape
    oh, ow = (out_size(s, k, st_, p, 1, ceil_mode)
              for s, k, st_, p in zip((h, w), kernel, stride, pad))
    out = np.zeros((n, c, oh, ow), np.float64)
    for y in range(oh):
        for xx in range(ow):
            top, left = y * stride[0] - pad[0], xx * stride[1] - pad[1]
            bottom, right = min(top + kernel[0], h + pad[0]), min(left + kernel[1], w + pad[1])
            padded = (bottom - top) * (right - left)
            top, left, bottom, right = max(top, 0), max(left, 0), min(bottom, h), min(right, w)
            if top >= bottom or left >= right:
                continue
            window = x[:, :, top:bottom, left:right].astype(np.float64)
            size = divisor or (padded if count_include_pad else window[0, 0].size)
            out[:, :, y, xx] = window.sum((2, 3)) / size
    return out


def batch_norm_reference(x, weight, bias, mean, var, eps):
    shape = [1, -1] + [1] * (x.ndim - 2)
    out = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    return out * weight.reshape(shape) + bias.reshape(shape)


def tolerance(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


# ---- Hypothesis strategies -------------------------------------------------------

@st.composite
def pool_cases(draw, with_dilation=True):
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) if with_dilation else (1, 1)
    pad = tuple(draw(st.integers(0, k // 2)) for k in kernel)   # PyTorch's bound
    ceil_mode = draw(st.booleans())
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 7)),
             draw(st.integers(1, 7)))
    sizes = [out_size(s, k, st_, p, d, ceil_mode)
             for s, k, st_, p, d in zip(shape[2:], kernel, stride, pad, dilation)]
    assume(all(o > 0 for o in sizes))
    return shape, kernel, stride, pad, dilation, ceil_mode


def random_input(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ---- max pooling -------------------------------------------------------------------

@given(pool_cases(), st.sampled_from([np.float64, np.float32]))
def test_max_pool2d_matches_the_definition(case, dtype):
    shape, kernel, stride, pad, dilation, ceil_mode = case
    x = random_input(shape, dtype)
    values, indices = F.max_pool2d(ember.tensor(x), kernel, stride, pad, dilation, ceil_mode,
                                   return_indices=True)
    want_values, want_indices = max_pool_reference(x, kernel, stride, pad, dilation, ceil_mode)
    np.testing.assert_array_equal(values.numpy(), want_values)
    np.testing.assert_array_equal(indices.numpy(), want_indices)


@given(pool_cases())
def test_max_pool2d_backward_scatters_by_index(case):
    shape, kernel, stride, pad, dilation, ceil_mode = case
    x = ember.tensor(random_input(shape, np.float64), requires_grad=True)
    values, indices = F.max_pool2d(x, kernel, stride, pad, dilation, ceil_mode,
                                   return_indices=True)
    grad = random_input(tuple(values.shape), np.float64, seed=1)
    values.backward(ember.tensor(grad))
    want = np.zeros((shape[0] * shape[1], shape[2] * shape[3]))
    flat_indices = indices.numpy().reshape(len(want), -1)
    for plane, (where, g) in enumerate(zip(flat_indices, grad.reshape(len(want), -1))):
        inside = where < want.shape[1]     # an empty window's index names nothing
        np.add.at(want[plane], where[inside], g[inside])
    np.testing.assert_allclose(x.grad.numpy(), want.reshape(shape), rtol=1e-12, atol=1e-12)


def test_max_pool2d_nan_wins_and_minus_inf_keeps_the_first_tap():
    x = np.array([[[[1.0, np.nan, 3.0, np.nan], [-np.inf, -np.inf, 0.0, 2.0]]]])
    values, indices = F.max_pool2d(ember.tensor(x), 2, return_indices=True)
    assert np.isnan(values.numpy()[0, 0, 0, 0]) and indices.numpy()[0, 0, 0, 0] == 1
    assert np.isnan(values.numpy()[0, 0, 0, 1]) and indices.numpy()[0, 0, 0, 1] == 3
    all_low = np.full((1, 1, 2, 2), -np.inf)
    values, indices = F.max_pool2d(ember.tensor(all_low), 2, return_indices=True)
    assert values.item() == -np.inf and indices.item() == 0


def test_max_pool2d_empty_dilated_window():
    """Width 1, kernel 2, dilation 2, padding 1: both taps are padding.  The
    value is -inf, the index PyTorch's (1, outside the plane), and neither
    backward nor double backward reads or writes there."""
    x = ember.tensor(random_input((1, 2, 1, 1), np.float64), requires_grad=True)
    values, indices = F.max_pool2d(x, (1, 2), 1, (0, 1), (1, 2), return_indices=True)
    assert np.all(values.detach().numpy() == -np.inf) and np.all(indices.numpy() == 1)
    grad_output = ember.ones(tuple(values.shape), dtype=ember.float64, requires_grad=True)
    (grad,) = ember.autograd.grad(values, x, grad_output, create_graph=True)
    np.testing.assert_array_equal(grad.detach().numpy(), np.zeros((1, 2, 1, 1)))
    (grad_grad,) = ember.autograd.grad(grad.sum(), grad_output)
    np.testing.assert_array_equal(grad_grad.numpy(), np.zeros((1, 2, 1, 1)))


def test_max_pool_1d_and_unbatched_forms_use_the_kernel():
    x = random_input((2, 3, 9), np.float64)
    values, indices = F.max_pool1d(ember.tensor(x), 3, 2, 1, return_indices=True)
    want_values, want_indices = max_pool_reference(x[:, :, None, :], (1, 3), (1, 2), (0, 1),
                                                   (1, 1), False)
    np.testing.assert_array_equal(values.numpy(), want_values[:, :, 0])
    np.testing.assert_array_equal(indices.numpy(), want_indices[:, :, 0])
    unbatched = F.max_pool2d(ember.tensor(x[0][None]), 2)
    assert tuple(unbatched.shape) == (1, 1, 4)


def test_max_pool2d_integer_input_takes_the_composite():
    x = np.arange(32).reshape(1, 2, 4, 4)
    values = F.max_pool2d(ember.tensor(x), 2)
    assert values.dtype == ember.int64
    np.testing.assert_array_equal(values.numpy(), max_pool_reference(
        x.astype(np.float64), (2, 2), (2, 2), (0, 0), (1, 1), False)[0])


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16])
def test_pooling_half_dtypes_run_in_float32(dtype):
    x = ember.randn(2, 3, 6, 6).to(dtype)
    want = F.max_pool2d(x.float(), 3, 2, 1).to(dtype)
    np.testing.assert_array_equal(F.max_pool2d(x, 3, 2, 1).float().numpy(), want.float().numpy())
    want = F.avg_pool2d(x.float(), 3, 2, 1).to(dtype)
    np.testing.assert_array_equal(F.avg_pool2d(x, 3, 2, 1).float().numpy(), want.float().numpy())


def test_max_pool2d_gradcheck_and_gradgradcheck():
    x = ember.tensor(random_input((2, 2, 5, 6), np.float64), requires_grad=True)
    pool = lambda t: F.max_pool2d(t, (2, 3), (2, 1), (1, 1), (1, 2), True)  # noqa: E731
    assert gradcheck(pool, (x,))
    assert gradgradcheck(pool, (x,))


# ---- average pooling ----------------------------------------------------------------

@given(pool_cases(with_dilation=False), st.booleans(), st.sampled_from([None, 1, 5]),
       st.sampled_from([np.float64, np.float32]))
def test_avg_pool2d_matches_the_definition(case, count_include_pad, divisor, dtype):
    shape, kernel, stride, pad, _, ceil_mode = case
    x = random_input(shape, dtype)
    out = F.avg_pool2d(ember.tensor(x), kernel, stride, pad, ceil_mode, count_include_pad,
                       divisor)
    want = avg_pool_reference(x, kernel, stride, pad, ceil_mode, count_include_pad, divisor)
    np.testing.assert_allclose(out.numpy(), want, **tolerance(dtype))


@given(pool_cases(with_dilation=False), st.booleans(), st.sampled_from([None, 3]))
def test_avg_pool2d_backward_is_the_forward_adjoint(case, count_include_pad, divisor):
    """<avg_pool(x), g> = <x, grad_input(g)>: the backward is the forward's
    transpose."""
    shape, kernel, stride, pad, _, ceil_mode = case
    x = ember.tensor(random_input(shape, np.float64), requires_grad=True)
    out = F.avg_pool2d(x, kernel, stride, pad, ceil_mode, count_include_pad, divisor)
    g = random_input(tuple(out.shape), np.float64, seed=1)
    out.backward(ember.tensor(g))
    inner = float((out.detach().numpy() * g).sum())
    assert math.isclose(float((x.detach().numpy() * x.grad.numpy()).sum()), inner,
                        rel_tol=1e-10, abs_tol=1e-10)


def test_avg_pool2d_gradcheck_and_gradgradcheck():
    x = ember.tensor(random_input((2, 2, 5, 6), np.float64), requires_grad=True)
    pool = lambda t: F.avg_pool2d(t, 3, 2, 1, True, False)  # noqa: E731
    assert gradcheck(pool, (x,))
    assert gradgradcheck(pool, (x,))
    assert gradcheck(lambda t: F.avg_pool1d(t, 2, 1, 1), (x[0],))


# ---- batch norm -----------------------------------------------------------------------

@st.composite
def norm_cases(draw):
    dims = draw(st.integers(2, 4))
    shape = [draw(st.integers(2, 4)), draw(st.integers(1, 3))]
    shape += [draw(st.integers(1, 5)) for _ in range(dims - 2)]
    return tuple(shape), draw(st.booleans()), draw(st.booleans())


@given(norm_cases(), st.sampled_from([np.float64, np.float32]))
def test_batch_norm_matches_the_definition(case, dtype):
    shape, training, affine = case
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(shape) * 3 + 100).astype(dtype)  # a large mean: two passes
    channels = shape[1]
    weight = rng.uniform(0.5, 1.5, channels).astype(dtype) if affine else None
    bias = rng.standard_normal(channels).astype(dtype) if affine else None
    running_mean, running_var = rng.standard_normal(channels), rng.uniform(1, 2, channels)
    ours_mean = ember.tensor(running_mean.astype(dtype))
    ours_var = ember.tensor(running_var.astype(dtype))
    out = F.batch_norm(ember.tensor(x), ours_mean, ours_var,
                       None if weight is None else ember.tensor(weight),
                       None if bias is None else ember.tensor(bias), training, 0.25, 1e-3)
    dims = tuple(d for d in range(len(shape)) if d != 1)
    x64 = x.astype(np.float64)
    mean, var = (x64.mean(dims), x64.var(dims)) if training else (running_mean, running_var)
    ones, zeros = np.ones(channels), np.zeros(channels)
    want = batch_norm_reference(x64, ones if weight is None else weight.astype(np.float64),
                                zeros if bias is None else bias.astype(np.float64), mean,
                                var, 1e-3)
    loose = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else tolerance(dtype)
    np.testing.assert_allclose(out.numpy(), want, **loose)
    if training:
        count = x.size // channels
        np.testing.assert_allclose(ours_mean.numpy(), 0.75 * running_mean + 0.25 * mean,
                                   **loose)
        np.testing.assert_allclose(ours_var.numpy(),
                                   0.75 * running_var + 0.25 * var * count / (count - 1),
                                   **loose)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(4, 3), (3, 2, 5), (2, 3, 3, 4)])
def test_batch_norm_gradcheck_and_gradgradcheck(training, shape):
    rng = np.random.default_rng(1)
    x = ember.tensor(rng.standard_normal(shape), requires_grad=True)
    weight = ember.tensor(rng.uniform(0.5, 1.5, shape[1]), requires_grad=True)
    bias = ember.tensor(rng.standard_normal(shape[1]), requires_grad=True)
    running = (ember.tensor(rng.standard_normal(shape[1])),
               ember.tensor(rng.uniform(1, 2, shape[1])))

    def norm(x, weight, bias):
        return F.batch_norm(x, *(r.clone() for r in running), weight, bias, training, 0.1,
                            1e-5)
    assert gradcheck(norm, (x, weight, bias))
    assert gradgradcheck(norm, (x, weight, bias))
    assert gradcheck(lambda x: F.batch_norm(x, None, None, training=True), (x,))


def test_batch_norm_kernel_and_composite_agree():
    """A float64 parameter with a float32 input takes the composite."""
    rng = np.random.default_rng(2)
    x = ember.tensor(rng.standard_normal((4, 3, 5)), requires_grad=True)
    weight = ember.tensor(rng.uniform(0.5, 1.5, 3), requires_grad=True)
    out = F.batch_norm(x, None, None, weight, None, True)
    g = ember.tensor(rng.standard_normal((4, 3, 5)))
    grads = ember.autograd.grad(out, (x, weight), g)
    from ember.nn.functional import _channel_moments
    mean, var = _channel_moments(x, [0, 2])
    composite = (x - mean) * ember.rsqrt(var + 1e-5) * weight.reshape(1, 3, 1)
    want = ember.autograd.grad(composite, (x, weight), g)
    np.testing.assert_allclose(out.detach().numpy(), composite.detach().numpy(), atol=1e-12)
    for ours, theirs in zip(grads, want):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), atol=1e-12)


# ---- against PyTorch ---------------------------------------------------------------------

@needs_torch
@given(pool_cases(), st.sampled_from([np.float64, np.float32]))
def test_max_pool2d_as_torch(case, dtype):
    shape, kernel, stride, pad, dilation, ceil_mode = case
    x = random_input(shape, dtype)
    x.flat[::3] = np.nan if shape[3] % 2 else x.flat[::3]   # NaN handling too
    ours = F.max_pool2d(ember.tensor(x), kernel, stride, pad, dilation, ceil_mode, True)
    theirs = torch.nn.functional.max_pool2d(torch.tensor(x), kernel, stride, pad, dilation,
                                            ceil_mode, True)
    np.testing.assert_array_equal(ours[0].numpy(), theirs[0].numpy())
    np.testing.assert_array_equal(ours[1].numpy(), theirs[1].numpy())


@needs_torch
@given(pool_cases(with_dilation=False), st.booleans(), st.sampled_from([None, 2]))
def test_avg_pool2d_as_torch(case, count_include_pad, divisor):
    shape, kernel, stride, pad, _, ceil_mode = case
    x = random_input(shape, np.float32)
    args = (kernel, stride, pad, ceil_mode, count_include_pad, divisor)
    ours_x = ember.tensor(x, requires_grad=True)
    theirs_x = torch.tensor(x, requires_grad=True)
    ours, theirs = F.avg_pool2d(ours_x, *args), torch.nn.functional.avg_pool2d(theirs_x, *args)
    np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())
    ours.sum().backward()
    theirs.sum().backward()
    np.testing.assert_array_equal(ours_x.grad.numpy(), theirs_x.grad.numpy())


@needs_torch
@pytest.mark.parametrize("call", [
    lambda F: F.max_pool2d(FAKE(F, (1, 1, 4, 4)), 2, padding=2),
    lambda F: F.max_pool2d(FAKE(F, (1, 1, 4, 4)), (1, 3), padding=(0, 2), dilation=2),
    lambda F: F.max_pool1d(FAKE(F, (1, 2, 6)), 3, 1, 2, 2),
    lambda F: F.max_pool1d(FAKE(F, (1, 2, 6)), 3, 1, 2, 2, return_indices=True),
    lambda F: F.avg_pool2d(FAKE(F, (1, 1, 4, 4)), 3, padding=2),
    lambda F: F.max_pool2d(FAKE(F, (1, 1, 1, 1)), 3),
    lambda F: F.avg_pool2d(FAKE(F, (1, 1, 1, 1)), 3),
    lambda F: F.avg_pool2d(FAKE(F, (1, 1, 4, 4)), 2, divisor_override=0),
    lambda F: F.max_pool2d(FAKE(F, (1, 1, 4, 4)), 2, dilation=0),
    lambda F: F.max_pool2d(FAKE(F, (1, 1, 4, 4)), 2, stride=0),
    lambda F: F.batch_norm(FAKE(F, (1, 3)), None, None, training=True),
    lambda F: F.batch_norm(FAKE(F, (2, 3)), None, None, training=False),
    lambda F: F.batch_norm(FAKE(F, (2, 3)), FAKE(F, (3,)), None, training=False),
])
def test_errors_as_torch(call):
    with pytest.raises(Exception) as theirs:
        call(torch.nn.functional)
    with pytest.raises(type(theirs.value)) as ours:
        call(F)
    assert str(ours.value) == str(theirs.value).replace("torch.Size", "ember.Size")


def FAKE(module, shape):
    lib = torch if module is torch.nn.functional else ember
    return lib.zeros(shape)


@needs_torch
@pytest.mark.parametrize("shape", [(6, 4), (4, 3, 7), (3, 4, 5, 6)])
def test_batch_norm_module_as_torch(shape):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape)
    ours_norm = getattr(ember.nn, f"BatchNorm{max(len(shape) - 2, 1)}d")(shape[1]).double()
    theirs_norm = getattr(torch.nn, f"BatchNorm{max(len(shape) - 2, 1)}d")(shape[1]).double()
    for ours_x, theirs_x, training in ((x, x, True), (x * 2, x * 2, True), (x, x, False)):
        ours_norm.train(training)
        theirs_norm.train(training)
        a, b = ember.tensor(ours_x, requires_grad=True), torch.tensor(theirs_x, requires_grad=True)
        ours, theirs = ours_norm(a), theirs_norm(b)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), atol=1e-12)
        (ours * ours).sum().backward()
        (theirs * theirs).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-10)
    for name in ("running_mean", "running_var", "weight", "bias"):
        ours_value, theirs_value = getattr(ours_norm, name), getattr(theirs_norm, name)
        np.testing.assert_allclose(ours_value.detach().numpy(),
                                   theirs_value.detach().numpy(), atol=1e-10)
    np.testing.assert_allclose(ours_norm.weight.grad.numpy(), theirs_norm.weight.grad.numpy(),
                               atol=1e-10)


# ---- the private entry points refuse bad arguments -------------------------------------

def test_private_pool_entry_points_refuse_bad_arguments():
    x = ember.zeros(1, 1, 4, 4)
    bad_calls = [
        lambda: _C._max_pool2d(x, 2, 2, 2, 2, 0, 0, 1, 1, 0),                  # arity
        lambda: _C._max_pool2d(x, 2, 2, 2, 2, 3, 0, 1, 1, 0, 1),               # padding
        lambda: _C._max_pool2d(x, 0, 2, 2, 2, 0, 0, 1, 1, 0, 1),               # kernel
        lambda: _C._max_pool2d(x.t(), 2, 2, 2, 2, 0, 0, 1, 1, 0, 1),           # 2-D view
        lambda: _C._max_pool2d(x.long(), 2, 2, 2, 2, 0, 0, 1, 1, 0, 1),        # dtype
        lambda: _C._max_pool2d(x[:, :, ::2], 2, 2, 2, 2, 0, 0, 1, 1, 0, 1),    # strided
        lambda: _C._max_pool2d(x, 5, 5, 1, 1, 0, 0, 1, 1, 0, 1),               # too small
        lambda: _C._max_pool2d_backward(ember.zeros(1, 1, 2, 2),
                                        ember.zeros(1, 1, 2, 2), 4, 4),        # index dtype
        lambda: _C._max_pool2d_backward(ember.zeros(1, 1, 2, 2),
                                        ember.zeros(1, 1, 2, 1, dtype=ember.int64), 4, 4),
        lambda: _C._avg_pool2d_backward(ember.zeros(1, 1, 3, 3), 4, 4, 2, 2, 2, 2, 0, 0, 0,
                                        1, 0),                                  # shape
        lambda: _C._avg_pool2d(x, 2, 2, 2, 2, 0, 0, 0, 1, "x"),                 # divisor type
    ]
    for call in bad_calls:
        with pytest.raises((RuntimeError, TypeError, IndexError)):
            call()


def test_private_norm_entry_points_refuse_bad_arguments():
    x = ember.zeros(2, 3, 4)
    c = ember.zeros(3)
    bad_calls = [
        lambda: _C._batch_norm_stats(ember.zeros(3)),                         # 1-D
        lambda: _C._batch_norm_stats(x.long()),                               # dtype
        lambda: _C._batch_norm(x, c, ember.zeros(2), None, None, 1e-5),       # var size
        lambda: _C._batch_norm(x, c, c.double(), None, None, 1e-5),           # var dtype
        lambda: _C._batch_norm(x, c, c, None, None, -1.0),                    # eps
        lambda: _C._batch_norm(x, c, c, 3, None, 1e-5),                       # weight type
        lambda: _C._batch_norm_backward(ember.zeros(2, 3, 5), x, c, c, None, 1e-5, 1, 1, 0,
                                        0),                                    # grad shape
        lambda: _C._batch_norm_backward(x, x, c, c, None, 1e-5, 1, 1, 0),     # arity
    ]
    for call in bad_calls:
        with pytest.raises((RuntimeError, TypeError)):
            call()


def test_an_index_that_rebinds_the_input_sees_the_pinned_tensor():
    """Argument parsing runs Python (__index__, __float__) after the tensors
    were passed: the kernels must read the tensors the call was made with."""
    x = ember.ones(1, 1, 4, 4)

    class Rebinding:
        def __index__(self):
            x.data = ember.zeros(1, 1, 1, 1)   # frees the old THTensor unless pinned
            return 2

        def __float__(self):
            self.__index__()
            return 1e-5

    values, _ = _C._max_pool2d(x, Rebinding(), 2, 2, 2, 0, 0, 1, 1, 0, 0)
    assert values.tolist() == np.ones((1, 1, 2, 2)).tolist()
    x = ember.ones(1, 1, 4, 4)
    assert _C._avg_pool2d(x, Rebinding(), 2, 2, 2, 0, 0, 0, 1, 0).tolist() == \
        np.ones((1, 1, 2, 2)).tolist()
    x = ember.ones(2, 3) * ember.tensor([1.0, 2.0, 3.0])
    c = ember.zeros(3)
    out = _C._batch_norm(x, c, ember.ones(3), None, None, Rebinding())
    np.testing.assert_allclose(out.numpy(), np.tile([1.0, 2.0, 3.0], (2, 1)) / np.sqrt(1 + 1e-5))


def test_empty_inputs():
    for shape in [(0, 3, 4, 4), (2, 0, 4, 4)]:
        x = ember.randn(*shape, requires_grad=True)
        values, indices = F.max_pool2d(x, 2, return_indices=True)
        assert tuple(values.shape) == tuple(indices.shape) == (*shape[:2], 2, 2)
        (values.sum() + F.avg_pool2d(x, 2).sum()).backward()
        assert tuple(x.grad.shape) == shape
    norm = F.batch_norm(ember.randn(0, 3, 2), ember.zeros(3), ember.ones(3))
    assert tuple(norm.shape) == (0, 3, 2)
