"""ember.nn against torch.nn: Parameter, Module machinery, layers, init,
functional losses, containers, reprs, state_dict and load_state_dict.

Weights are copied from the torch module into the ember one (through
load_state_dict), so forward outputs must agree to float tolerance; error
messages must agree with torch's once "torch" reads "ember".
"""

import copy
import math
import warnings
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.nn import init


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def to_numpy(t):
    return t.detach().numpy()


def to_torch(torch, t):
    return torch.from_numpy(to_numpy(t).copy())


def to_ember(t):
    return ember.from_numpy(t.detach().numpy().copy())


def load_from_torch(ember_module, torch_module):
    """Copies torch_module's state into ember_module (same layout)."""
    state = OrderedDict((k, to_ember(v)) for k, v in torch_module.state_dict().items())
    result = ember_module.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []


def assert_close(ember_t, torch_t, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(to_numpy(ember_t), torch_t.detach().numpy(),
                               rtol=rtol, atol=atol)


def same_error(ember_call, torch_call):
    """Both calls raise the same exception type with the same message
    (torch's "torch" read as "ember")."""
    with pytest.raises(Exception) as torch_info:
        torch_call()
    with pytest.raises(type(torch_info.value)) as ember_info:
        ember_call()
    expected = str(torch_info.value).replace("torch", "ember")
    assert str(ember_info.value) == expected


def backward_or_skip(loss):
    """loss.backward(), skipping the test while autograd (or a formula it
    needs) is missing from this build."""
    if not hasattr(ember, "autograd"):
        pytest.skip("ember.autograd is not available")
    try:
        loss.backward()
    except NotImplementedError as exc:
        pytest.skip(f"autograd formula missing: {exc}")


def forward_or_skip(fn):
    """Runs a forward pass with grad on; skips if an op has no formula yet."""
    try:
        return fn()
    except NotImplementedError as exc:
        pytest.skip(f"autograd formula missing: {exc}")


# ---- Parameter ----------------------------------------------------------------

def test_parameter_shares_memory_and_requires_grad():
    data = ember.ones(2, 3)
    p = nn.Parameter(data)
    assert isinstance(p, nn.Parameter) and isinstance(p, ember.Tensor)
    assert p.requires_grad and p.is_leaf
    data.fill_(5.0)
    assert to_numpy(p).sum() == 30.0
    assert not nn.Parameter(ember.ones(2), requires_grad=False).requires_grad
    assert type(p * 2) is ember.Tensor
    assert nn.Parameter().shape == (0,)


def test_parameter_repr_matches_torch(torch):
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    e = nn.Parameter(ember.from_numpy(values.copy()))
    t = torch.nn.Parameter(torch.from_numpy(values.copy()))
    assert repr(e) == repr(t)
    assert repr(nn.Parameter(ember.zeros(2), requires_grad=False)) == repr(
        torch.nn.Parameter(torch.zeros(2), requires_grad=False))


def test_parameter_deepcopy_is_independent():
    p = nn.Parameter(ember.ones(3))
    q = copy.deepcopy(p)
    assert type(q) is nn.Parameter and q.requires_grad
    q.detach().fill_(2.0)
    assert to_numpy(p).sum() == 3.0


# ---- Module registration and walks ---------------------------------------------

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(4, 2)
        self.register_buffer("steps", ember.zeros((), dtype=ember.int64))
        self.register_buffer("scratch", ember.zeros(2), persistent=False)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class TorchNet:
    """The same network in torch (built lazily: torch may be absent)."""

    @staticmethod
    def make(torch):
        class _Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = torch.nn.Linear(3, 4)
                self.act = torch.nn.ReLU()
                self.fc2 = torch.nn.Linear(4, 2)
                self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
                self.register_buffer("scratch", torch.zeros(2), persistent=False)

            def forward(self, x):
                return self.fc2(self.act(self.fc1(x)))
        _Net.__name__ = "Net"
        return _Net()


def test_registration_and_names():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == [
        "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert [n for n, _ in net.named_buffers()] == ["steps", "scratch"]
    assert [n for n, _ in net.named_children()] == ["fc1", "act", "fc2"]
    assert [n for n, _ in net.named_modules()] == ["", "fc1", "act", "fc2"]
    assert list(net.state_dict()) == ["steps", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    assert net.fc1.weight is net.fc1._parameters["weight"]
    assert [n for n, _ in net.named_parameters(prefix="model", recurse=False)] == []
    assert [n for n, _ in net.fc1.named_parameters(prefix="m")] == ["m.weight", "m.bias"]
    assert "fc1" in dir(net)


def test_state_dict_keys_match_torch(torch):
    net, tnet = Net(), TorchNet.make(torch)
    assert list(net.state_dict()) == list(tnet.state_dict())
    assert dict(net.state_dict()._metadata) == dict(tnet.state_dict()._metadata)


def test_shared_parameters_are_listed_once():
    net = nn.Module()
    net.a = nn.Linear(2, 2)
    net.b = net.a
    assert [n for n, _ in net.named_parameters()] == ["a.weight", "a.bias"]
    assert len(list(net.parameters())) == 2
    assert [n for n, _ in net.named_parameters(remove_duplicate=False)] == [
        "a.weight", "a.bias", "b.weight", "b.bias"]
    assert list(net.state_dict()) == ["a.weight", "a.bias", "b.weight", "b.bias"]


def test_reassignment_moves_between_registries():
    m = nn.Module()
    m.x = nn.Parameter(ember.ones(1))
    assert "x" in m._parameters
    m.x = None
    assert m.x is None and "x" in m._parameters
    del m.x
    m.x = nn.Linear(1, 1)
    assert "x" in m._modules and "x" not in m._parameters
    del m.x
    m.register_buffer("x", ember.ones(1))
    m.x = ember.zeros(2)
    assert m._buffers["x"].shape == (2,)
    with pytest.raises(TypeError, match="cannot assign 'int' as buffer 'x'"):
        m.x = 3
    m.y = 3
    assert m.__dict__["y"] == 3


def test_attribute_errors_match_torch(torch):
    e, t = nn.Linear(2, 2), torch.nn.Linear(2, 2)
    same_error(lambda: e.nothing, lambda: t.nothing)
    same_error(lambda: setattr(e, "weight", ember.ones(2, 2)),
               lambda: setattr(t, "weight", torch.ones(2, 2)))
    same_error(lambda: e.register_parameter("a.b", None),
               lambda: t.register_parameter("a.b", None))
    same_error(lambda: e.register_parameter("", None),
               lambda: t.register_parameter("", None))
    same_error(lambda: e.register_parameter("w", ember.ones(1)),
               lambda: t.register_parameter("w", torch.ones(1)))
    same_error(lambda: e.register_parameter(1, None),
               lambda: t.register_parameter(1, None))
    same_error(lambda: e.register_buffer("weight", ember.ones(1)),
               lambda: t.register_buffer("weight", torch.ones(1)))
    same_error(lambda: e.register_buffer("b2", 3),
               lambda: t.register_buffer("b2", 3))
    same_error(lambda: e.add_module("weight", nn.ReLU()),
               lambda: t.add_module("weight", torch.nn.ReLU()))
    same_error(lambda: e.add_module("x", 3), lambda: t.add_module("x", 3))
    same_error(lambda: e.add_module("a.b", None), lambda: t.add_module("a.b", None))
    same_error(lambda: e.train(1), lambda: t.train(1))
    seq_e, seq_t = nn.Sequential(nn.ReLU()), torch.nn.Sequential(torch.nn.ReLU())
    same_error(lambda: setattr(seq_e, "0", 3), lambda: setattr(seq_t, "0", 3))


def test_assign_before_init_raises():
    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ember.ones(1))

    with pytest.raises(AttributeError, match="cannot assign parameters before Module.__init__"):
        Early()


# ---- modes, gradients, conversions, hooks --------------------------------------

def test_train_eval_propagate():
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.5)))
    assert net.training and net[1][0].training
    assert net.eval() is net
    assert not net.training and not net[1][0].training
    net.train()
    assert all(m.training for m in net.modules())


def test_zero_grad_and_requires_grad_():
    net = nn.Linear(2, 2)
    for p in net.parameters():
        p.grad = ember.ones_like(p)
    net.zero_grad(set_to_none=False)
    assert all(p.grad is not None and p.grad.abs().sum().item() == 0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    assert net.requires_grad_(False) is net
    assert not any(p.requires_grad for p in net.parameters())


def test_to_double_keeps_parameter_identity():
    net = Net()
    weight = net.fc1.weight
    weight.grad = ember.ones_like(weight)
    assert net.double() is net
    assert net.fc1.weight is weight
    assert weight.dtype == ember.float64 and isinstance(weight, nn.Parameter)
    assert weight.grad.dtype == ember.float64
    assert weight.requires_grad
    assert net.steps.dtype == ember.int64  # integer buffers keep their dtype
    assert net.scratch.dtype == ember.float64
    net.to(ember.float32)
    assert weight.dtype == ember.float32
    net.float()
    with pytest.raises(TypeError, match="only accepts floating point"):
        net.to(ember.int64)
    x = ember.randn(2, 3, dtype=ember.float64)
    with ember.no_grad():
        assert net.double()(x).dtype == ember.float64


def test_apply_visits_children_first():
    seen = []
    net = nn.Sequential(nn.Linear(1, 1), nn.Sequential(nn.ReLU()))
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "ReLU", "Sequential", "Sequential"]


def test_forward_hooks():
    net = nn.Identity()
    calls = []

    def pre(module, args):
        calls.append("pre")
        return (args[0] + 1,)

    def post(module, args, output):
        calls.append("post")
        return output * 10

    h1 = net.register_forward_pre_hook(pre)
    h2 = net.register_forward_hook(post)
    assert net(ember.tensor(1.0)).item() == 20.0
    assert calls == ["pre", "post"]
    h1.remove()
    with h2:
        assert net(ember.tensor(1.0)).item() == 10.0
    assert net(ember.tensor(1.0)).item() == 1.0
    net.register_forward_pre_hook(lambda m, a, k: ((a[0] * 3,), k), with_kwargs=True)
    net.register_forward_hook(lambda m, a, k, o: o - 1, with_kwargs=True)
    net.register_forward_pre_hook(lambda m, a: a[0] + 1, prepend=True)
    assert net(ember.tensor(1.0)).item() == 5.0


def test_missing_forward():
    with pytest.raises(NotImplementedError, match='missing the required "forward"'):
        nn.Module()(1)


# ---- state_dict / load_state_dict ----------------------------------------------

def test_state_dict_detached_and_shares_memory():
    net = nn.Linear(2, 2)
    state = net.state_dict()
    assert not state["weight"].requires_grad
    assert type(state["weight"]) is ember.Tensor
    state["weight"].fill_(3.0)
    assert to_numpy(net.weight).sum() == 12.0
    assert net.state_dict(keep_vars=True)["weight"] is net.weight


def test_load_state_dict_from_torch_and_forward(torch):
    net, tnet = Net(), TorchNet.make(torch)
    load_from_torch(net, tnet)
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    with ember.no_grad():
        out = net(ember.from_numpy(x))
    assert_close(out, tnet(torch.from_numpy(x)))


def test_load_state_dict_errors_match_torch_and_modify_nothing(torch):
    net, tnet = Net(), TorchNet.make(torch)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    bad = OrderedDict((k, to_ember(v)) for k, v in tnet.state_dict().items())
    tbad = OrderedDict(tnet.state_dict())
    bad["fc1.weight"] = ember.zeros(5, 3)
    tbad["fc1.weight"] = torch.zeros(5, 3)
    del bad["fc2.bias"], tbad["fc2.bias"]
    bad["extra"] = ember.zeros(1)
    tbad["extra"] = torch.zeros(1)
    bad["fc1.bogus"] = ember.zeros(1)
    tbad["fc1.bogus"] = torch.zeros(1)
    same_error(lambda: net.load_state_dict(bad), lambda: TorchNet.make(torch).load_state_dict(tbad))
    for key, value in net.state_dict().items():
        assert np.array_equal(to_numpy(value), to_numpy(before[key])), key
    # strict=False still reports size mismatches, and still modifies nothing.
    same_error(lambda: net.load_state_dict(bad, strict=False),
               lambda: TorchNet.make(torch).load_state_dict(tbad, strict=False))
    assert np.array_equal(to_numpy(net.fc2.weight), to_numpy(before["fc2.weight"]))


def test_load_state_dict_non_strict_reports_keys(torch):
    net = Net()
    state = OrderedDict((k, v.clone()) for k, v in net.state_dict().items())
    state["fc2.weight"].fill_(7.0)
    del state["fc2.bias"]
    state["unused"] = ember.zeros(1)
    result = net.load_state_dict(state, strict=False)
    tresult = TorchNet.make(torch).load_state_dict(
        {k: to_torch(torch, v) for k, v in state.items()}, strict=False)
    assert result.missing_keys == tresult.missing_keys == ["fc2.bias"]
    assert result.unexpected_keys == tresult.unexpected_keys == ["unused"]
    assert repr(result) == repr(tresult)
    assert to_numpy(net.fc2.weight).sum() == 56.0
    full = net.load_state_dict(net.state_dict())
    assert repr(full) == "<All keys matched successfully>"
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
        net.load_state_dict([1, 2])


def test_load_state_dict_converts_dtype():
    net = nn.Linear(2, 1)
    state = {"weight": ember.ones(1, 2, dtype=ember.float64), "bias": ember.zeros(1)}
    net.load_state_dict(state)
    assert net.weight.dtype == ember.float32 and to_numpy(net.weight).sum() == 2.0


# ---- repr -----------------------------------------------------------------------

def test_repr_matches_torch(torch):
    e = nn.Sequential(
        nn.Linear(3, 4), nn.ReLU(inplace=True), nn.LayerNorm([2, 4], eps=1e-6),
        nn.Dropout(0.1), nn.GELU(approximate="tanh"), nn.Softmax(dim=1),
        nn.LogSoftmax(dim=-1), nn.Tanh(), nn.Sigmoid(), nn.SiLU(), nn.Identity(),
        nn.Flatten(0, 1), nn.Embedding(10, 3, padding_idx=-1, max_norm=1.0),
        nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2), nn.Linear(2, 3), nn.ReLU()]),
        nn.ModuleDict({"head": nn.Linear(4, 1, bias=False), "loss": nn.CrossEntropyLoss()}),
        nn.Sequential(), nn.ModuleList(), nn.LayerNorm(4, elementwise_affine=False),
        nn.MSELoss(), nn.BCEWithLogitsLoss(),
    )
    tnn = torch.nn
    t = tnn.Sequential(
        tnn.Linear(3, 4), tnn.ReLU(inplace=True), tnn.LayerNorm([2, 4], eps=1e-6),
        tnn.Dropout(0.1), tnn.GELU(approximate="tanh"), tnn.Softmax(dim=1),
        tnn.LogSoftmax(dim=-1), tnn.Tanh(), tnn.Sigmoid(), tnn.SiLU(), tnn.Identity(),
        tnn.Flatten(0, 1), tnn.Embedding(10, 3, padding_idx=-1, max_norm=1.0),
        tnn.ModuleList([tnn.Linear(2, 2), tnn.Linear(2, 2), tnn.Linear(2, 3), tnn.ReLU()]),
        tnn.ModuleDict({"head": tnn.Linear(4, 1, bias=False), "loss": tnn.CrossEntropyLoss()}),
        tnn.Sequential(), tnn.ModuleList(), tnn.LayerNorm(4, elementwise_affine=False),
        tnn.MSELoss(), tnn.BCEWithLogitsLoss(),
    )
    assert repr(e) == repr(t)
    assert list(e.state_dict()) == list(t.state_dict())


# ---- layers ----------------------------------------------------------------------

def test_linear_default_init_bounds():
    ember.manual_seed(0)
    layer = nn.Linear(16, 8)
    bound = 1 / math.sqrt(16)
    w, b = to_numpy(layer.weight), to_numpy(layer.bias)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.6 * bound  # really spread over the interval
    assert layer.weight.shape == (8, 16) and layer.bias.shape == (8,)
    assert nn.Linear(2, 3, bias=False).bias is None
    assert nn.Linear(2, 3, dtype=ember.float64).weight.dtype == ember.float64


@pytest.mark.parametrize("shape", [(3,), (4, 3), (2, 5, 3)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_forward(torch, shape, bias):
    e, t = nn.Linear(3, 2, bias=bias), torch.nn.Linear(3, 2, bias=bias)
    load_from_torch(e, t)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    with ember.no_grad():
        assert_close(e(ember.from_numpy(x)), t(torch.from_numpy(x)))


@pytest.mark.parametrize("make_input", [
    lambda x: x,                          # contiguous: folded into one addmm
    lambda x: x.transpose(0, 1),          # strided: matmul, then the bias
    lambda x: x[0, 0],                    # 1-D
], ids=["contiguous", "transposed", "vector"])
def test_linear_nd_gradients_and_graph_as_torch(torch, make_input):
    """F.linear of an N-D input: PyTorch's grad_fn (ViewBackward0 when the
    leading dims fold into one addmm, AddBackward0 otherwise), values,
    every gradient, and the weight gradient in the weight's layout."""
    e, t = nn.Linear(3, 4), torch.nn.Linear(3, 4)
    load_from_torch(e, t)
    x = np.random.default_rng(2).standard_normal((2, 5, 3)).astype(np.float32)
    xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_e, out_t = e(make_input(xe)), t(make_input(xt))
    assert type(out_e.grad_fn).__name__ == type(out_t.grad_fn).__name__
    assert_close(out_e, out_t)
    g = np.random.default_rng(3).standard_normal(tuple(out_t.shape)).astype(np.float32)
    out_e.backward(ember.tensor(g))
    out_t.backward(torch.tensor(g))
    for ours, theirs in ((xe, xt), (e.weight, t.weight), (e.bias, t.bias)):
        assert_close(ours.grad, theirs.grad, rtol=1e-5, atol=1e-5)
    assert e.weight.grad.stride() == t.weight.grad.stride()


def test_linear_shape_error_matches_torch(torch):
    same_error(lambda: F.linear(ember.ones(3, 2), ember.ones(3, 3)),
               lambda: torch.nn.functional.linear(torch.ones(3, 2), torch.ones(3, 3)))


def test_embedding(torch):
    e, t = nn.Embedding(6, 3, padding_idx=2), torch.nn.Embedding(6, 3, padding_idx=2)
    assert to_numpy(e.weight)[2].tolist() == [0.0, 0.0, 0.0]
    load_from_torch(e, t)
    idx = np.array([[0, 2, 5], [1, 1, 3]], dtype=np.int64)
    with ember.no_grad():
        assert_close(e(ember.from_numpy(idx)), t(torch.from_numpy(idx)))
    with ember.no_grad():
        same_error(lambda: e(ember.tensor([6])), lambda: t(torch.tensor([6])))
    same_error(lambda: nn.Embedding(3, 2, padding_idx=3),
               lambda: torch.nn.Embedding(3, 2, padding_idx=3))
    assert nn.Embedding(4, 2, padding_idx=-1).padding_idx == 3
    same_error(lambda: F.embedding(ember.tensor([1.0]), ember.ones(3, 2)),
               lambda: torch.nn.functional.embedding(torch.tensor([1.0]), torch.ones(3, 2)))


def test_embedding_max_norm_renormalises_in_place(torch):
    weight = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32) * 3
    ew, tw = ember.from_numpy(weight.copy()), torch.from_numpy(weight.copy())
    idx = np.array([0, 3, 3], dtype=np.int64)
    out = F.embedding(ember.from_numpy(idx), ew, max_norm=1.5)
    tout = torch.nn.functional.embedding(torch.from_numpy(idx), tw, max_norm=1.5)
    assert_close(out, tout)
    assert_close(ew, tw)


def test_embedding_from_pretrained():
    weight = ember.arange(6, dtype=ember.float32).reshape(3, 2)
    emb = nn.Embedding.from_pretrained(weight)
    assert not emb.weight.requires_grad
    assert emb(ember.tensor([2])).tolist() == [[4.0, 5.0]]


@pytest.mark.parametrize("normalized_shape,affine", [(4, True), ((3, 4), True), (4, False)])
def test_layer_norm(torch, normalized_shape, affine):
    e = nn.LayerNorm(normalized_shape, elementwise_affine=affine)
    t = torch.nn.LayerNorm(normalized_shape, elementwise_affine=affine)
    if affine:
        assert to_numpy(e.weight).min() == 1.0 and to_numpy(e.bias).max() == 0.0
        with torch.no_grad():
            t.weight.normal_()
            t.bias.normal_()
        load_from_torch(e, t)
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32) * 5 + 2
    with ember.no_grad():
        assert_close(e(ember.from_numpy(x)), t(torch.from_numpy(x)), atol=1e-5)
    same_error(lambda: e(ember.ones(4, 5)), lambda: t(torch.ones(4, 5)))


def test_dropout():
    ember.manual_seed(0)
    x = ember.ones(4000)
    drop = nn.Dropout(0.25)
    out = to_numpy(drop(x))
    kept = out != 0
    np.testing.assert_allclose(out[kept], 1 / 0.75, rtol=1e-6)  # the survivors are scaled
    assert 0.70 < kept.mean() < 0.80
    drop.eval()
    assert drop(x) is x
    assert F.dropout(x, 0.0) is x
    assert to_numpy(F.dropout(x, 1.0)).max() == 0.0
    y = ember.ones(10)
    assert F.dropout(y, 0.5, inplace=True) is y
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, but got 1.5"):
        nn.Dropout(1.5)


def test_activations_match_torch(torch):
    x = np.random.default_rng(4).standard_normal((3, 5)).astype(np.float32) * 3
    ex, tx = ember.from_numpy(x.copy()), torch.from_numpy(x.copy())
    pairs = [
        (nn.ReLU(), torch.nn.ReLU()), (nn.GELU(), torch.nn.GELU()),
        (nn.GELU("tanh"), torch.nn.GELU("tanh")), (nn.SiLU(), torch.nn.SiLU()),
        (nn.Tanh(), torch.nn.Tanh()), (nn.Sigmoid(), torch.nn.Sigmoid()),
        (nn.Softmax(dim=0), torch.nn.Softmax(dim=0)),
        (nn.LogSoftmax(dim=1), torch.nn.LogSoftmax(dim=1)),
        (nn.Flatten(0), torch.nn.Flatten(0)), (nn.Identity(3), torch.nn.Identity(3)),
    ]
    with ember.no_grad():
        for e, t in pairs:
            assert_close(e(ex), t(tx))
        assert_close(F.logsigmoid(ex), torch.nn.functional.logsigmoid(tx))
        y = ex.clone()
        assert F.relu(y, inplace=True) is y
        assert_close(y, torch.relu(tx))
        with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
            assert_close(F.softmax(ex), torch.softmax(tx, 1))


# ---- containers --------------------------------------------------------------------

def test_sequential_indexing(torch):
    layers = [nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1)]
    seq = nn.Sequential(*layers)
    assert len(seq) == 3 and seq[0] is layers[0] and seq[-1] is layers[2]
    sub = seq[1:]
    assert type(sub) is nn.Sequential and list(sub) == layers[1:]
    assert list(sub._modules) == ["1", "2"]  # PyTorch keeps the keys of a slice
    seq.append(nn.Tanh())
    assert len(seq) == 4 and list(seq._modules) == ["0", "1", "2", "3"]
    del seq[1]
    assert list(seq._modules) == ["0", "1", "2"] and seq[1] is layers[2]
    seq[0] = nn.Identity()
    assert type(seq[0]) is nn.Identity
    same_error(lambda: seq[5], lambda: torch.nn.Sequential(torch.nn.ReLU())[5])
    named = nn.Sequential(OrderedDict([("first", nn.ReLU()), ("second", nn.Tanh())]))
    assert named.second is named[1]
    with ember.no_grad():
        assert nn.Sequential(nn.ReLU(), nn.Tanh())(ember.tensor([-1.0, 0.5])).tolist() == [
            0.0, pytest.approx(math.tanh(0.5))]


def test_module_list_and_dict():
    ml = nn.ModuleList([nn.ReLU(), nn.Tanh()])
    ml.append(nn.Sigmoid())
    ml += [nn.Identity()]
    ml.insert(1, nn.GELU())
    assert [type(m).__name__ for m in ml] == ["ReLU", "GELU", "Tanh", "Sigmoid", "Identity"]
    assert type(ml[1:3]) is nn.ModuleList and len(ml[1:3]) == 2
    assert type(ml.pop(0)) is nn.ReLU and list(ml._modules) == ["0", "1", "2", "3"]
    with pytest.raises(IndexError, match="index 9 is out of range"):
        ml[9]
    md = nn.ModuleDict({"a": nn.ReLU()})
    md["b"] = nn.Linear(1, 1)
    md.update([("c", nn.Tanh())])
    assert list(md) == ["a", "b", "c"] and "b" in md and len(md) == 3
    assert [n for n, _ in md.named_parameters()] == ["b.weight", "b.bias"]
    assert type(md.pop("a")) is nn.ReLU and list(md.keys()) == ["b", "c"]
    outer = nn.Module()
    outer.layers = ml
    assert [n for n, _ in outer.named_modules()][:2] == ["", "layers"]


# ---- init ----------------------------------------------------------------------------

def test_init_functions_match_torch_formulas(torch):
    for nonlinearity, param in [("linear", None), ("tanh", None), ("relu", None),
                                ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None),
                                ("sigmoid", None)]:
        assert init.calculate_gain(nonlinearity, param) == torch.nn.init.calculate_gain(
            nonlinearity, param)
    same_error(lambda: init.calculate_gain("foo"), lambda: torch.nn.init.calculate_gain("foo"))
    w = ember.empty(5, 3, 2)
    assert init._calculate_fan_in_and_fan_out(w) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(5, 3, 2))
    same_error(lambda: init.xavier_uniform_(ember.empty(3)),
               lambda: torch.nn.init.xavier_uniform_(torch.empty(3)))
    same_error(lambda: init.kaiming_uniform_(ember.empty(3, 3), mode="x"),
               lambda: torch.nn.init.kaiming_uniform_(torch.empty(3, 3), mode="x"))


def test_init_functions_write_in_place():
    ember.manual_seed(1)
    w = nn.Parameter(ember.empty(64, 32))
    checks = [
        (lambda: init.uniform_(w, -0.5, 0.25), lambda a: a.min() >= -0.5 and a.max() <= 0.25),
        (lambda: init.normal_(w, 3.0, 0.5), lambda a: abs(a.mean() - 3.0) < 0.05 and abs(a.std() - 0.5) < 0.05),
        (lambda: init.constant_(w, 0.3), lambda a: np.allclose(a, 0.3)),
        (lambda: init.ones_(w), lambda a: (a == 1).all()),
        (lambda: init.zeros_(w), lambda a: (a == 0).all()),
        (lambda: init.xavier_uniform_(w, gain=2.0),
         lambda a: np.abs(a).max() <= 2.0 * math.sqrt(6 / 96)),
        (lambda: init.xavier_normal_(w), lambda a: abs(a.std() - math.sqrt(2 / 96)) < 0.02),
        (lambda: init.kaiming_uniform_(w, nonlinearity="relu"),
         lambda a: np.abs(a).max() <= math.sqrt(2) * math.sqrt(3 / 32)),
        (lambda: init.kaiming_normal_(w, mode="fan_out"),
         lambda a: abs(a.std() - init.calculate_gain("leaky_relu", 0) / math.sqrt(64)) < 0.02),
    ]
    for fill, check in checks:
        assert fill() is w
        assert check(to_numpy(w).astype(np.float64))
    assert w.requires_grad and w.is_leaf
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        init.kaiming_uniform_(ember.empty(0, 3))


# ---- functional losses ---------------------------------------------------------------

REDUCTIONS = ["none", "mean", "sum"]


def _class_inputs(shape, n_classes, seed, ignore=None):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal(shape).astype(np.float64) * 2
    target_shape = shape[:1] + shape[2:] if len(shape) > 1 else ()
    target = rng.integers(0, n_classes, size=target_shape).astype(np.int64)
    if ignore is not None and target.ndim > 0:
        target.reshape(-1)[::3] = ignore
    return logits, np.asarray(target)


@pytest.mark.parametrize("shape", [(5,), (4, 5), (3, 5, 2), (2, 5, 2, 3)])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("use_weight", [False, True])
@pytest.mark.parametrize("ignore_index,label_smoothing", [(-100, 0.0), (1, 0.0), (-100, 0.2), (2, 0.3)])
def test_cross_entropy_and_nll_match_torch(torch, shape, reduction, use_weight,
                                           ignore_index, label_smoothing):
    logits, target = _class_inputs(shape, 5, seed=sum(shape), ignore=ignore_index)
    weight = np.linspace(0.5, 2.0, 5) if use_weight else None
    kwargs = dict(ignore_index=ignore_index, reduction=reduction)
    e_args = (ember.from_numpy(logits), ember.from_numpy(target))
    t_args = (torch.from_numpy(logits), torch.from_numpy(target))
    e_w = None if weight is None else ember.from_numpy(weight)
    t_w = None if weight is None else torch.from_numpy(weight)
    got = F.cross_entropy(*e_args, weight=e_w, label_smoothing=label_smoothing, **kwargs)
    want = torch.nn.functional.cross_entropy(*t_args, weight=t_w,
                                             label_smoothing=label_smoothing, **kwargs)
    assert_close(got, want, rtol=1e-10, atol=1e-12)
    log_probs = np.log(np.exp(logits) / np.exp(logits).sum(axis=0 if len(shape) == 1 else 1,
                                                           keepdims=True))
    got = F.nll_loss(ember.from_numpy(log_probs), e_args[1], weight=e_w, **kwargs)
    want = torch.nn.functional.nll_loss(torch.from_numpy(log_probs), t_args[1], weight=t_w, **kwargs)
    assert_close(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 2), (3,)])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("use_weight,label_smoothing", [(False, 0.0), (True, 0.0), (True, 0.25)])
def test_cross_entropy_probability_targets(torch, shape, reduction, use_weight, label_smoothing):
    rng = np.random.default_rng(7)
    logits = rng.standard_normal(shape)
    class_dim = 0 if len(shape) == 1 else 1
    target = rng.random(shape)
    target /= target.sum(axis=class_dim, keepdims=True)
    weight = np.array([0.2, 1.0, 3.0]) if use_weight else None
    got = F.cross_entropy(ember.from_numpy(logits), ember.from_numpy(target),
                          weight=None if weight is None else ember.from_numpy(weight),
                          reduction=reduction, label_smoothing=label_smoothing)
    want = torch.nn.functional.cross_entropy(
        torch.from_numpy(logits), torch.from_numpy(target),
        weight=None if weight is None else torch.from_numpy(weight),
        reduction=reduction, label_smoothing=label_smoothing)
    assert_close(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_one_dim_input_with_one_element_target(torch, reduction):
    x = np.array([0.3, -1.2, 2.0])
    for e_fn, t_fn in [(F.cross_entropy, torch.nn.functional.cross_entropy),
                       (F.nll_loss, torch.nn.functional.nll_loss)]:
        for target in ([2], [-100]):
            got = e_fn(ember.from_numpy(x), ember.tensor(target), reduction=reduction)
            want = t_fn(torch.from_numpy(x), torch.tensor(target), reduction=reduction)
            assert got.shape == want.shape
            np.testing.assert_allclose(to_numpy(got), want.numpy(), rtol=1e-12)


def test_cross_entropy_all_ignored_is_nan(torch):
    got = F.cross_entropy(ember.randn(2, 3), ember.tensor([-100, -100]))
    assert math.isnan(got.item())


def test_class_loss_errors_match_torch(torch):
    tF = torch.nn.functional
    cases = [
        ((4, 3), [0, 1, 3, 0], {}),
        ((4, 3), [0, 1, -1, 0], {}),
        ((4, 3), [0, 1], {}),
        ((4, 3), [[0], [1], [2], [0]], {}),
        ((2, 3, 4), [[0] * 5, [1] * 5], {}),
        ((2, 3, 4), [0, 1], {}),
        ((3,), [0, 1], {}),
        ((2, 3, 4), 1, {}),
        ((2, 3), 1, {}),
        ((4, 3), [0, 1, 2, 0], {"reduction": "avg"}),
        ((4, 3), [0, 1, 2, 0], {"label_smoothing": 1.5}),
        ((4, 3), [0, 1, 2, 0], {"weight": [1.0, 2.0]}),
    ]
    for shape, target, kwargs in cases:
        logits = np.zeros(shape)
        e_kwargs, t_kwargs = dict(kwargs), dict(kwargs)
        if "weight" in kwargs:
            e_kwargs["weight"] = ember.tensor(kwargs["weight"], dtype=ember.float64)
            t_kwargs["weight"] = torch.tensor(kwargs["weight"], dtype=torch.float64)
        for e_fn, t_fn in [(F.cross_entropy, tF.cross_entropy), (F.nll_loss, tF.nll_loss)]:
            if "label_smoothing" in kwargs and e_fn is F.nll_loss:
                continue
            same_error(
                lambda: e_fn(ember.from_numpy(logits), ember.tensor(target), **e_kwargs),
                lambda: t_fn(torch.from_numpy(logits), torch.tensor(target), **t_kwargs))
    same_error(lambda: F.cross_entropy(ember.zeros(2, 3), ember.tensor([0, 1], dtype=ember.int32)),
               lambda: tF.cross_entropy(torch.zeros(2, 3), torch.tensor([0, 1], dtype=torch.int32)))
    same_error(lambda: F.cross_entropy(ember.zeros(2, 3), ember.zeros(2, 3, dtype=ember.int64)),
               lambda: tF.cross_entropy(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.int64)))
    same_error(lambda: F.cross_entropy(ember.zeros(2, 3), ember.zeros(2, 3), ignore_index=1),
               lambda: tF.cross_entropy(torch.zeros(2, 3), torch.zeros(2, 3), ignore_index=1))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("use_weight", [False, True])
def test_pointwise_losses_match_torch(torch, reduction, use_weight):
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    w = rng.random((3, 4)) if use_weight else None
    ex, ey, tx, ty = (ember.from_numpy(x), ember.from_numpy(y),
                      torch.from_numpy(x), torch.from_numpy(y))
    ew = None if w is None else ember.from_numpy(w)
    tw = None if w is None else torch.from_numpy(w)
    tF = torch.nn.functional
    for e_fn, t_fn in [(F.mse_loss, tF.mse_loss), (F.l1_loss, tF.l1_loss)]:
        assert_close(e_fn(ex, ey, reduction=reduction, weight=ew),
                     t_fn(tx, ty, reduction=reduction, weight=tw), rtol=1e-12)
    p = 1 / (1 + np.exp(-x))
    p[0, 0], p[0, 1] = 0.0, 1.0  # the -100 clamp of the logs
    t01 = rng.random((3, 4))
    assert_close(F.binary_cross_entropy(ember.from_numpy(p), ember.from_numpy(t01), ew, reduction=reduction),
                 tF.binary_cross_entropy(torch.from_numpy(p), torch.from_numpy(t01), tw, reduction=reduction),
                 rtol=1e-12)
    logits = x * 50  # far in the saturated range: must stay finite
    pos_weight = rng.random(4) + 0.5
    for pw in [None, pos_weight]:
        got = F.binary_cross_entropy_with_logits(
            ember.from_numpy(logits), ember.from_numpy(t01), ew, reduction=reduction,
            pos_weight=None if pw is None else ember.from_numpy(pw))
        want = tF.binary_cross_entropy_with_logits(
            torch.from_numpy(logits), torch.from_numpy(t01), tw, reduction=reduction,
            pos_weight=None if pw is None else torch.from_numpy(pw))
        assert np.isfinite(to_numpy(got)).all()
        assert_close(got, want, rtol=1e-10)


def test_pointwise_loss_errors_and_warnings_match_torch(torch):
    tF = torch.nn.functional
    same_error(lambda: F.binary_cross_entropy(ember.ones(3) * 2, ember.ones(3)),
               lambda: tF.binary_cross_entropy(torch.ones(3) * 2, torch.ones(3)))
    same_error(lambda: F.binary_cross_entropy(ember.ones(3), ember.ones(2)),
               lambda: tF.binary_cross_entropy(torch.ones(3), torch.ones(2)))
    same_error(lambda: F.binary_cross_entropy_with_logits(ember.ones(3), ember.ones(2)),
               lambda: tF.binary_cross_entropy_with_logits(torch.ones(3), torch.ones(2)))
    same_error(lambda: F.mse_loss(ember.ones(3), ember.ones(3), reduction="x"),
               lambda: tF.mse_loss(torch.ones(3), torch.ones(3), reduction="x"))
    same_error(lambda: F.l1_loss(ember.ones(3), ember.ones(3), weight=ember.ones(2)),
               lambda: tF.l1_loss(torch.ones(3), torch.ones(3), weight=torch.ones(2)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = F.mse_loss(ember.ones(3, 1), ember.zeros(3))
        tF.mse_loss(torch.ones(3, 1), torch.zeros(3))
    assert got.item() == 1.0
    assert str(caught[0].message) == str(caught[1].message).replace("torch", "ember")


def test_loss_modules_match_torch(torch):
    rng = np.random.default_rng(9)
    logits, target = rng.standard_normal((4, 3)), np.array([0, 2, 1, 2])
    w = np.array([1.0, 0.5, 2.0])
    e = nn.CrossEntropyLoss(weight=ember.from_numpy(w), ignore_index=1, label_smoothing=0.1)
    t = torch.nn.CrossEntropyLoss(weight=torch.from_numpy(w), ignore_index=1, label_smoothing=0.1)
    assert list(e.state_dict()) == list(t.state_dict()) == ["weight"]
    assert_close(e(ember.from_numpy(logits), ember.from_numpy(target)),
                 t(torch.from_numpy(logits), torch.from_numpy(target)), rtol=1e-12)
    assert_close(nn.NLLLoss(reduction="sum")(ember.from_numpy(logits), ember.from_numpy(target)),
                 torch.nn.NLLLoss(reduction="sum")(torch.from_numpy(logits), torch.from_numpy(target)))
    x, y = rng.random((2, 3)), rng.random((2, 3))
    ex, ey, tx, ty = ember.from_numpy(x), ember.from_numpy(y), torch.from_numpy(x), torch.from_numpy(y)
    for e_loss, t_loss in [(nn.MSELoss(), torch.nn.MSELoss()),
                           (nn.L1Loss(reduction="sum"), torch.nn.L1Loss(reduction="sum")),
                           (nn.BCELoss(), torch.nn.BCELoss()),
                           (nn.BCEWithLogitsLoss(pos_weight=ember.from_numpy(w)),
                            torch.nn.BCEWithLogitsLoss(pos_weight=torch.from_numpy(w)))]:
        assert_close(e_loss(ex, ey), t_loss(tx, ty), rtol=1e-12)
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        assert nn.MSELoss(size_average=False).reduction == "sum"


# ---- with autograd -------------------------------------------------------------------

def test_training_step_gradients_match_torch(torch):
    """Forward + cross entropy + backward through Linear/ReLU/LayerNorm/
    Embedding: the parameter gradients equal torch's."""
    if not hasattr(ember, "autograd"):
        pytest.skip("ember.autograd is not available")

    def build(lib):
        return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.LayerNorm(4),
                                 lib.nn.GELU(), lib.nn.Linear(4, 3))

    e, t = build(ember), build(torch)
    load_from_torch(e, t)
    x = np.random.default_rng(10).standard_normal((6, 3)).astype(np.float32)
    target = np.array([0, 1, 2, 2, 1, 0])
    loss = forward_or_skip(lambda: F.cross_entropy(
        e(ember.from_numpy(x)), ember.from_numpy(target), label_smoothing=0.1))
    backward_or_skip(loss)
    tloss = torch.nn.functional.cross_entropy(t(torch.from_numpy(x)), torch.from_numpy(target),
                                              label_smoothing=0.1)
    tloss.backward()
    assert_close(loss, tloss)
    for (name, p), tp in zip(e.named_parameters(), t.parameters()):
        assert_close(p.grad, tp.grad, rtol=1e-4, atol=1e-6)


def test_embedding_padding_row_gets_no_gradient():
    if not hasattr(ember, "autograd"):
        pytest.skip("ember.autograd is not available")
    e = nn.Embedding(4, 2, padding_idx=0)
    out = forward_or_skip(lambda: e(ember.tensor([0, 1, 0, 3])).sum())
    backward_or_skip(out)
    assert to_numpy(e.weight.grad).tolist() == [[0, 0], [1, 1], [0, 0], [1, 1]]



def _loss_cases(lib):
    """(name, loss function of (x, aux), x shape) with lib = torch or ember."""
    F_ = lib.nn.functional
    return [
        ("cross_entropy", lambda x, a: F_.cross_entropy(x, a["target"], a["weight"], ignore_index=1,
                                                        label_smoothing=0.2), (4, 3)),
        ("cross_entropy_probs", lambda x, a: F_.cross_entropy(x, a["probs"]), (4, 3)),
        ("nll_loss_3d", lambda x, a: F_.nll_loss(x, a["target3"], reduction="sum"), (2, 3, 2)),
        ("mse_loss", lambda x, a: F_.mse_loss(x, a["y"]), (4, 3)),
        ("l1_loss", lambda x, a: F_.l1_loss(x, a["y"], reduction="sum"), (4, 3)),
        ("bce", lambda x, a: F_.binary_cross_entropy(F_.sigmoid(x), a["t01"]), (4, 3)),
        ("bce_with_logits", lambda x, a: F_.binary_cross_entropy_with_logits(
            x, a["t01"], pos_weight=a["pos_weight"]), (4, 3)),
        ("logsigmoid_at_zero", lambda x, a: F_.logsigmoid(x * 0).sum() + F_.logsigmoid(x).sum(), (4, 3)),
        ("layer_norm", lambda x, a: (F_.layer_norm(x, [3], a["w3"], a["b3"]) * a["y"]).sum(), (4, 3)),
        ("softmax", lambda x, a: (F_.softmax(x, 1) * a["y"]).sum(), (4, 3)),
    ]


@pytest.mark.parametrize("case", range(10))
def test_loss_gradients_match_torch(torch, case):
    """The composites differentiate to torch's gradients."""
    if not hasattr(ember, "autograd"):
        pytest.skip("ember.autograd is not available")
    rng = np.random.default_rng(case)
    aux = dict(target=np.array([0, 1, 2, 2]), target3=np.array([[0, 2], [1, 1]]),
               weight=np.array([0.5, 1.0, 2.0]), probs=rng.dirichlet(np.ones(3), size=4),
               y=rng.standard_normal((4, 3)), t01=rng.random((4, 3)),
               pos_weight=np.array([0.5, 2.0, 1.0]), w3=rng.standard_normal(3),
               b3=rng.standard_normal(3))
    name, ember_fn, shape = _loss_cases(ember)[case]
    _, torch_fn, _ = _loss_cases(torch)[case]
    x = rng.standard_normal(shape)
    ex = ember.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    loss = forward_or_skip(lambda: ember_fn(ex, {k: ember.from_numpy(v) for k, v in aux.items()}))
    backward_or_skip(loss)
    torch_fn(tx, {k: torch.from_numpy(v) for k, v in aux.items()}).backward()
    assert_close(ex.grad, tx.grad, rtol=1e-9, atol=1e-12)


# ---- varying shapes and dtypes ------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 4), n_classes=st.integers(1, 5),
       extra=st.lists(st.integers(1, 3), max_size=2),
       dtype=st.sampled_from(["float32", "float64"]),
       reduction=st.sampled_from(REDUCTIONS), label_smoothing=st.sampled_from([0.0, 0.15]),
       use_weight=st.booleans(), seed=st.integers(0, 2**16))
def test_cross_entropy_shapes_and_dtypes(batch, n_classes, extra, dtype, reduction,
                                         label_smoothing, use_weight, seed):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((batch, n_classes, *extra)).astype(dtype) * 3
    target = rng.integers(0, n_classes, size=(batch, *extra)).astype(np.int64)
    target.reshape(-1)[::4] = -100
    weight = rng.random(n_classes).astype(dtype) + 0.1 if use_weight else None
    kwargs = dict(reduction=reduction, label_smoothing=label_smoothing)
    got = F.cross_entropy(ember.from_numpy(logits), ember.from_numpy(target),
                          None if weight is None else ember.from_numpy(weight), **kwargs)
    want = torch.nn.functional.cross_entropy(
        torch.from_numpy(logits), torch.from_numpy(target),
        None if weight is None else torch.from_numpy(weight), **kwargs)
    assert got.dtype == getattr(ember, dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(to_numpy(got), want.numpy(), rtol=tol, atol=tol, equal_nan=True)

@settings(max_examples=20, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       n_norm=st.integers(1, 3), dtype=st.sampled_from(["float32", "float64"]),
       seed=st.integers(0, 2**16))
def test_layer_norm_and_linear_shapes(shape, n_norm, dtype, seed):
    torch = pytest.importorskip("torch")
    n_norm = min(n_norm, len(shape))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype) * 4 + 1
    w = rng.standard_normal(shape[len(shape) - n_norm:]).astype(dtype)
    b = rng.standard_normal(w.shape).astype(dtype)
    normalized = list(w.shape)
    got = F.layer_norm(ember.from_numpy(x), normalized, ember.from_numpy(w), ember.from_numpy(b))
    want = torch.nn.functional.layer_norm(torch.from_numpy(x), normalized,
                                          torch.from_numpy(w), torch.from_numpy(b))
    tol = 1e-4 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(to_numpy(got), want.numpy(), rtol=tol, atol=tol)
    weight = rng.standard_normal((3, shape[-1])).astype(dtype)
    bias = rng.standard_normal(3).astype(dtype)
    got = F.linear(ember.from_numpy(x), ember.from_numpy(weight), ember.from_numpy(bias))
    want = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(weight),
                                      torch.from_numpy(bias))
    np.testing.assert_allclose(to_numpy(got), want.numpy(), rtol=tol, atol=tol)
