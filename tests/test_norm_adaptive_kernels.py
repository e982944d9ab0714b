"""The C kernels of layer and group norm (Note [Layer and group norm as row
norm], c/th/THNorm.c), instance norm (batch norm's kernels over a batch of
one) and adaptive pooling (Note [Adaptive pooling windows], c/th/THPool.c)
behind ember.nn.functional: against NumPy written from the definitions over
Hypothesis-drawn shapes, float64 and float32; gradchecks and
gradgradchecks; PyTorch's values, gradients, indices and error messages
where torch is installed; the private _C entry points refuse bad arguments
with exceptions, not crashes."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ember
import ember.nn.functional as F
from ember import _C, nn
from ember.autograd import gradcheck, gradgradcheck

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


def random_input(shape, dtype=np.float64, seed=0, offset=0.0):
    return (np.random.default_rng(seed).standard_normal(shape) + offset).astype(dtype)


def loose(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10,
                                                                        atol=1e-10)


def optional(array):
    return None if array is None else ember.tensor(array)


# ---- layer and group norm ----------------------------------------------------------

def normalized_reference(x, axes, eps):
    x = x.astype(np.float64)
    mean = x.mean(axes, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(axes, keepdims=True) + eps)


@st.composite
def layer_norm_cases(draw):
    lead = [draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2)))]
    normalized = [draw(st.integers(1, 9)) for _ in range(draw(st.integers(1, 2)))]
    return tuple(lead + normalized), len(normalized), draw(st.booleans())


@given(layer_norm_cases(), st.sampled_from([np.float64, np.float32]))
def test_layer_norm_matches_the_definition(case, dtype):
    shape, k, affine = case
    x = random_input(shape, dtype, offset=100.0)   # a large mean: two passes
    weight = random_input(shape[-k:], dtype, 1) if affine else None
    bias = random_input(shape[-k:], dtype, 2) if affine else None
    out = F.layer_norm(ember.tensor(x), shape[-k:], optional(weight), optional(bias), 1e-3)
    want = normalized_reference(x, tuple(range(len(shape) - k, len(shape))), 1e-3)
    if affine:
        want = want * weight + bias
    assert out.dtype == ember.tensor(x).dtype
    np.testing.assert_allclose(out.numpy(), want, **loose(dtype))


@st.composite
def group_norm_cases(draw):
    groups, per_group = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    spatial = [draw(st.integers(1, 4)) for _ in range(draw(st.integers(0, 2)))]
    return (draw(st.integers(1, 3)), groups * per_group, *spatial), groups, draw(st.booleans())


@given(group_norm_cases(), st.sampled_from([np.float64, np.float32]))
def test_group_norm_matches_the_definition(case, dtype):
    shape, groups, affine = case
    x = random_input(shape, dtype, offset=50.0)
    weight = random_input(shape[1], dtype, 1) if affine else None
    bias = random_input(shape[1], dtype, 2) if affine else None
    out = F.group_norm(ember.tensor(x), groups, optional(weight), optional(bias), 1e-3)
    grouped = x.reshape(shape[0], groups, -1)
    want = normalized_reference(grouped, (2,), 1e-3).reshape(shape)
    if affine:
        channel = [1, -1] + [1] * (len(shape) - 2)
        want = want * weight.reshape(channel) + bias.reshape(channel)
    np.testing.assert_allclose(out.numpy(), want, **loose(dtype))


@pytest.mark.parametrize("shape, k", [((3, 5), 1), ((2, 3, 4), 2), ((7,), 1)])
def test_layer_norm_gradcheck_and_gradgradcheck(shape, k):
    x = ember.tensor(random_input(shape), requires_grad=True)
    weight = ember.tensor(random_input(shape[-k:], seed=1), requires_grad=True)
    bias = ember.tensor(random_input(shape[-k:], seed=2), requires_grad=True)

    def norm(x, weight, bias):
        return F.layer_norm(x, shape[-k:], weight, bias, 1e-5)
    assert gradcheck(norm, (x, weight, bias))
    assert gradgradcheck(norm, (x, weight, bias))
    assert gradcheck(lambda x: F.layer_norm(x, shape[-k:]), (x,))


@pytest.mark.parametrize("rows, width", [(1, 13), (8, 13), (37, 13), (203, 333)])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_affine_gradients_match_the_definition(rows, width, threads, dtype):
    """grad_weight and grad_bias sum one term per row (Note [Row blocks of
    the affine gradients]): row counts below, at and past the block of 8;
    203 x 333 is large enough for two threads to take a chunk of rows each
    (blocks cut short at the chunk's end); against NumPy in float64."""
    shape = (rows, width)
    x, dy = random_input(shape, dtype, 3, offset=4.0), random_input(shape, dtype, 4)
    weight = ember.tensor(random_input(width, dtype, 5), requires_grad=True)
    bias = ember.tensor(random_input(width, dtype, 6), requires_grad=True)
    previous = ember.get_num_threads()
    ember.set_num_threads(threads)
    try:
        F.layer_norm(ember.tensor(x), (width,), weight, bias, 1e-5).backward(ember.tensor(dy))
    finally:
        ember.set_num_threads(previous)
    xhat = normalized_reference(x, (1,), 1e-5)
    np.testing.assert_allclose(weight.grad.numpy(), (dy * xhat).sum(0), **loose(dtype))
    np.testing.assert_allclose(bias.grad.numpy(), dy.astype(np.float64).sum(0),
                               **loose(dtype))


@pytest.mark.parametrize("shape, groups", [((2, 4, 3), 2), ((3, 6, 2, 2), 3), ((2, 3), 1)])
def test_group_norm_gradcheck_and_gradgradcheck(shape, groups):
    x = ember.tensor(random_input(shape), requires_grad=True)
    weight = ember.tensor(random_input(shape[1], seed=1), requires_grad=True)
    bias = ember.tensor(random_input(shape[1], seed=2), requires_grad=True)

    def norm(x, weight, bias):
        return F.group_norm(x, groups, weight, bias, 1e-5)
    assert gradcheck(norm, (x, weight, bias))
    assert gradgradcheck(norm, (x, weight, bias))
    assert gradcheck(lambda x: F.group_norm(x, groups, None, bias), (x,))


@pytest.mark.parametrize("use_input_stats", [True, False])
def test_instance_norm_gradcheck_and_gradgradcheck(use_input_stats):
    x = ember.tensor(random_input((2, 3, 5)), requires_grad=True)
    weight = ember.tensor(random_input(3, seed=1), requires_grad=True)
    bias = ember.tensor(random_input(3, seed=2), requires_grad=True)
    running = (ember.tensor(random_input(3, seed=3)), ember.tensor(np.full(3, 1.5)))

    def norm(x, weight, bias):
        return F.instance_norm(x, *(r.clone() for r in running), weight, bias,
                               use_input_stats, 0.1, 1e-5)
    assert gradcheck(norm, (x, weight, bias))
    assert gradgradcheck(norm, (x, weight, bias))


def torch_pair(array, requires_grad=True):
    return (ember.tensor(array, requires_grad=requires_grad),
            torch.tensor(array, requires_grad=requires_grad))


def check_against_torch(ours, theirs, arrays, dtype, seed=9):
    """Runs ours(*ember tensors) and theirs(*torch tensors), compares the
    outputs and the gradients of <output, g>."""
    pairs = [torch_pair(a) for a in arrays]
    out = ours(*(p[0] for p in pairs))
    want = theirs(*(p[1] for p in pairs))
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), **loose(dtype))
    g = random_input(tuple(want.shape), dtype, seed)
    out.backward(ember.tensor(g))
    want.backward(torch.tensor(g))
    for ember_t, torch_t in pairs:
        np.testing.assert_allclose(ember_t.grad.numpy(), torch_t.grad.numpy(),
                                   **(dict(rtol=1e-3, atol=1e-3) if dtype == np.float32
                                      else loose(dtype)))


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, k", [((256, 384), 1), ((2, 5, 3, 4), 2)])
def test_layer_norm_as_torch(shape, k, dtype):
    """(256, 384) is large enough for the backward to split the rows between
    threads (per-thread partial sums of grad_weight and grad_bias)."""
    arrays = [random_input(shape, dtype), random_input(shape[-k:], dtype, 1),
              random_input(shape[-k:], dtype, 2)]
    check_against_torch(lambda x, w, b: F.layer_norm(x, shape[-k:], w, b),
                        lambda x, w, b: torch.nn.functional.layer_norm(x, shape[-k:], w, b),
                        arrays, dtype)


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, groups", [((8, 8, 32, 32), 4), ((3, 6, 5), 3)])
def test_group_norm_as_torch(shape, groups, dtype):
    arrays = [random_input(shape, dtype), random_input(shape[1], dtype, 1),
              random_input(shape[1], dtype, 2)]
    check_against_torch(lambda x, w, b: F.group_norm(x, groups, w, b),
                        lambda x, w, b: torch.nn.functional.group_norm(x, groups, w, b),
                        arrays, dtype)


@needs_torch
@pytest.mark.parametrize("kind, shape, affine_shape", [
    ("InstanceNorm1d", (2, 3, 5), 3), ("InstanceNorm2d", (3, 4, 4, 4), 4),
    ("InstanceNorm1d", (3, 4), 3)])                 # unbatched
def test_instance_norm_module_as_torch(kind, shape, affine_shape):
    """Train (running statistics updated from the batch average), then eval."""
    ours = getattr(nn, kind)(affine_shape, affine=True, track_running_stats=True)
    theirs = getattr(torch.nn, kind)(affine_shape, affine=True, track_running_stats=True)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(random_input(affine_shape, np.float32, 1)))
        theirs.bias.copy_(torch.tensor(random_input(affine_shape, np.float32, 2)))
    ours.load_state_dict({k: ember.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    for training in (True, False):
        ours.train(training)
        theirs.train(training)
        x = random_input(shape, np.float32, 3, offset=2.0)
        check_against_torch(ours, theirs, [x], np.float32)
        for name in ("running_mean", "running_var"):
            np.testing.assert_allclose(getattr(ours, name).numpy(),
                                       getattr(theirs, name).numpy(), rtol=1e-5, atol=1e-6)


# ---- adaptive pooling -------------------------------------------------------------

def adaptive_bounds(size, out):
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


def adaptive_reference(x, out_h, out_w):
    """(averages, maxima, flat indices of the first maximum, a NaN winning)."""
    n, c, h, w = x.shape
    means = np.empty((n, c, out_h, out_w))
    maxima = np.empty((n, c, out_h, out_w), x.dtype)
    indices = np.empty((n, c, out_h, out_w), np.int64)
    for i, (top, bottom) in enumerate(adaptive_bounds(h, out_h)):
        for j, (left, right) in enumerate(adaptive_bounds(w, out_w)):
            window = x[:, :, top:bottom, left:right]
            means[:, :, i, j] = window.astype(np.float64).mean((2, 3))
            flat = window.reshape(n, c, -1)
            local = np.where(np.isnan(flat).any(-1),
                             flat.shape[-1] - 1 - np.isnan(flat[..., ::-1]).argmax(-1),
                             flat.argmax(-1))
            maxima[:, :, i, j] = np.take_along_axis(flat, local[..., None], -1)[..., 0]
            span = right - left
            indices[:, :, i, j] = (top + local // span) * w + left + local % span
    return means, maxima, indices


@st.composite
def adaptive_cases(draw):
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 9)),
             draw(st.integers(1, 9)))
    return shape, draw(st.integers(1, 9)), draw(st.integers(1, 9))


@given(adaptive_cases(), st.sampled_from([np.float64, np.float32]))
def test_adaptive_pool2d_matches_the_definition(case, dtype):
    shape, out_h, out_w = case
    x = random_input(shape, dtype)
    if x.size > 2:
        x.flat[2] = np.nan
    means, maxima, indices = adaptive_reference(x, out_h, out_w)
    np.testing.assert_allclose(F.adaptive_avg_pool2d(ember.tensor(x), (out_h, out_w)).numpy(),
                               means, **loose(dtype))
    values, where = F.adaptive_max_pool2d(ember.tensor(x), (out_h, out_w), True)
    np.testing.assert_array_equal(values.numpy(), maxima)
    np.testing.assert_array_equal(where.numpy(), indices)


@given(adaptive_cases())
def test_adaptive_pool2d_backward(case):
    """The average backward is the forward's adjoint; the max backward adds
    each gradient at its index."""
    shape, out_h, out_w = case
    x = ember.tensor(random_input(shape), requires_grad=True)
    g = random_input((*shape[:2], out_h, out_w), seed=1)
    out = F.adaptive_avg_pool2d(x, (out_h, out_w))
    (grad,) = ember.autograd.grad(out, [x], ember.tensor(g))
    assert np.isclose((grad.numpy() * x.detach().numpy()).sum(), (out.detach().numpy() * g).sum())
    values, indices = F.adaptive_max_pool2d(x, (out_h, out_w), return_indices=True)
    (grad,) = ember.autograd.grad(values, [x], ember.tensor(g))
    want = np.zeros((*shape[:2], shape[2] * shape[3]))
    flat_indices = indices.numpy().reshape(*shape[:2], -1)
    for n in range(shape[0]):
        for c in range(shape[1]):
            np.add.at(want[n, c], flat_indices[n, c], g[n, c].reshape(-1))
    np.testing.assert_allclose(grad.numpy(), want.reshape(shape), rtol=1e-12, atol=1e-12)


def test_adaptive_pool_gradcheck_and_gradgradcheck():
    x = ember.tensor(random_input((2, 2, 5, 7)), requires_grad=True)
    for pool in (lambda t: F.adaptive_avg_pool2d(t, (3, 4)),
                 lambda t: F.adaptive_max_pool2d(t, (2, 3)),
                 lambda t: F.adaptive_avg_pool1d(t[0], 3),
                 lambda t: F.adaptive_max_pool1d(t[:, 0], 4)):
        assert gradcheck(pool, (x,))
        assert gradgradcheck(pool, (x,))


def test_adaptive_pool_forms_and_dtypes():
    x = ember.tensor(random_input((2, 3, 7), np.float32))
    assert F.adaptive_avg_pool1d(x, 3).shape == (2, 3, 3)
    assert F.adaptive_max_pool1d(x[0], 4, return_indices=True)[1].shape == (3, 4)
    assert F.adaptive_avg_pool2d(x, (None, 2)).shape == (2, 3, 2)      # unbatched 2-D
    half = F.adaptive_avg_pool2d(x.unsqueeze(0).half(), 2)
    assert half.dtype == ember.float16
    whole = F.adaptive_avg_pool2d(x.unsqueeze(0), 2)
    np.testing.assert_allclose(half.float().numpy(), whole.numpy(), rtol=1e-2, atol=1e-2)
    ints = ember.arange(24).reshape(1, 2, 3, 4)
    assert F.adaptive_max_pool2d(ints, 2).tolist() == [[[[5, 7], [9, 11]],
                                                         [[17, 19], [21, 23]]]]
    assert F.adaptive_avg_pool2d(ember.zeros(0, 2, 3, 3), 2).shape == (0, 2, 2, 2)
    assert F.adaptive_avg_pool2d(ember.zeros(1, 2, 3, 3), (0, 2)).shape == (1, 2, 0, 2)


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape, size", [((2, 3, 7, 5), (3, 2)), ((4, 8, 14, 14), (5, 5)),
                                         ((1, 2, 4, 4), (8, 8))])
def test_adaptive_pool2d_as_torch(shape, size, dtype):
    x = random_input(shape, dtype)
    check_against_torch(lambda t: F.adaptive_avg_pool2d(t, size),
                        lambda t: torch.nn.functional.adaptive_avg_pool2d(t, size), [x], dtype)
    check_against_torch(lambda t: F.adaptive_max_pool2d(t, size),
                        lambda t: torch.nn.functional.adaptive_max_pool2d(t, size), [x], dtype)
    _, indices = F.adaptive_max_pool2d(ember.tensor(x), size, True)
    _, want = torch.nn.functional.adaptive_max_pool2d(torch.tensor(x), size, True)
    np.testing.assert_array_equal(indices.numpy(), want.numpy())


@needs_torch
@pytest.mark.parametrize("call", [
    lambda m, x: m.adaptive_avg_pool2d(x.ones(2, 3, 5, 5), (-1, 2)),
    lambda m, x: m.adaptive_max_pool2d(x.ones(2, 3, 5, 5), (-1, 2)),
    lambda m, x: m.adaptive_avg_pool2d(x.ones(2, 3, 5, 5), (2, 2, 2)),
    lambda m, x: m.adaptive_avg_pool2d(x.ones(2, 0, 3), 2),
    lambda m, x: m.adaptive_max_pool2d(x.ones(2, 2, 0, 3), 2),
    lambda m, x: m.adaptive_avg_pool1d(x.ones(2, 3, 4), -1),
    lambda m, x: m.group_norm(x.ones(2, 3, 5), 3, x.ones(2)),
    lambda m, x: m.layer_norm(x.ones(2, 5), (5,), x.ones(4)),
    lambda m, x: m.group_norm(x.ones(2, 3, 5), 2),
])
def test_errors_as_torch(call):
    with pytest.raises(Exception) as theirs:
        call(torch.nn.functional, torch)
    with pytest.raises(type(theirs.value)) as ours:
        call(F, ember)
    assert str(ours.value) == str(theirs.value)


# ---- the private entry points --------------------------------------------------------

def test_private_entry_points_refuse_bad_arguments():
    x = ember.zeros(2, 4, 3)
    rows = ember.zeros(4)
    bad_calls = [
        lambda: _C._layer_norm(x, None, None, 4, 1e-5),                     # ndim > dims
        lambda: _C._layer_norm(x, None, None, 0, 1e-5),                     # no dims
        lambda: _C._layer_norm(x, ember.zeros(4), None, 1, 1e-5),           # weight size
        lambda: _C._layer_norm(x.long(), None, None, 1, 1e-5),              # dtype
        lambda: _C._layer_norm(x.transpose(0, 2), None, None, 1, 1e-5),     # strided
        lambda: _C._layer_norm(x, None, None, 1, -1.0),                     # eps
        lambda: _C._layer_norm(x, None, None, 1),                           # arity
        lambda: _C._group_norm(x, None, None, 3, 1e-5),                     # groups
        lambda: _C._group_norm(x, None, None, 0, 1e-5),
        lambda: _C._group_norm(ember.zeros(3), None, None, 1, 1e-5),        # 1-D
        lambda: _C._group_norm(x, ember.zeros(4, dtype=ember.float64), None, 2, 1e-5),
        lambda: _C._group_norm_backward(x, x, rows, ember.zeros(3), None, 2, 1, 1, 1),
        lambda: _C._layer_norm_backward(ember.zeros(2, 4, 4), x, ember.zeros(8),
                                        ember.zeros(8), None, 1, 1, 0, 0),  # grad shape
        lambda: _C._adaptive_avg_pool2d(ember.zeros(1, 1, 4, 4), 0, 2),     # empty output
        lambda: _C._adaptive_avg_pool2d(ember.zeros(1, 1, 0, 4), 2, 2),     # empty input
        lambda: _C._adaptive_max_pool2d(ember.zeros(1, 4, 4), 2, 2),        # 3-D
        lambda: _C._adaptive_avg_pool2d_backward(ember.zeros(1, 1, 2, 2), -1, 4),
        lambda: _C._adaptive_avg_pool2d(ember.zeros(1, 1, 4, 4), 2),        # arity
    ]
    for call in bad_calls:
        with pytest.raises((RuntimeError, TypeError)):
            call()


def test_an_eps_that_rebinds_the_input_sees_the_pinned_tensor():
    x = ember.tensor([[1.0, 3.0]])

    class Rebinding:
        def __float__(self):
            x.data = ember.zeros(1, 1)   # frees the old THTensor unless pinned
            return 0.0

        def __index__(self):
            self.__float__()
            return 2

    out, mean, rstd = _C._layer_norm(x, None, None, 1, Rebinding())
    assert out.tolist() == [[-1.0, 1.0]] and mean.tolist() == [2.0] and rstd.tolist() == [1.0]
    x = ember.ones(1, 1, 4, 4)
    assert _C._adaptive_avg_pool2d(x, Rebinding(), 2).tolist() == np.ones((1, 1, 2, 2)).tolist()


def test_empty_inputs():
    x = ember.zeros(0, 4, requires_grad=True)
    F.layer_norm(x, (4,)).sum().backward()
    assert x.grad.shape == (0, 4)
    assert F.group_norm(ember.zeros(0, 4, 2), 2).shape == (0, 4, 2)
