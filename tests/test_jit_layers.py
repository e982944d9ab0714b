"""ember.jit.script of modules built from issue 12's layers (convolution,
batch norm, pooling, multi-head attention, transformer layers), in train and eval mode, against eager ember (the same
kernels run, so bit for bit) and torch.jit.script; and ember.jit.freeze with
its batch-norm-into-convolution fold (Note [Folding batch norm into a
convolution] in jit/passes/fold_conv_bn.py)."""

import copy
from typing import Optional

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember import Tensor


def _randomise_batch_norms(module, seed=0):
    """Running statistics and affine parameters away from their defaults,
    so a fold that ignored one of them would show."""
    rng = np.random.default_rng(seed)
    for sub in module.modules():
        if isinstance(sub, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)):
            n = sub.num_features
            dtype = sub.running_mean.dtype
            with ember.no_grad():
                sub.running_mean.copy_(ember.tensor(rng.uniform(-1, 1, n), dtype=dtype))
                sub.running_var.copy_(ember.tensor(rng.uniform(0.5, 2, n), dtype=dtype))
                if sub.weight is not None:
                    sub.weight.copy_(ember.tensor(rng.uniform(0.5, 2, n), dtype=dtype))
                    sub.bias.copy_(ember.tensor(rng.uniform(-1, 1, n), dtype=dtype))
    return module


def small_cnn(dtype=ember.float32):
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(4, 6, 3, bias=False), nn.BatchNorm2d(6),
                         nn.ReLU(), nn.AdaptiveAvgPool2d((2, 2)), nn.Flatten(),
                         nn.Linear(24, 5)).to(dtype)


LAYERS = {
    "conv1d": (lambda: nn.Conv1d(3, 4, 3, padding=1), (2, 3, 9)),
    "conv1d_reflect": (lambda: nn.Conv1d(3, 4, 3, padding=2, padding_mode="reflect",
                                         dilation=2), (2, 3, 9)),
    "conv2d_strided": (lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1), (2, 3, 7, 7)),
    "conv2d_same_nobias": (lambda: nn.Conv2d(4, 4, 3, padding="same", bias=False, groups=2),
                           (1, 4, 5, 6)),
    "conv2d_circular": (lambda: nn.Conv2d(3, 2, 3, padding=1, padding_mode="circular"),
                        (2, 3, 5, 5)),
    "conv3d_strided_replicate": (lambda: nn.Conv3d(2, 3, (3, 2, 3), stride=(2, 1, 1),
                                                   padding=1, padding_mode="replicate"),
                                 (2, 2, 5, 4, 5)),
    "batchnorm1d": (lambda: nn.BatchNorm1d(3), (5, 3)),
    "batchnorm1d_3d": (lambda: nn.BatchNorm1d(3, affine=False), (4, 3, 2)),
    "batchnorm2d": (lambda: nn.BatchNorm2d(3), (2, 3, 4, 4)),
    "batchnorm2d_cumulative": (lambda: nn.BatchNorm2d(3, momentum=None), (2, 3, 4, 4)),
    "batchnorm3d": (lambda: nn.BatchNorm3d(2), (2, 2, 3, 2, 3)),
    "maxpool2d": (lambda: nn.MaxPool2d(3, stride=2, padding=1), (2, 3, 7, 7)),
    "avgpool2d": (lambda: nn.AvgPool2d(2, ceil_mode=True), (2, 3, 5, 5)),
    "adaptive_avgpool2d": (lambda: nn.AdaptiveAvgPool2d((2, 3)), (2, 3, 5, 7)),
    "small_cnn": (small_cnn, (2, 3, 8, 8)),
    "encoder_layer": (lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                         batch_first=True), (2, 5, 8)),
    "encoder_layer_norm_first_gelu": (lambda: nn.TransformerEncoderLayer(
        8, 2, 16, dropout=0.0, norm_first=True, activation="gelu"), (5, 2, 8)),
}


# Where the compiled program sums in another order than eager code: in
# batch_first self-attention CSE merges the three equal `x.transpose(0, 1)`
# of query, key and value into one, so x's gradient adds the three
# contributions in another grouping (outputs stay bit for bit).
NOT_BIT_FOR_BIT = {"encoder_layer"}


def _assert_same_gradient(got, want, name):
    if name in NOT_BIT_FOR_BIT:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


def _grads(module, x):
    return [x.grad] + [p.grad for p in module.parameters()]


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_script_matches_eager(name, training):
    make, shape = LAYERS[name]
    eager = _randomise_batch_norms(make()).train(training)
    scripted_copy = copy.deepcopy(eager)
    scripted = ember.jit.script(scripted_copy)
    x = ember.randn(*shape)
    x_eager = x.clone().requires_grad_()
    x_script = x.clone().requires_grad_()
    y_eager, y_script = eager(x_eager), scripted(x_script)
    np.testing.assert_array_equal(y_script.detach().numpy(), y_eager.detach().numpy())
    weights = ember.randn(*y_eager.shape)
    (y_eager * weights).sum().backward()
    (y_script * weights).sum().backward()
    for g_script, g_eager in zip(_grads(scripted_copy, x_script), _grads(eager, x_eager)):
        _assert_same_gradient(g_script.numpy(), g_eager.numpy(), name)
    # train mode updates the running statistics in place, as eager does
    for (key, b_script), (_, b_eager) in zip(scripted_copy.named_buffers(),
                                             eager.named_buffers()):
        np.testing.assert_array_equal(b_script.numpy(), b_eager.numpy(), err_msg=key)


def test_script_of_a_training_loop_sees_the_updates():
    """Parameters and buffers are inputs of the scripted graph, so an
    optimiser step and the running statistics are seen by the next call."""
    eager = small_cnn()
    scripted_copy = copy.deepcopy(eager)
    scripted = ember.jit.script(scripted_copy)
    opt_e = ember.optim.SGD(eager.parameters(), lr=0.1)
    opt_s = ember.optim.SGD(scripted_copy.parameters(), lr=0.1)
    for step in range(3):
        x = ember.randn(4, 3, 8, 8)
        target = ember.randint(0, 5, (4,))
        for model, opt in ((eager, opt_e), (scripted, opt_s)):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), target).backward()
            opt.step()
    eager.eval()
    scripted_copy.eval()
    x = ember.randn(2, 3, 8, 8)
    np.testing.assert_array_equal(ember.jit.script(scripted_copy)(x).detach().numpy(),
                                  eager(x).detach().numpy())


def test_dead_branches_are_not_compiled():
    """Note [Conditions decided at compile time]: a comparison of two
    module constants decides an `if` (or a conditional expression) at
    compile time, so the branch not taken may not type-check."""

    class Picky(nn.Module):
        def __init__(self):
            super().__init__()
            self.mode = "plain"
            self.size = (2, 2)

        def forward(self, x):
            size = self.size
            if self.mode != "plain":
                size = 0            # would not type-check: a tuple before
            if not self.mode == "plain" or self.size == 3:
                return x.foo()      # no such method
            return x.reshape(size) * (2.0 if self.mode == "plain" else "no")

    x = ember.arange(4.0)
    scripted = ember.jit.script(Picky())
    np.testing.assert_array_equal(scripted(x).numpy(), (x.reshape(2, 2) * 2).numpy())
    assert "aten::ne" not in str(scripted.graph)


def test_comparisons_of_run_time_values_stay_in_the_graph():
    @ember.jit.script
    def f(x, n: int):
        if n == 2:
            return x + 1
        return x - 1

    assert "prim::If" in str(f.graph)
    assert f(ember.zeros(1), 2).item() == 1 and f(ember.zeros(1), 3).item() == -1


class _Attention(nn.Module):
    """Self-attention with the masks as (Optional) script arguments."""

    def __init__(self, need_weights, batch_first=True, **options):
        super().__init__()
        self.need_weights = need_weights
        self.attn = nn.MultiheadAttention(8, 2, batch_first=batch_first, **options)

    def forward(self, x, attn_mask: Optional[Tensor] = None,
                key_padding_mask: Optional[Tensor] = None):
        out, weights = self.attn(x, x, x, key_padding_mask=key_padding_mask,
                                 need_weights=self.need_weights, attn_mask=attn_mask)
        if weights is None:
            return out
        return out + weights.sum()


ATTENTION_OPTIONS = {
    "plain": {}, "seq_first": {"batch_first": False}, "bias_kv": {"add_bias_kv": True},
    "zero_attn": {"add_zero_attn": True}, "kdim_vdim_nobias": {"kdim": 8, "vdim": 8,
                                                               "bias": False},
}


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("need_weights", [False, True], ids=["no_weights", "weights"])
@pytest.mark.parametrize("options", sorted(ATTENTION_OPTIONS))
def test_script_multihead_attention(options, need_weights, training):
    eager = _Attention(need_weights, **ATTENTION_OPTIONS[options]).train(training)
    scripted_copy = copy.deepcopy(eager)
    scripted = ember.jit.script(scripted_copy)
    batch_first = eager.attn.batch_first
    x = ember.randn(2, 5, 8) if batch_first else ember.randn(5, 2, 8)
    mask = ember.randn(5, 5)
    padding = ember.zeros(2, 5, dtype=ember.bool)
    padding[0, 4] = True
    unbatched = x[0] if batch_first else x[:, 0]
    calls = [(x,), (x, mask), (x, None, padding), (unbatched,)]
    for args in calls:
        inputs_e = [args[0].clone().requires_grad_(), *args[1:]]
        inputs_s = [args[0].clone().requires_grad_(), *args[1:]]
        y_eager, y_script = eager(*inputs_e), scripted(*inputs_s)
        np.testing.assert_array_equal(y_script.detach().numpy(), y_eager.detach().numpy())
        y_eager.sum().backward()
        y_script.sum().backward()
        for g_s, g_e in zip(_grads(scripted_copy, inputs_s[0]), _grads(eager, inputs_e[0])):
            np.testing.assert_array_equal(g_s.numpy(), g_e.numpy())
        eager.zero_grad()
        scripted_copy.zero_grad()


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_script_decoder_layer(training):
    eager = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0).train(training)
    scripted_copy = copy.deepcopy(eager)
    scripted = ember.jit.script(scripted_copy)
    x, memory = ember.randn(5, 2, 8), ember.randn(4, 2, 8)
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    x_e, x_s = x.clone().requires_grad_(), x.clone().requires_grad_()
    y_e = eager(x_e, memory, tgt_mask=mask, tgt_is_causal=True)
    y_s = scripted(x_s, memory, tgt_mask=mask, tgt_is_causal=True)
    np.testing.assert_array_equal(y_s.detach().numpy(), y_e.detach().numpy())
    y_e.sum().backward()
    y_s.sum().backward()
    for g_s, g_e in zip(_grads(scripted_copy, x_s), _grads(eager, x_e)):
        np.testing.assert_array_equal(g_s.numpy(), g_e.numpy())


def test_script_multihead_attention_bad_mask():
    scripted = ember.jit.script(_Attention(False))
    with pytest.raises(RuntimeError, match="The shape of the 2D attn_mask is"):
        scripted(ember.randn(2, 5, 8), ember.randn(4, 5))


# -- freeze and the fold ------------------------------------------------------------

def _kinds(graph):
    return [node.kind for node in graph.all_nodes()]


@pytest.mark.parametrize("dtype, tol", [(ember.float32, 1e-6), (ember.float64, 1e-12)],
                         ids=["float32", "float64"])
def test_freeze_folds_batch_norm_into_convolution(dtype, tol):
    model = _randomise_batch_norms(small_cnn(dtype)).eval()
    frozen = ember.jit.freeze(ember.jit.script(model))
    kinds = _kinds(frozen.graph)
    assert "aten::batch_norm" not in kinds
    assert kinds.count("aten::conv2d") == 2
    x = ember.randn(3, 3, 8, 8, dtype=dtype)
    expected = model(x).detach().numpy()
    np.testing.assert_allclose(frozen(x).numpy(), expected, rtol=tol, atol=tol)
    # the weights are constants now: no parameters are passed
    assert frozen._state_names == []


def test_freeze_folds_conv1d_and_batch_norm1d_without_bias_or_affine():
    model = nn.Sequential(nn.Conv1d(2, 3, 3, bias=False), nn.BatchNorm1d(3, affine=False),
                          nn.Tanh()).double()
    _randomise_batch_norms(model).eval()
    frozen = ember.jit.freeze(ember.jit.script(model))
    assert "aten::batch_norm" not in _kinds(frozen.graph)
    x = ember.randn(4, 2, 7, dtype=ember.float64)
    np.testing.assert_allclose(frozen(x).numpy(), model(x).detach().numpy(),
                               rtol=1e-12, atol=1e-12)


def test_freeze_folds_conv3d_and_batch_norm3d():
    model = nn.Sequential(nn.Conv3d(2, 3, 3, padding=1), nn.BatchNorm3d(3), nn.ReLU()).double()
    _randomise_batch_norms(model).eval()
    frozen = ember.jit.freeze(ember.jit.script(model))
    kinds = _kinds(frozen.graph)
    assert "aten::batch_norm" not in kinds and kinds.count("aten::conv3d") == 1
    x = ember.randn(2, 2, 3, 4, 5, dtype=ember.float64)
    np.testing.assert_allclose(frozen(x).numpy(), model(x).detach().numpy(),
                               rtol=1e-12, atol=1e-12)


def test_folded_weights_formula():
    """W' = W * gamma / sqrt(var + eps), b' = (b - mean) * gamma / sqrt(var + eps) + beta."""
    from ember.jit.passes.fold_conv_bn import folded_weights
    rng = np.random.default_rng(1)
    w, b, mean, gamma, beta = (rng.standard_normal(s) for s in
                               ((3, 2, 2, 2), 3, 3, 3, 3))
    var = rng.uniform(0.5, 2, 3)
    eps = 1e-3
    got_w, got_b = folded_weights(*(ember.tensor(a) for a in (w, b, mean, var, gamma, beta)),
                                  eps)
    scale = gamma / np.sqrt(var + eps)
    np.testing.assert_allclose(got_w.numpy(), w * scale[:, None, None, None], rtol=1e-14)
    np.testing.assert_allclose(got_b.numpy(), (b - mean) * scale + beta, rtol=1e-14)


class _ConvBnSharedInput(nn.Module):
    """conv -> bn, but the convolution's output is also read by the sum:
    folding would hand that reader the normalised values."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 1)
        self.bn = nn.BatchNorm2d(2)
        self.conv2 = nn.Conv2d(2, 2, 1)
        self.bn2 = nn.BatchNorm2d(2)

    def forward(self, x):
        y = self.conv(x)
        z = self.bn(y) + y
        return self.bn2(self.conv2(z))


def test_fold_only_where_valid():
    model = _randomise_batch_norms(_ConvBnSharedInput()).eval()
    frozen = ember.jit.freeze(ember.jit.script(model))
    kinds = _kinds(frozen.graph)
    assert kinds.count("aten::batch_norm") == 1      # bn (shared input) stays
    assert kinds.count("aten::conv2d") == 2          # conv2 + bn2 folded
    x = ember.randn(2, 2, 3, 3)
    np.testing.assert_allclose(frozen(x).numpy(), model(x).detach().numpy(),
                               rtol=1e-6, atol=1e-6)


def test_batch_norm_first_and_chains():
    """bn -> conv -> bn -> conv: the first bn has no convolution before it
    and stays; the second folds into the convolution before it only."""
    model = nn.Sequential(nn.BatchNorm2d(2), nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3),
                          nn.Conv2d(3, 2, 1))
    _randomise_batch_norms(model).eval()
    frozen = ember.jit.freeze(ember.jit.script(model))
    kinds = _kinds(frozen.graph)
    assert kinds.count("aten::batch_norm") == 1 and kinds.count("aten::conv2d") == 2
    x = ember.randn(2, 2, 5, 5)
    np.testing.assert_allclose(frozen(x).numpy(), model(x).detach().numpy(),
                               rtol=1e-6, atol=1e-6)


def test_frozen_graph_for_is_one_convolution():
    """Specialised to a 4-d input, the convolution's result is known to be
    4-d, so batch norm's input-rank check folds away too."""
    model = _randomise_batch_norms(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4),
                                                 nn.ReLU())).eval()
    frozen = ember.jit.freeze(ember.jit.script(model))
    kinds = [k for k in _kinds(frozen.graph_for(ember.randn(1, 3, 5, 5)))
             if k != "prim::Constant"]
    assert kinds == ["aten::conv2d", "aten::relu"]


class _CountsCalls(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 1)
        self.bn = nn.BatchNorm2d(1)
        self.register_buffer("calls", ember.zeros(()))

    def forward(self, x):
        self.calls += 1
        return self.bn(self.conv(x))


def test_freeze_keeps_state_written_in_place_as_an_input():
    model = _randomise_batch_norms(_CountsCalls()).eval()
    frozen = ember.jit.freeze(ember.jit.script(model))
    assert frozen._state_names == ["calls"]
    assert "aten::batch_norm" not in _kinds(frozen.graph)
    frozen(ember.randn(1, 1, 2, 2))
    frozen(ember.randn(1, 1, 2, 2))
    assert model.calls.item() == 2


def test_frozen_module_saves_and_loads(tmp_path):
    """The folded weights are constants of the program: save writes them."""
    model = _randomise_batch_norms(small_cnn()).eval()
    frozen = ember.jit.freeze(ember.jit.script(model))
    path = tmp_path / "frozen.ember"
    ember.jit.save(frozen, str(path))
    loaded = ember.jit.load(str(path))
    x = ember.randn(2, 3, 8, 8)
    np.testing.assert_array_equal(loaded(x).numpy(), frozen(x).numpy())


def test_freeze_without_optimize_numerics_keeps_batch_norm():
    model = _randomise_batch_norms(small_cnn()).eval()
    frozen = ember.jit.freeze(ember.jit.script(model), optimize_numerics=False)
    assert _kinds(frozen.graph).count("aten::batch_norm") == 2
    x = ember.randn(2, 3, 8, 8)
    # not bit for bit: without autograd the compiled program fuses the relus
    np.testing.assert_allclose(frozen(x).numpy(), model(x).detach().numpy(),
                               rtol=1e-6, atol=1e-6)


def test_freeze_constants_are_copies():
    model = _randomise_batch_norms(small_cnn()).eval()
    frozen = ember.jit.freeze(ember.jit.script(model))
    x = ember.randn(2, 3, 8, 8)
    before = frozen(x).numpy().copy()
    with ember.no_grad():
        model[0].weight.mul_(2)
    np.testing.assert_array_equal(frozen(x).numpy(), before)


def test_freeze_preserved_attrs_stay_inputs():
    model = _randomise_batch_norms(small_cnn()).eval()
    frozen = ember.jit.freeze(ember.jit.script(model), preserved_attrs=["1.running_mean"])
    assert frozen._state_names == ["1.running_mean"]
    assert _kinds(frozen.graph).count("aten::batch_norm") == 1  # its stats aren't constant


def test_freeze_errors():
    model = small_cnn()
    with pytest.raises(RuntimeError, match="only implemented for modules in eval mode"):
        ember.jit.freeze(ember.jit.script(model))
    with pytest.raises(RuntimeError, match="Freezing expects a ScriptModule"):
        ember.jit.freeze(model.eval())


def test_fold_respects_the_rewrite_limit(monkeypatch):
    monkeypatch.setenv("EMBER_JIT_OPT_LIMIT", "fold_conv_bn=1")
    model = _randomise_batch_norms(small_cnn()).eval()
    frozen = ember.jit.freeze(ember.jit.script(model))
    assert _kinds(frozen.graph).count("aten::batch_norm") == 1


def test_explain_names_the_fold():
    """The fold is a pass of the pipeline: explain() of a frozen module
    starts from its graph before freezing optimised it, and names the
    rewrite and its line."""
    import io
    model = _randomise_batch_norms(small_cnn()).eval()
    frozen = ember.jit.freeze(ember.jit.script(model))
    text = ember.jit.explain(frozen, ember.randn(2, 3, 8, 8), file=io.StringIO())
    assert "== fold_conv_bn: aten::conv2d+aten::batch_norm -> aten::conv2d" in text
    before, _, after = text.partition("== fold_conv_bn")
    after_graph = after.partition("==\n")[2]
    assert "aten::batch_norm(" in before and "aten::batch_norm(" not in after_graph


# -- against torch.jit -----------------------------------------------------------------

# torch 2.13 deprecates torch.jit.script/freeze in favour of torch.compile
_torch_jit_deprecated = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _torch_cnn(torch, model):
    tnn = torch.nn
    twin = tnn.Sequential(tnn.Conv2d(3, 4, 3, padding=1), tnn.BatchNorm2d(4), tnn.ReLU(),
                          tnn.MaxPool2d(2), tnn.Conv2d(4, 6, 3, bias=False),
                          tnn.BatchNorm2d(6), tnn.ReLU(), tnn.AdaptiveAvgPool2d((2, 2)),
                          tnn.Flatten(), tnn.Linear(24, 5)).double()
    twin.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                          for k, v in model.state_dict().items()})
    return twin


@_torch_jit_deprecated
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_small_cnn_against_torch_jit_script(torch, training):
    model = _randomise_batch_norms(small_cnn(ember.float64)).train(training)
    twin = _torch_cnn(torch, model).train(training)
    scripted, t_scripted = ember.jit.script(model), torch.jit.script(twin)
    x = np.random.default_rng(2).standard_normal((3, 3, 8, 8))
    ex = ember.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    y, ty = scripted(ex), t_scripted(tx)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(model[0].weight.grad.numpy(), twin[0].weight.grad.numpy(),
                               rtol=1e-10, atol=1e-12)


@_torch_jit_deprecated
def test_freeze_against_torch_jit_freeze(torch):
    model = _randomise_batch_norms(small_cnn(ember.float64)).eval()
    twin = _torch_cnn(torch, model).eval()
    frozen = ember.jit.freeze(ember.jit.script(model))
    t_frozen = torch.jit.freeze(torch.jit.script(twin))
    assert "aten::batch_norm" not in str(t_frozen.graph)     # PyTorch folds too
    assert "aten::batch_norm" not in str(frozen.graph)
    x = np.random.default_rng(3).standard_normal((2, 3, 8, 8))
    np.testing.assert_allclose(frozen(ember.tensor(x)).numpy(),
                               t_frozen(torch.tensor(x)).numpy(), rtol=1e-10, atol=1e-12)


@_torch_jit_deprecated
@pytest.mark.parametrize("need_weights", [False, True], ids=["no_weights", "weights"])
def test_multihead_attention_against_torch_jit_script(torch, need_weights):
    model = _Attention(need_weights).double().eval()
    tnn = torch.nn

    class TorchAttention(tnn.Module):
        def __init__(self):
            super().__init__()
            self.need_weights = need_weights
            self.attn = tnn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x, attn_mask: Optional[torch.Tensor] = None):
            out, weights = self.attn(x, x, x, need_weights=self.need_weights,
                                     attn_mask=attn_mask)
            if weights is None:
                return out
            return out + weights.sum()

    twin = TorchAttention().double().eval()
    twin.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                          for k, v in model.state_dict().items()})
    rng = np.random.default_rng(4)
    x, mask = rng.standard_normal((2, 5, 8)), rng.standard_normal((5, 5))
    got = ember.jit.script(model)(ember.tensor(x), ember.tensor(mask))
    want = torch.jit.script(twin)(torch.tensor(x), torch.tensor(mask))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-10,
                               atol=1e-12)
