"""nn.utils.fuse_conv_bn_eval / fuse_conv_bn_weights / fuse_linear_bn_eval
/ fuse_linear_bn_weights against PyTorch: the fused layer's weights and
outputs from the same trained batch norm, missing biases and affine
parameters, transposed convolutions, error messages.  Pure Python over
existing operators."""

import numpy as np
import pytest

import ember
import ember.nn as nn

torch = pytest.importorskip("torch")


def to_ember_state(torch_module):
    return {k: ember.tensor(v.detach().numpy().copy()) for k, v in torch_module.state_dict().items()}


def close(a, b, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=rtol, atol=atol)


def trained_twins(make_layer, make_bn, input_shape, seed=0):
    """Layer + batch norm in both libraries, with the same weights and
    running statistics (a few training batches through torch's), in eval."""
    torch.manual_seed(seed)
    layer_t, bn_t = make_layer(torch.nn).double(), make_bn(torch.nn).double()
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        if bn_t.weight is not None:
            bn_t.weight.uniform_(0.5, 1.5)
            bn_t.bias.uniform_(-0.5, 0.5)
        for _ in range(3):
            bn_t(layer_t(torch.tensor(rng.standard_normal(input_shape) * 2 + 1)))
    layer, bn = make_layer(nn).double(), make_bn(nn).double()
    layer.load_state_dict(to_ember_state(layer_t))
    bn.load_state_dict(to_ember_state(bn_t))
    for module in (layer, bn, layer_t, bn_t):
        module.eval()
    return layer, bn, layer_t, bn_t


CONVS = [
    (lambda m: m.Conv1d(3, 4, 3), lambda m: m.BatchNorm1d(4), (2, 3, 8), False),
    (lambda m: m.Conv2d(2, 3, 3, bias=False), lambda m: m.BatchNorm2d(3), (2, 2, 6, 6), False),
    (lambda m: m.Conv3d(2, 2, 2), lambda m: m.BatchNorm3d(2, affine=False), (1, 2, 4, 4, 4), False),
    (lambda m: m.ConvTranspose2d(3, 2, 2), lambda m: m.BatchNorm2d(2), (2, 3, 4, 4), True),
]


@pytest.mark.parametrize("make_layer,make_bn,shape,transpose", CONVS)
def test_fuse_conv_bn_eval_matches_torch(make_layer, make_bn, shape, transpose):
    conv, bn, conv_t, bn_t = trained_twins(make_layer, make_bn, shape)
    fused = nn.utils.fuse_conv_bn_eval(conv, bn, transpose=transpose)
    fused_t = torch.nn.utils.fuse_conv_bn_eval(conv_t, bn_t, transpose=transpose)
    assert type(fused) is type(conv) and fused is not conv
    assert isinstance(fused.weight, nn.Parameter) and isinstance(fused.bias, nn.Parameter)
    assert list(fused.state_dict()) == list(fused_t.state_dict())
    close(fused.weight, fused_t.weight)
    close(fused.bias, fused_t.bias)
    x = np.random.default_rng(7).standard_normal(shape)
    close(fused(ember.tensor(x)), fused_t(torch.tensor(x)))
    close(fused(ember.tensor(x)), bn(conv(ember.tensor(x))), rtol=1e-9)
    assert repr(fused) == repr(fused_t)


@pytest.mark.parametrize("num_features,bias", [(4, True), (4, False), (1, True)])
def test_fuse_linear_bn_eval_matches_torch(num_features, bias):
    linear, bn, linear_t, bn_t = trained_twins(
        lambda m: m.Linear(3, 4, bias=bias), lambda m: m.BatchNorm1d(num_features),
        (5, 3) if num_features == 4 else (5, 1, 3))
    fused = nn.utils.fuse_linear_bn_eval(linear, bn)
    fused_t = torch.nn.utils.fuse_linear_bn_eval(linear_t, bn_t)
    close(fused.weight, fused_t.weight)
    close(fused.bias, fused_t.bias)
    x = np.random.default_rng(7).standard_normal((5, 3))
    close(fused(ember.tensor(x)), fused_t(torch.tensor(x)))


def test_fuse_weights_functions_and_dtypes():
    rng = np.random.default_rng(2)
    w, rm = rng.standard_normal((4, 3, 2)), rng.standard_normal(4)
    rv, bw, bb = rng.uniform(0.5, 2, 4), rng.standard_normal(4), rng.standard_normal(4)
    for conv_b, bn_w, bn_b in ((None, None, None), (rng.standard_normal(4), bw, bb)):
        args = [w, conv_b, rm, rv, 1e-5, bn_w, bn_b]
        ours = nn.utils.fuse_conv_bn_weights(*[ember.tensor(a) if isinstance(a, np.ndarray) else a for a in args])
        theirs = torch.nn.utils.fuse_conv_bn_weights(*[torch.tensor(a) if isinstance(a, np.ndarray) else a
                                                       for a in args])
        for a, b in zip(ours, theirs):
            close(a, b)
            assert isinstance(a, nn.Parameter)
    # A float32 layer with a float64 batch norm stays float32.
    ours = nn.utils.fuse_linear_bn_weights(
        ember.tensor(w[:, :, 0], dtype=ember.float32), None, ember.tensor(rm), ember.tensor(rv), 1e-5,
        ember.tensor(bw), ember.tensor(bb))
    theirs = torch.nn.utils.fuse_linear_bn_weights(
        torch.tensor(w[:, :, 0], dtype=torch.float32), None, torch.tensor(rm), torch.tensor(rv), 1e-5,
        torch.tensor(bw), torch.tensor(bb))
    for a, b in zip(ours, theirs):
        assert str(a.dtype).replace("ember", "torch") == str(b.dtype)
        assert a.requires_grad == b.requires_grad
        close(a, b, rtol=1e-6)


def test_fusion_errors():
    for lib in (ember, torch):
        with pytest.raises(AssertionError) as info:
            lib.nn.utils.fuse_conv_bn_eval(lib.nn.Conv1d(2, 2, 1), lib.nn.BatchNorm1d(2))
        assert str(info.value) == "Fusion only for eval!"
        with pytest.raises(AssertionError) as info:
            lib.nn.utils.fuse_linear_bn_eval(lib.nn.Linear(2, 3).eval(), lib.nn.BatchNorm1d(2).eval())
        assert str(info.value) == ("To fuse, linear.out_features == bn.num_features or bn.num_features == 1, "
                                   "got linear.out_features=3 and bn.num_features=2")
        with pytest.raises(AssertionError) as info:
            lib.nn.utils.fuse_conv_bn_eval(lib.nn.Conv1d(2, 2, 1).eval(),
                                           lib.nn.BatchNorm1d(2, track_running_stats=False).eval())
        assert str(info.value) == "bn.running_mean and bn.running_var must not be None"
