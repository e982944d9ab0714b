"""The recurrent layers' C time loops (c/th/THRNN.c, Note [Recurrent layers
in one loop]) behind ember.nn.RNN, LSTM, GRU and their cells: the loop
against NumPy written from the gate formulas, gradchecks of one layer and
direction (and a gradgradcheck: double backward goes through the
composite), PyTorch's outputs and gradients with copied weights where torch
is installed, and the private _C entry points refusing bad arguments with
exceptions, not crashes.  Few and small: the leak gates run these."""

import numpy as np
import pytest

import ember
from ember import _C
from ember.autograd import gradcheck, gradgradcheck
from ember.nn import _rnn

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

MODES = ["RNN_TANH", "RNN_RELU", "LSTM", "GRU"]
GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# ---- NumPy reference of the loop ---------------------------------------------------

def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def reference_loop(mode, gates, w_hh, b_hh, h, c, reverse):
    """(outputs, activations, saved) of the forward, step by step."""
    steps = range(len(gates) - 1, -1, -1) if reverse else range(len(gates))
    outputs, acts, saved = np.zeros((len(gates),) + h.shape), gates.copy(), None
    saved = np.zeros_like(outputs)
    for t in steps:
        if mode == "GRU":
            a = h @ w_hh.T + (0 if b_hh is None else b_hh)
            r, z = (sigmoid(gi + ai) for gi, ai in zip(np.split(gates[t], 3, 1)[:2],
                                                        np.split(a, 3, 1)[:2]))
            n = np.tanh(np.split(gates[t], 3, 1)[2] + r * np.split(a, 3, 1)[2])
            h = (1 - z) * n + z * h
            acts[t], saved[t] = np.concatenate([r, z, n], 1), np.split(a, 3, 1)[2]
        else:
            pre = gates[t] + h @ w_hh.T
            if mode == "LSTM":
                i, f, g, o = np.split(pre, 4, 1)
                i, f, g, o = sigmoid(i), sigmoid(f), np.tanh(g), sigmoid(o)
                c = f * c + i * g
                h = o * np.tanh(c)
                acts[t], saved[t] = np.concatenate([i, f, g, o], 1), c
            else:
                h = np.tanh(pre) if mode == "RNN_TANH" else np.maximum(pre, 0)
                acts[t] = pre
        outputs[t] = h
    return outputs, acts, saved


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reverse", [False, True])
def test_forward_loop_matches_numpy(mode, reverse):
    rng = np.random.default_rng(0)
    steps, batch, hidden = 3, 2, 4
    width = GATES[mode] * hidden
    gates = rng.standard_normal((steps, batch, width))
    w_hh = rng.standard_normal((width, hidden)) * 0.5
    h0 = rng.standard_normal((batch, hidden))
    c0 = rng.standard_normal((batch, hidden)) if mode == "LSTM" else None
    b_hh = rng.standard_normal(width) if mode == "GRU" else None
    in_place = ember.tensor(gates)
    output, saved = _C._rnn_forward(in_place, ember.tensor(w_hh), ember.tensor(h0),
                                    None if c0 is None else ember.tensor(c0),
                                    None if b_hh is None else ember.tensor(b_hh), mode,
                                    reverse)
    expected, acts, kept = reference_loop(mode, gates, w_hh, b_hh, h0, c0, reverse)
    np.testing.assert_allclose(output.numpy(), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(in_place.numpy(), acts, rtol=1e-12, atol=1e-12)
    if mode in ("LSTM", "GRU"):
        np.testing.assert_allclose(saved.numpy(), kept, rtol=1e-12, atol=1e-12)
    else:
        assert saved is None


# ---- gradients -------------------------------------------------------------------

def layer_inputs(mode, dtype=ember.float64, bias=True):
    ember.manual_seed(0)
    steps, batch, features, hidden = 3, 2, 3, 2
    width = GATES[mode] * hidden

    def leaf(*shape):
        return (ember.randn(*shape, dtype=dtype) * 0.6).requires_grad_()
    c0 = leaf(batch, hidden) if mode == "LSTM" else None
    biases = (leaf(width), leaf(width)) if bias else (None, None)
    return (leaf(steps, batch, features), leaf(batch, hidden), c0,
            leaf(width, features), leaf(width, hidden), *biases)


def direction(mode, reverse):
    def run(x, h0, c0, w_ih, w_hh, b_ih, b_hh):
        out, h, c = _rnn.run_direction(mode, x, h0, c0, (w_ih, w_hh, b_ih, b_hh, None),
                                       reverse)
        return (out, h) if c is None else (out, h, c)
    return run


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reverse", [False, True])
def test_layer_gradcheck(mode, reverse):
    inputs = layer_inputs(mode)
    assert type(direction(mode, reverse)(*inputs)[0].grad_fn).__name__ == "_DirectionBackward"
    assert gradcheck(direction(mode, reverse), inputs)


def test_layer_without_bias_gradcheck():
    assert gradcheck(direction("GRU", False), layer_inputs("GRU", bias=False))


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_layer_gradgradcheck(mode):
    assert gradgradcheck(direction(mode, False), layer_inputs(mode))


def test_float32_layer_matches_float64():
    low = layer_inputs("LSTM", ember.float32)
    high = [None if t is None else t.detach().double().requires_grad_() for t in low]
    for inputs in (low, high):
        out, h, c = direction("LSTM", True)(*inputs)
        (out.sum() + (h * c).sum()).backward()
    for a, b in zip(low, high):
        if a is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4,
                                       atol=1e-5)


# ---- against PyTorch --------------------------------------------------------------

def copy_weights(ours, theirs):
    for name, p in theirs.named_parameters():
        getattr(ours, name).data = ember.tensor(p.detach().numpy().copy())


@needs_torch
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_layers_match_torch(kind):
    """Two bidirectional batch-first layers with initial states: outputs and
    the gradients of the input, the states and every weight."""
    kwargs = dict(num_layers=2, bidirectional=True, batch_first=True)
    if kind == "RNN":
        kwargs["nonlinearity"] = "relu"
    theirs = getattr(torch.nn, kind)(5, 6, **kwargs)
    ours = getattr(ember.nn, kind)(5, 6, **kwargs)
    copy_weights(ours, theirs)
    x = torch.randn(3, 4, 5, requires_grad=True)
    states = [torch.randn(4, 3, 6, requires_grad=True)
              for _ in range(2 if kind == "LSTM" else 1)]
    our_x = ember.tensor(x.detach().numpy(), requires_grad=True)
    our_states = [ember.tensor(s.detach().numpy(), requires_grad=True) for s in states]
    results = []
    for lib, xs, hx in ((torch, x, states), (ember, our_x, our_states)):
        model = theirs if lib is torch else ours
        out, h = model(xs, tuple(hx) if kind == "LSTM" else hx[0])
        h = h if kind == "LSTM" else (h,)
        (out.pow(2).sum() + sum((s * (i + 2)).sum() for i, s in enumerate(h))).backward()
        results.append([out.detach().numpy()] + [s.detach().numpy() for s in h])
    for a, b in zip(*results):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
    for a, b in zip([x] + states, [our_x] + our_states):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-4, atol=1e-5)
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(getattr(ours, name).grad.numpy(), p.grad.numpy(),
                                   rtol=1e-4, atol=1e-5, err_msg=name)


@needs_torch
@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell"])
def test_cells_match_torch(kind):
    theirs, ours = getattr(torch.nn, kind)(3, 4), getattr(ember.nn, kind)(3, 4)
    copy_weights(ours, theirs)
    x = torch.randn(2, 3)
    our_x = ember.tensor(x.numpy())
    out = theirs(x)
    mine = ours(our_x)
    out, mine = (out if isinstance(out, tuple) else (out,),
                 mine if isinstance(mine, tuple) else (mine,))
    sum(o.sum() for o in out).backward()
    sum(o.sum() for o in mine).backward()
    for a, b in zip(out, mine):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(getattr(ours, name).grad.numpy(), p.grad.numpy(),
                                   rtol=1e-4, atol=1e-6)


# ---- the entry points refuse bad arguments ------------------------------------------

def forward_args(mode="LSTM", dtype=ember.float32):
    width = GATES[mode] * 4
    c0 = ember.zeros(2, 4, dtype=dtype) if mode == "LSTM" else None
    return [ember.zeros(3, 2, width, dtype=dtype), ember.zeros(width, 4, dtype=dtype),
            ember.zeros(2, 4, dtype=dtype), c0, None, mode, False]


@pytest.mark.parametrize("change, error, message", [
    ({5: "lstm"}, ValueError, "mode must be"),
    ({5: 3}, ValueError, "mode must be"),
    ({0: 1.0}, TypeError, "must be Tensor"),
    ({0: ember.zeros(3, 2, 15)}, RuntimeError, "4 \\* hidden_size"),
    ({0: ember.zeros(3, 2, 16, dtype=ember.int64)}, RuntimeError, "float32 or float64"),
    ({1: ember.zeros(16, 5)}, RuntimeError, "w_hh must be"),
    ({1: ember.zeros(4, 16).t()}, RuntimeError, "w_hh must be a contiguous"),
    ({1: ember.zeros(16, 4, dtype=ember.float64)}, RuntimeError, "w_hh must be"),
    ({3: None}, TypeError, "c0 must be Tensor"),
    ({3: ember.zeros(3, 4)}, RuntimeError, "c0 must be"),
    ({4: ember.zeros(16)}, RuntimeError, "b_hh must be None for mode LSTM"),
    ({6: "yes"}, TypeError, "argument 'reverse' must be int"),
])
def test_forward_refuses_bad_arguments(change, error, message):
    args = forward_args()
    for index, value in change.items():
        args[index] = value
    with pytest.raises(error, match=message):
        _C._rnn_forward(*args)


def test_entry_points_refuse_bad_calls():
    with pytest.raises(TypeError, match="takes 7 arguments"):
        _C._rnn_forward(*forward_args()[:6])
    with pytest.raises(TypeError, match="no keyword arguments"):
        _C._rnn_forward(*forward_args()[:6], reverse=False)
    with pytest.raises(RuntimeError, match="c0 must be None for mode GRU"):
        args = forward_args("GRU")
        args[3] = ember.zeros(2, 4)
        _C._rnn_forward(*args)
    gates, w_hh, h0, c0, _, mode, _ = forward_args()
    output, saved = _C._rnn_forward(gates, w_hh, h0, c0, None, mode, False)
    good = [output, h0, c0, gates, output, saved, w_hh, h0, c0, mode, False]
    grads = _C._rnn_backward(*good)
    assert [tuple(g.shape) if g is not None else None for g in grads] == [
        (3, 2, 16), None, (2, 4), (2, 4)]
    bad = list(good)
    bad[5] = ember.zeros(2, 2, 4)
    with pytest.raises(RuntimeError, match="saved must be"):
        _C._rnn_backward(*bad)
    bad = list(good)
    bad[3] = None
    with pytest.raises(TypeError, match="gates and h0 must be Tensors"):
        _C._rnn_backward(*bad)
