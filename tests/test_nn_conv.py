"""Convolution layers and F.pad (issue 12) against PyTorch with the same
weights: outputs and every gradient, float64 and float32, odd shapes
(1x1 images, kernel = input, stride > kernel, dilation, groups incl.
depthwise, empty batches), padding modes and 'same'; gradchecks; errors."""

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def copy_state(ours, theirs):
    ours.load_state_dict({k: ember.tensor(v.detach().numpy().copy())
                          for k, v in theirs.state_dict().items()})


def check_same(ours, theirs, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(),
                               rtol=rtol, atol=atol)


def compare_module(ours, theirs, shape, dtype=np.float64, rtol=1e-10, atol=1e-12, **call):
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    copy_state(ours, theirs)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    ours_x, theirs_x = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours_out, theirs_out = ours(ours_x, **call), theirs(theirs_x, **call)
    check_same(ours_out, theirs_out, rtol, atol)
    upstream = rng.standard_normal(tuple(theirs_out.shape)).astype(dtype)
    (ours_out * ember.tensor(upstream)).sum().backward()
    (theirs_out * torch.tensor(upstream)).sum().backward()
    check_same(ours_x.grad, theirs_x.grad, rtol, atol)
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        check_same(p.grad, q.grad, rtol, atol)


CONV2D = [
    (dict(in_channels=3, out_channels=4, kernel_size=3), (2, 3, 7, 6)),
    (dict(in_channels=4, out_channels=6, kernel_size=(3, 2), stride=2, padding=1,
          groups=2), (2, 4, 7, 6)),
    (dict(in_channels=4, out_channels=4, kernel_size=3, padding=2, dilation=2, groups=4,
          bias=False), (1, 4, 5, 5)),                               # depthwise, dilated
    (dict(in_channels=2, out_channels=3, kernel_size=1), (2, 2, 4, 4)),   # the direct path
    (dict(in_channels=2, out_channels=3, kernel_size=1, stride=2), (2, 2, 5, 5)),
    (dict(in_channels=2, out_channels=3, kernel_size=5), (2, 2, 5, 5)),   # kernel = input
    (dict(in_channels=2, out_channels=3, kernel_size=2, stride=3), (1, 2, 8, 7)),  # stride > k
    (dict(in_channels=1, out_channels=2, kernel_size=3, padding=1), (3, 1, 1, 1)),  # 1x1 image
    (dict(in_channels=2, out_channels=2, kernel_size=3, padding="same", dilation=2), (1, 2, 6, 5)),
    (dict(in_channels=2, out_channels=2, kernel_size=(2, 4), padding="same"), (1, 2, 5, 6)),
    (dict(in_channels=2, out_channels=3, kernel_size=3, padding=2,
          padding_mode="reflect"), (2, 2, 5, 6)),
    (dict(in_channels=2, out_channels=3, kernel_size=3, padding=1,
          padding_mode="replicate"), (2, 2, 4, 4)),
    (dict(in_channels=2, out_channels=3, kernel_size=3, padding=(1, 2),
          padding_mode="circular"), (2, 2, 4, 5)),
    (dict(in_channels=2, out_channels=3, kernel_size=3), (0, 2, 5, 5)),   # empty batch
    (dict(in_channels=2, out_channels=3, kernel_size=3), (2, 5, 5)),      # unbatched
]


@pytest.mark.parametrize("options, shape", CONV2D)
def test_conv2d_matches_torch(options, shape):
    torch.manual_seed(1)
    theirs = torch.nn.Conv2d(**options).double()
    ours = nn.Conv2d(**options).double()
    compare_module(ours, theirs, shape)


@pytest.mark.parametrize("options, shape", [
    (dict(in_channels=3, out_channels=4, kernel_size=3), (2, 3, 9)),
    (dict(in_channels=4, out_channels=2, kernel_size=2, stride=2, groups=2, dilation=2), (2, 4, 11)),
    (dict(in_channels=2, out_channels=2, kernel_size=4, padding="same"), (1, 2, 7)),
    (dict(in_channels=2, out_channels=2, kernel_size=3, padding=2, padding_mode="reflect"), (2, 2, 6)),
    (dict(in_channels=2, out_channels=2, kernel_size=3), (2, 6)),
])
def test_conv1d_matches_torch(options, shape):
    torch.manual_seed(2)
    compare_module(nn.Conv1d(**options).double(), torch.nn.Conv1d(**options).double(), shape)


@pytest.mark.parametrize("options, shape, output_size", [
    (dict(in_channels=3, out_channels=4, kernel_size=3), (2, 3, 5, 4), None),
    (dict(in_channels=4, out_channels=6, kernel_size=3, stride=2, padding=1,
          output_padding=1, groups=2), (2, 4, 4, 3), None),
    (dict(in_channels=2, out_channels=2, kernel_size=2, stride=2, dilation=2,
          bias=False), (1, 2, 3, 3), None),
    (dict(in_channels=2, out_channels=3, kernel_size=3, stride=2), (1, 2, 4, 4), (10, 9)),
])
def test_conv_transpose2d_matches_torch(options, shape, output_size):
    torch.manual_seed(3)
    call = {} if output_size is None else {"output_size": output_size}
    compare_module(nn.ConvTranspose2d(**options).double(),
                   torch.nn.ConvTranspose2d(**options).double(), shape, **call)


def test_conv_transpose1d_matches_torch():
    torch.manual_seed(4)
    options = dict(in_channels=2, out_channels=3, kernel_size=3, stride=2, padding=1,
                   output_padding=1)
    compare_module(nn.ConvTranspose1d(**options).double(),
                   torch.nn.ConvTranspose1d(**options).double(), (2, 2, 5))


def test_float32_conv_matches_torch():
    torch.manual_seed(5)
    compare_module(nn.Conv2d(8, 16, 3, padding=1), torch.nn.Conv2d(8, 16, 3, padding=1),
                   (4, 8, 12, 12), dtype=np.float32, rtol=1e-4, atol=1e-4)


def test_conv_gradcheck():
    rng = np.random.default_rng(6)
    x = ember.tensor(rng.standard_normal((2, 4, 5, 4)), requires_grad=True)
    w = ember.tensor(rng.standard_normal((6, 2, 3, 2)), requires_grad=True)
    b = ember.tensor(rng.standard_normal(6), requires_grad=True)
    assert gradcheck(lambda a, k, c: F.conv2d(a, k, c, stride=(2, 1), padding=1, groups=2),
                     (x, w, b))
    wt = ember.tensor(rng.standard_normal((4, 3, 2, 2)), requires_grad=True)
    assert gradcheck(lambda a, k: F.conv_transpose2d(a, k, stride=2, padding=1,
                                                     output_padding=1), (x, wt))
    assert gradcheck(lambda a: F.pad(a, (1, 2, 2, 1), mode="reflect"), (x,))


def test_conv_double_backward_gradgradcheck():
    """Note [Convolution's three products]: each backward is made of the
    other products' Functions, so it differentiates again."""
    rng = np.random.default_rng(7)
    x = ember.tensor(rng.standard_normal((2, 4, 6, 5)), requires_grad=True)
    w = ember.tensor(rng.standard_normal((6, 2, 3, 2)), requires_grad=True)
    b = ember.tensor(rng.standard_normal(6), requires_grad=True)
    assert gradgradcheck(lambda a, k, c: F.conv2d(a, k, c, stride=(2, 1), padding=(1, 0),
                                                  dilation=(1, 2), groups=2), (x, w, b))
    wt = ember.tensor(rng.standard_normal((4, 3, 3, 2)), requires_grad=True)
    assert gradgradcheck(lambda a, k: F.conv_transpose2d(a, k, stride=2, padding=1,
                                                         output_padding=1, groups=2), (x, wt))
    x1 = ember.tensor(rng.standard_normal((2, 3, 7)), requires_grad=True)
    w1 = ember.tensor(rng.standard_normal((4, 3, 3)), requires_grad=True)
    assert gradgradcheck(lambda a, k: F.conv1d(a, k, stride=2, dilation=2), (x1, w1))


def test_gradient_penalty_matches_torch():
    """A WGAN-GP style penalty: the norm of d(critic)/d(input) is itself
    differentiated with respect to the weights (double backward)."""
    torch.manual_seed(8)
    theirs = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, stride=2, padding=1),
                                 torch.nn.Tanh(), torch.nn.Conv2d(4, 2, 3)).double()
    ours = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.Tanh(),
                         nn.Conv2d(4, 2, 3)).double()
    check_gradient_penalty(ours, theirs, np.random.default_rng(9).standard_normal((2, 3, 9, 8)))


def check_gradient_penalty(ours, theirs, x):
    """The penalty ((|d model(x).sum() / dx| - 1) ** 2).mean() per sample,
    and its gradients with respect to the weights, the same in both."""
    copy_state(ours, theirs)
    penalties = []
    for lib, model in ((ember, ours), (torch, theirs)):
        inputs = lib.tensor(x, requires_grad=True)
        grad, = lib.autograd.grad(model(inputs).sum(), inputs, create_graph=True)
        penalty = ((grad.reshape(len(x), -1).norm(dim=1) - 1) ** 2).mean()
        penalty.backward()
        penalties.append(penalty)
    check_same(*penalties)
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        if q.grad is None:  # the last bias: the input's gradient does not depend on it
            assert p.grad is None, name
            continue
        check_same(p.grad, q.grad)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("amounts", [(1, 2), (2, 1, 0, 3), (1, 1, 1, 1, 1, 1)])
def test_pad_matches_torch(mode, amounts):
    # PyTorch pads the last 1, 2 or 3 dims of a 2-3, 3-4 or 4-5 D input in the
    # non-constant modes: a 4-D input takes 2 or 3 dims of padding.
    shape = (3, 4, 5) if mode != "constant" and len(amounts) == 2 else (2, 3, 4, 5)
    x = np.random.default_rng(7).standard_normal(shape)
    ours_x, theirs_x = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    kwargs = {"value": 1.5} if mode == "constant" else {}
    ours = F.pad(ours_x, amounts, mode=mode, **kwargs)
    theirs = TF.pad(theirs_x, amounts, mode=mode, **kwargs)
    check_same(ours, theirs)
    (ours ** 2).sum().backward()
    (theirs ** 2).sum().backward()
    check_same(ours_x.grad, theirs_x.grad)
    check_same(F.pad(ember.tensor(x), (-1, 1, 0, -2)), TF.pad(torch.tensor(x), (-1, 1, 0, -2)))


def test_pad_size_limits_match_torch():
    _same_error(lambda: F.pad(ember.ones(2, 3, 4, 5), (1, 1), mode="reflect"),
                lambda: TF.pad(torch.ones(2, 3, 4, 5), (1, 1), mode="reflect"))


def _same_error(ours_call, theirs_call):
    with pytest.raises(Exception) as theirs_info:
        theirs_call()
    with pytest.raises(type(theirs_info.value)) as ours_info:
        ours_call()
    assert str(ours_info.value) == str(theirs_info.value)


@pytest.mark.parametrize("call", [
    lambda lib: lib.nn.functional.conv2d(lib.ones(2, 3), lib.ones(6, 2, 3, 3)),
    lambda lib: lib.nn.functional.conv2d(lib.ones(1, 4, 5, 5), lib.ones(6, 2, 3, 3)),
    lambda lib: lib.nn.functional.conv2d(lib.ones(1, 2, 4, 4), lib.ones(6, 2, 5, 5)),
    lambda lib: lib.nn.functional.conv2d(lib.ones(1, 2, 4, 4), lib.ones(6, 2, 3, 3), padding=-1),
    # the dilated kernel overshoots the input by less than the stride
    lambda lib: lib.nn.functional.conv2d(lib.ones(1, 1, 2, 100), lib.ones(1, 1, 2, 1),
                                         stride=(2, 1), dilation=(2, 1)),
    lambda lib: lib.nn.functional.conv3d(lib.ones(1, 1, 2, 3, 3), lib.ones(1, 1, 2, 1, 1),
                                         stride=(2, 1, 1), dilation=(2, 1, 1)),
    lambda lib: lib.nn.functional.conv2d(lib.ones(1, 2, 4, 4), lib.ones(6, 2, 3, 3), groups=0),
    lambda lib: lib.nn.functional.conv2d(lib.ones(1, 2, 4, 4), lib.ones(6, 2, 3, 3), stride=0),
    lambda lib: lib.nn.functional.conv2d(lib.ones(1, 2, 4, 4), lib.ones(6, 2, 3, 3), lib.ones(5)),
    lambda lib: lib.nn.functional.conv2d(lib.ones(1, 2, 4, 4), lib.ones(6, 2, 3, 3), stride=2,
                                         padding="same"),
    lambda lib: lib.nn.functional.conv2d(lib.ones(1, 2, 4, 4), lib.ones(6, 2, 3, 3),
                                         padding="full"),
    lambda lib: lib.nn.functional.conv1d(lib.ones(1, 2, 4, 4), lib.ones(6, 2, 3)),
    # a weight without output channels
    lambda lib: lib.nn.functional.conv2d(lib.ones(1, 4, 8, 8), lib.ones(0, 4, 3, 3)),
    lambda lib: lib.nn.functional.conv_transpose2d(lib.ones(1, 0, 8, 8), lib.ones(0, 4, 3, 3),
                                                   padding=1),
    lambda lib: lib.nn.functional.conv_transpose2d(lib.ones(1, 2, 4, 4), lib.ones(2, 3, 3, 3),
                                                   stride=2, output_padding=2),
    # a kernel with an empty spatial dim, and transposed weights with no
    # output channels (torch names the kernel first in 1-D and 2-D, not 3-D)
    lambda lib: lib.nn.functional.conv2d(lib.ones(1, 4, 8, 8), lib.ones(4, 4, 0, 3)),
    lambda lib: lib.nn.functional.conv1d(lib.ones(1, 4, 8), lib.ones(4, 4, 0)),
    lambda lib: lib.nn.functional.conv3d(lib.ones(1, 4, 8, 8, 8), lib.ones(4, 4, 3, 0, 3)),
    lambda lib: lib.nn.functional.conv_transpose1d(lib.ones(1, 4, 8), lib.ones(4, 0, 3)),
    lambda lib: lib.nn.functional.conv_transpose1d(lib.ones(1, 4, 8), lib.ones(4, 2, 0)),
    lambda lib: lib.nn.functional.conv_transpose2d(lib.ones(1, 4, 8, 8), lib.ones(4, 0, 3, 3)),
    lambda lib: lib.nn.functional.conv_transpose2d(lib.ones(1, 4, 8, 8), lib.ones(4, 2, 0, 3)),
    lambda lib: lib.nn.functional.conv_transpose3d(lib.ones(1, 4, 8, 8, 8),
                                                   lib.ones(4, 0, 3, 3, 3)),
    lambda lib: lib.nn.functional.conv_transpose3d(lib.ones(1, 4, 8, 8, 8),
                                                   lib.ones(4, 2, 3, 0, 3)),
    lambda lib: lib.nn.functional.pad(lib.ones(1, 2, 3), (4, 4), mode="reflect"),
    lambda lib: lib.nn.functional.conv2d(lib.ones(1, 2, 4, 4, dtype=lib.float64),
                                         lib.ones(6, 2, 3, 3)),
    lambda lib: lib.nn.Conv2d(3, 4, 3, groups=2),
    lambda lib: lib.nn.Conv2d(2, 4, 3, stride=2, padding="same"),
])
def test_errors_match_torch(call):
    _same_error(lambda: call(ember), lambda: call(torch))


def test_bad_padding_mode_lists_the_modes():
    """PyTorch prints the valid modes as a set, whose order varies by process."""
    with pytest.raises(ValueError) as info:
        nn.Conv2d(2, 4, 3, padding_mode="mirror")
    text = str(info.value)
    assert text.startswith("padding_mode must be one of {")
    assert text.endswith("}, but got padding_mode='mirror'")
    listed = text[text.index("{") + 1:text.index("}")]
    assert {m.strip(" '") for m in listed.split(",")} == {"zeros", "reflect", "replicate",
                                                          "circular"}
