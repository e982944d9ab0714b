"""Pooling, unfold/fold, interpolation, pixel shuffles and Unflatten (issue 12)
against PyTorch: values, indices and every gradient (float64), odd shapes
(ceil_mode, dilation, padding, 1x1 inputs, unbatched), module reprs;
gradchecks; errors.  Pure Python composites over existing C."""

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.autograd import gradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def check_same(ours, theirs, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(),
                               rtol=rtol, atol=atol)


def compare(fn_name, shape, *args, seed=0, **kwargs):
    """F.<fn_name> on the same input in both libraries: outputs (and indices)
    and the input's gradient."""
    x = np.random.default_rng(seed).standard_normal(shape)
    ours_x, theirs_x = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours = getattr(F, fn_name)(ours_x, *args, **kwargs)
    theirs = getattr(TF, fn_name)(theirs_x, *args, **kwargs)
    if isinstance(theirs, tuple):
        check_same(ours[1], theirs[1])
        ours, theirs = ours[0], theirs[0]
    check_same(ours, theirs)
    weights = np.random.default_rng(seed + 1).standard_normal(tuple(theirs.shape))
    (ours * ember.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    check_same(ours_x.grad, theirs_x.grad)


@pytest.mark.parametrize("shape, kwargs", [
    ((2, 3, 6, 6), dict(kernel_size=2)),
    ((2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 7, 7), dict(kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True)),
    ((1, 2, 5, 8), dict(kernel_size=(2, 3), stride=(1, 2), ceil_mode=True)),
    ((1, 1, 1, 1), dict(kernel_size=1)),
    ((3, 5, 5), dict(kernel_size=2, stride=1)),
])
@pytest.mark.parametrize("return_indices", [False, True])
def test_max_pool2d(shape, kwargs, return_indices):
    compare("max_pool2d", shape, return_indices=return_indices, **kwargs)


@pytest.mark.parametrize("shape, kwargs", [
    ((2, 3, 6, 6), dict(kernel_size=2)),
    ((2, 3, 7, 6), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 7, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((1, 2, 7, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                        count_include_pad=False)),
    ((1, 2, 5, 5), dict(kernel_size=2, divisor_override=3)),
    ((3, 5, 5), dict(kernel_size=2, stride=1)),
])
def test_avg_pool2d(shape, kwargs):
    compare("avg_pool2d", shape, **kwargs)


def test_pool1d():
    compare("max_pool1d", (2, 3, 9), 3, 2, 1, return_indices=True)
    compare("max_pool1d", (3, 9), 2, ceil_mode=True)
    compare("avg_pool1d", (2, 3, 9), 3, 2, 1, count_include_pad=False, ceil_mode=True)


@pytest.mark.parametrize("size", [(1, 1), 3, (2, 5), (None, 2), (7, 4)])
def test_adaptive_pooling(size):
    compare("adaptive_avg_pool2d", (2, 3, 7, 5), size)
    if size != (None, 2):
        compare("adaptive_max_pool2d", (2, 3, 7, 5), size, return_indices=True)
    compare("adaptive_avg_pool1d", (2, 3, 7), 3)
    compare("adaptive_max_pool1d", (2, 3, 7), 4, return_indices=True)


@pytest.mark.parametrize("kwargs", [dict(kernel_size=2), dict(kernel_size=(2, 3), stride=2,
                                    padding=1, dilation=(1, 2))])
def test_unfold_and_fold(kwargs):
    compare("unfold", (2, 3, 6, 7), **kwargs)
    columns = F.unfold(ember.ones(2, 3, 6, 7), **kwargs)
    x = np.random.default_rng(3).standard_normal(tuple(columns.shape))
    ours_x, theirs_x = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours, theirs = F.fold(ours_x, (6, 7), **kwargs), TF.fold(theirs_x, (6, 7), **kwargs)
    check_same(ours, theirs)
    (ours ** 2).sum().backward()
    (theirs ** 2).sum().backward()
    check_same(ours_x.grad, theirs_x.grad)


@pytest.mark.parametrize("kwargs", [
    dict(scale_factor=2), dict(size=(5, 7)), dict(scale_factor=(1.5, 0.5)),
    dict(size=(5, 7), mode="nearest-exact"),
    dict(size=(5, 9), mode="bilinear"), dict(size=(5, 9), mode="bilinear", align_corners=True),
    dict(scale_factor=1.7, mode="bilinear"), dict(size=(2, 1), mode="bilinear"),
])
def test_interpolate_2d(kwargs):
    compare("interpolate", (2, 3, 4, 6), **kwargs)


def test_interpolate_1d_and_errors():
    compare("interpolate", (2, 3, 5), size=8, mode="linear")
    compare("interpolate", (2, 3, 5), size=8, mode="linear", align_corners=True)
    compare("interpolate", (2, 3, 5), scale_factor=3)
    with pytest.raises(ValueError, match="either size or scale_factor should be defined"):
        F.interpolate(ember.ones(1, 1, 2, 2))
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(ember.ones(1, 1, 2, 2), scale_factor=2, align_corners=True)


def test_pixel_shuffles():
    compare("pixel_shuffle", (2, 8, 3, 4), 2)
    compare("pixel_unshuffle", (2, 2, 4, 6), 2)
    compare("pixel_shuffle", (9, 2, 3), 3)


def test_gradchecks():
    x = ember.tensor(np.random.default_rng(5).standard_normal((1, 2, 5, 5)), requires_grad=True)
    assert gradcheck(lambda t: F.max_pool2d(t, 3, 2, 1), (x,))
    assert gradcheck(lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=True,
                                            count_include_pad=False), (x,))
    assert gradcheck(lambda t: F.adaptive_avg_pool2d(t, (2, 3)), (x,))
    assert gradcheck(lambda t: F.adaptive_max_pool2d(t, 2), (x,))
    assert gradcheck(lambda t: F.interpolate(t, scale_factor=1.5, mode="bilinear"), (x,))
    assert gradcheck(lambda t: F.fold(F.unfold(t, 2), (5, 5), 2), (x,))


MODULES = [
    ("MaxPool2d", (2,), {}), ("MaxPool2d", (3, 2, 1), dict(dilation=2, ceil_mode=True)),
    ("MaxPool1d", (3,), {}), ("AvgPool2d", (2,), {}),
    ("AvgPool2d", (3, 2, 1), dict(ceil_mode=True, count_include_pad=False, divisor_override=2)),
    ("AvgPool1d", (3,), {}), ("AdaptiveAvgPool2d", ((1, 1),), {}),
    ("AdaptiveAvgPool2d", (7,), {}), ("AdaptiveMaxPool2d", ((2, None),), {}),
    ("AdaptiveAvgPool1d", (4,), {}), ("AdaptiveMaxPool1d", (3,), {}),
    ("Upsample", (), dict(scale_factor=2)),
    ("Upsample", (), dict(size=(4, 5), mode="bilinear", align_corners=True)),
    ("PixelShuffle", (2,), {}), ("PixelUnshuffle", (2,), {}), ("Unflatten", (1, (2, 3)), {}),
    ("UpsamplingNearest2d", (), dict(scale_factor=2)),
    ("UpsamplingBilinear2d", (), dict(scale_factor=2)),
]


@pytest.mark.parametrize("name, args, kwargs", MODULES)
def test_module_reprs_and_forward_match_torch(name, args, kwargs):
    ours, theirs = getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    shape = {"PixelShuffle": (1, 8, 3, 3), "Unflatten": (2, 6, 3)}.get(name, (1, 2, 8, 8))
    if name.endswith("1d"):
        shape = (1, 2, 8)
    x = np.random.default_rng(6).standard_normal(shape)
    check_same(ours(ember.tensor(x)), theirs(torch.tensor(x)))


def test_errors_match_torch():
    for call in [lambda lib: lib.nn.functional.max_pool2d(lib.ones(1, 1, 4, 4), 2, padding=2),
                 lambda lib: lib.nn.functional.max_pool2d(lib.ones(1, 1, 4, 4), 2, stride=0),
                 lambda lib: lib.nn.functional.pixel_shuffle(lib.ones(1, 3, 2, 2), 2)]:
        with pytest.raises(Exception) as theirs:
            call(torch)
        with pytest.raises(type(theirs.value)) as ours:
            call(ember)
        assert str(ours.value) == str(theirs.value)
