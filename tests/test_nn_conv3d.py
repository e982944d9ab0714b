"""Conv3d and ConvTranspose3d (issue 12) against PyTorch with the same
weights: outputs and every gradient, float64 and float32, strides,
padding (ints, tuples, 'same', 'valid'), dilation, groups incl.
depthwise, padding modes, odd shapes (1x1x1 volumes, kernel = input,
stride > kernel, empty batches, unbatched input); PyTorch's reprs,
state_dict keys, init and error messages; gradcheck and gradgradcheck.
The C products themselves are checked against NumPy in
test_conv_kernels.py."""

import math

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.autograd import gradcheck, gradgradcheck
from test_nn_conv import _same_error, check_gradient_penalty, check_same, compare_module

torch = pytest.importorskip("torch")


CONV3D = [
    (dict(in_channels=3, out_channels=4, kernel_size=3), (2, 3, 5, 6, 5)),
    (dict(in_channels=4, out_channels=6, kernel_size=(3, 2, 2), stride=(2, 1, 2),
          padding=(1, 0, 1), groups=2), (2, 4, 6, 5, 7)),
    (dict(in_channels=4, out_channels=4, kernel_size=3, padding=2, dilation=(2, 1, 2),
          groups=4, bias=False), (1, 4, 5, 4, 5)),                    # depthwise, dilated
    (dict(in_channels=2, out_channels=3, kernel_size=1), (2, 2, 3, 4, 3)),  # the direct path
    (dict(in_channels=2, out_channels=3, kernel_size=1, stride=2), (2, 2, 5, 4, 5)),
    (dict(in_channels=2, out_channels=3, kernel_size=(3, 4, 2)), (2, 2, 3, 4, 2)),  # k = input
    (dict(in_channels=2, out_channels=3, kernel_size=2, stride=3), (1, 2, 8, 7, 6)),  # s > k
    (dict(in_channels=1, out_channels=2, kernel_size=3, padding=1), (3, 1, 1, 1, 1)),  # 1x1x1
    (dict(in_channels=2, out_channels=2, kernel_size=3, padding="same", dilation=2),
     (1, 2, 5, 6, 5)),
    (dict(in_channels=2, out_channels=2, kernel_size=(2, 3, 4), padding="same"),
     (1, 2, 4, 5, 6)),                                      # the odd padding at the end
    (dict(in_channels=2, out_channels=2, kernel_size=(2, 3, 1), padding="valid"),
     (2, 2, 4, 5, 3)),
    (dict(in_channels=2, out_channels=3, kernel_size=3, padding=2, padding_mode="reflect"),
     (2, 2, 4, 5, 3)),
    (dict(in_channels=2, out_channels=3, kernel_size=3, padding=(1, 0, 1),
          padding_mode="replicate"), (2, 2, 3, 4, 4)),
    (dict(in_channels=2, out_channels=3, kernel_size=3, padding=(1, 2, 1),
          padding_mode="circular"), (2, 2, 4, 3, 5)),
    (dict(in_channels=2, out_channels=2, kernel_size=(2, 3, 4), padding="same",
          padding_mode="reflect"), (1, 2, 4, 5, 6)),
    (dict(in_channels=2, out_channels=3, kernel_size=3), (0, 2, 4, 4, 4)),   # empty batch
    (dict(in_channels=2, out_channels=3, kernel_size=3), (2, 4, 5, 4)),      # unbatched
]


@pytest.mark.parametrize("options, shape", CONV3D)
def test_conv3d_matches_torch(options, shape):
    torch.manual_seed(1)
    compare_module(nn.Conv3d(**options).double(), torch.nn.Conv3d(**options).double(), shape)


@pytest.mark.parametrize("options, shape, output_size", [
    (dict(in_channels=3, out_channels=4, kernel_size=3), (2, 3, 4, 5, 3), None),
    (dict(in_channels=4, out_channels=6, kernel_size=(3, 2, 3), stride=(2, 1, 2),
          padding=1, output_padding=(1, 0, 1), groups=2), (2, 4, 3, 4, 3), None),
    (dict(in_channels=2, out_channels=2, kernel_size=2, stride=2, dilation=2,
          bias=False), (1, 2, 3, 2, 3), None),
    (dict(in_channels=2, out_channels=3, kernel_size=3, stride=2), (1, 2, 3, 4, 3),
     (8, 10, 7)),
    (dict(in_channels=2, out_channels=3, kernel_size=3, stride=2), (2, 3, 3, 3), None),
])
def test_conv_transpose3d_matches_torch(options, shape, output_size):
    torch.manual_seed(3)
    call = {} if output_size is None else {"output_size": output_size}
    compare_module(nn.ConvTranspose3d(**options).double(),
                   torch.nn.ConvTranspose3d(**options).double(), shape, **call)


def test_float32_conv3d_matches_torch():
    torch.manual_seed(5)
    compare_module(nn.Conv3d(8, 16, 3, padding=1), torch.nn.Conv3d(8, 16, 3, padding=1),
                   (2, 8, 6, 7, 6), dtype=np.float32, rtol=1e-4, atol=1e-4)
    compare_module(nn.ConvTranspose3d(8, 4, 3, stride=2), torch.nn.ConvTranspose3d(8, 4, 3,
                                                                                   stride=2),
                   (2, 8, 3, 4, 3), dtype=np.float32, rtol=1e-4, atol=1e-4)


def test_functional_conv3d_matches_torch():
    """F.conv3d / F.conv_transpose3d called directly, with the arguments
    as ints and as 1-tuples."""
    rng = np.random.default_rng(4)
    x, w, b = (rng.standard_normal(s) for s in ((2, 4, 5, 6, 5), (6, 2, 2, 3, 2), (6,)))
    for kwargs in (dict(stride=2, padding=1, dilation=1, groups=2),
                   dict(stride=(1,), padding=(2,), dilation=(2,), groups=2)):
        check_same(F.conv3d(*map(ember.tensor, (x, w, b)), **kwargs),
                   torch.nn.functional.conv3d(*map(torch.tensor, (x, w, b)), **kwargs))
    wt = rng.standard_normal((4, 3, 2, 3, 2))
    kwargs = dict(stride=2, padding=(0, 1, 0), output_padding=1, dilation=1)
    check_same(F.conv_transpose3d(ember.tensor(x), ember.tensor(wt), **kwargs),
               torch.nn.functional.conv_transpose3d(torch.tensor(x), torch.tensor(wt), **kwargs))


def test_conv3d_gradcheck():
    rng = np.random.default_rng(6)
    x = ember.tensor(rng.standard_normal((2, 4, 4, 3, 4)), requires_grad=True)
    w = ember.tensor(rng.standard_normal((6, 2, 2, 2, 3)), requires_grad=True)
    b = ember.tensor(rng.standard_normal(6), requires_grad=True)
    assert gradcheck(lambda a, k, c: F.conv3d(a, k, c, stride=(2, 1, 1), padding=(1, 0, 1),
                                              dilation=(1, 2, 1), groups=2), (x, w, b))
    wt = ember.tensor(rng.standard_normal((4, 3, 2, 2, 2)), requires_grad=True)
    assert gradcheck(lambda a, k, c: F.conv_transpose3d(a, k, c[:3], stride=2, padding=1,
                                                        output_padding=(1, 0, 1)), (x, wt, b))


def test_conv3d_double_backward_gradgradcheck():
    """Note [Convolution's three products]: the 3-D backward differentiates
    again, as the 2-D one."""
    rng = np.random.default_rng(7)
    x = ember.tensor(rng.standard_normal((1, 4, 4, 3, 3)), requires_grad=True)
    w = ember.tensor(rng.standard_normal((2, 2, 2, 2, 1)), requires_grad=True)
    b = ember.tensor(rng.standard_normal(2), requires_grad=True)
    assert gradgradcheck(lambda a, k, c: F.conv3d(a, k, c, stride=(2, 1, 1), padding=(0, 1, 0),
                                                  groups=2), (x, w, b))
    wt = ember.tensor(rng.standard_normal((4, 1, 2, 1, 2)), requires_grad=True)
    assert gradgradcheck(lambda a, k: F.conv_transpose3d(a, k, stride=2, groups=2), (x, wt))


def test_conv3d_gradient_penalty_matches_torch():
    """Double backward through two Conv3d layers, against PyTorch."""
    torch.manual_seed(8)
    theirs = torch.nn.Sequential(torch.nn.Conv3d(2, 3, 3, stride=2, padding=1),
                                 torch.nn.Tanh(), torch.nn.Conv3d(3, 2, 2)).double()
    ours = nn.Sequential(nn.Conv3d(2, 3, 3, stride=2, padding=1), nn.Tanh(),
                         nn.Conv3d(3, 2, 2)).double()
    check_gradient_penalty(ours, theirs,
                           np.random.default_rng(9).standard_normal((2, 2, 5, 6, 5)))


@pytest.mark.parametrize("make", [
    lambda lib: lib.nn.Conv3d(4, 6, (3, 2, 1), stride=2, padding=(1, 0, 0), dilation=2,
                              groups=2, bias=False, padding_mode="circular"),
    lambda lib: lib.nn.Conv3d(4, 6, 3),
    lambda lib: lib.nn.Conv3d(4, 6, 3, padding="same", padding_mode="replicate"),
    lambda lib: lib.nn.ConvTranspose3d(4, 6, 3, stride=2, output_padding=1, groups=2),
    lambda lib: lib.nn.ConvTranspose3d(4, 6, (1, 2, 3), dilation=(1, 2, 1), bias=False),
])
def test_reprs_parameters_and_init_match_torch(make):
    """PyTorch's repr, parameter names, shapes and attributes, and
    reset_parameters' bounds: kaiming_uniform_(a=sqrt(5)) gives the weight
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as the bias."""
    ember.manual_seed(0)  # the spread check below is about a draw: a fixed one
    ours, theirs = make(ember), make(torch)
    assert repr(ours) == repr(theirs)
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.state_dict().items()]
    for attribute in ("in_channels", "out_channels", "kernel_size", "stride", "padding",
                      "dilation", "groups", "padding_mode", "output_padding", "transposed"):
        assert getattr(ours, attribute) == getattr(theirs, attribute), attribute
    fan_in = ours.weight.shape[1] * math.prod(ours.weight.shape[2:])
    bound = 1 / math.sqrt(fan_in)
    for p in ours.parameters():
        values = p.detach().numpy()
        assert np.abs(values).max() <= bound
        assert values.std() > bound / 4   # spread over the range, not a constant


def test_reset_parameters_draws_from_the_generator():
    ember.manual_seed(0)
    first = nn.Conv3d(2, 3, 2)
    ember.manual_seed(0)
    second = nn.Conv3d(2, 3, 2)
    assert first.weight.tolist() == second.weight.tolist()
    assert first.bias.tolist() == second.bias.tolist()
    second.reset_parameters()
    assert first.weight.tolist() != second.weight.tolist()


@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.functional.conv3d(lib.ones(2, 3, 4), lib.ones(6, 2, 3, 3, 3)),
    lambda lib: lib.nn.functional.conv3d(lib.ones(1, 4, 5, 5, 5), lib.ones(6, 2, 3, 3, 3)),
    lambda lib: lib.nn.functional.conv3d(lib.ones(1, 4, 5, 5, 5), lib.ones(6, 4, 3, 3, 3),
                                         groups=3),
    lambda lib: lib.nn.functional.conv3d(lib.ones(1, 2, 5, 4, 4), lib.ones(6, 2, 3, 5, 3)),
    lambda lib: lib.nn.functional.conv3d(lib.ones(1, 2, 4, 4, 4), lib.ones(6, 2, 5, 3, 3),
                                         padding=(0, 1, 1), dilation=(1, 2, 2)),
    lambda lib: lib.nn.functional.conv3d(lib.ones(1, 2, 4, 4, 4), lib.ones(6, 2, 3, 3, 3),
                                         padding=-1),
    lambda lib: lib.nn.functional.conv3d(lib.ones(1, 2, 4, 4, 4), lib.ones(6, 2, 3, 3, 3),
                                         padding=(1, 1)),
    lambda lib: lib.nn.functional.conv3d(lib.ones(1, 2, 4, 4, 4), lib.ones(6, 2, 3, 3, 3),
                                         stride=(1, 1)),
    lambda lib: lib.nn.functional.conv3d(lib.ones(1, 2, 4, 4, 4), lib.ones(6, 2, 3, 3, 3),
                                         groups=0),
    lambda lib: lib.nn.functional.conv3d(lib.ones(1, 2, 4, 4, 4), lib.ones(6, 2, 3, 3, 3),
                                         stride=0),
    lambda lib: lib.nn.functional.conv3d(lib.ones(2, 2, 4, 4, 4), lib.ones(6, 2, 3, 3, 3),
                                         dilation=0),   # (batch 1 takes another path in torch)
    lambda lib: lib.nn.functional.conv3d(lib.ones(1, 2, 4, 4, 4), lib.ones(6, 2, 3, 3, 3),
                                         lib.ones(5)),
    lambda lib: lib.nn.functional.conv3d(lib.ones(1, 2, 4, 4, 4), lib.ones(6, 2, 3, 3, 3),
                                         stride=(1, 2, 1), padding="same"),
    lambda lib: lib.nn.functional.conv3d(lib.ones(1, 2, 4, 4, 4), lib.ones(6, 2, 3, 3, 3),
                                         padding="full"),
    lambda lib: lib.nn.functional.conv3d(lib.ones(1, 2, 4, 4, 4, dtype=lib.float64),
                                         lib.ones(6, 2, 3, 3, 3)),
    lambda lib: lib.nn.functional.conv_transpose3d(lib.ones(1, 2, 4, 4, 4),
                                                   lib.ones(2, 3, 3, 3, 3), stride=2,
                                                   output_padding=(1, 2, 1)),
    lambda lib: lib.nn.functional.conv_transpose3d(lib.ones(1, 2, 4, 4),
                                                   lib.ones(4, 3, 3, 3, 3)),
    lambda lib: lib.nn.functional.conv2d(lib.ones(1, 2, 4, 4), lib.ones(6, 2, 3, 3),
                                         stride=(1, 1, 1)),
    lambda lib: lib.nn.functional.conv2d(lib.ones(2, 2, 4, 4), lib.ones(6, 2, 3, 3),
                                         dilation=0),
    lambda lib: lib.nn.functional.conv1d(lib.ones(1, 2, 4), lib.ones(6, 2, 3), padding=(1, 1)),
    lambda lib: lib.nn.Conv3d(3, 4, 3, groups=2),
    lambda lib: lib.nn.Conv3d(4, 6, 3, groups=4),
    lambda lib: lib.nn.Conv3d(2, 4, 3, stride=(1, 2, 1), padding="same"),
    lambda lib: lib.nn.ConvTranspose3d(2, 4, 3, padding_mode="reflect"),
    lambda lib: lib.nn.Conv3d(2, 4, 3, padding=3, padding_mode="reflect")(lib.ones(1, 2, 3, 3, 3)),
    lambda lib: lib.nn.Conv3d(2, 4, 3)(lib.ones(1, 3, 4, 4, 4)),
    lambda lib: lib.nn.ConvTranspose3d(2, 4, 3, stride=2)(lib.ones(1, 2, 3, 3, 3),
                                                          output_size=(9, 9)),
])
def test_errors_match_torch(call):
    _same_error(lambda: call(ember), lambda: call(torch))


@pytest.mark.parametrize("input_shape, output_size", [
    ((1, 2, 3, 3, 3), (9, 9, 10)),
    ((2, 3, 4, 3), [1, 4, 6, 10, 7]),   # unbatched, the whole output's size
])
def test_output_size_errors_match_torch(input_shape, output_size):
    """PyTorch names the input's size as a torch.Size, ember's an ember.Size."""
    with pytest.raises(ValueError) as theirs:
        torch.nn.ConvTranspose3d(2, 4, 3, stride=2)(torch.ones(input_shape),
                                                    output_size=output_size)
    with pytest.raises(ValueError) as ours:
        nn.ConvTranspose3d(2, 4, 3, stride=2)(ember.ones(input_shape), output_size=output_size)
    assert str(ours.value) == str(theirs.value).replace("torch.Size", "ember.Size")
