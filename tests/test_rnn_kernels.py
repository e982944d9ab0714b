"""The recurrent layers' C time loops (c/th/THRNN.c, Note [Recurrent layers
in one loop]) behind ember.nn.RNN, LSTM (with and without proj_size: Note
[LSTM projections]), GRU and their cells: the loop
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


def reference_loop(mode, gates, w_hh, b_hh, h, c, reverse, w_hr=None):
    """(outputs, activations, saved) of the forward, step by step; w_hr
    projects an LSTM's h."""
    steps = range(len(gates) - 1, -1, -1) if reverse else range(len(gates))
    outputs, acts = np.zeros((len(gates),) + h.shape), gates.copy()
    saved = np.zeros((len(gates), h.shape[0], w_hh.shape[0] // GATES[mode]))
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
                if w_hr is not None:
                    h = h @ w_hr.T
                acts[t], saved[t] = np.concatenate([i, f, g, o], 1), c
            else:
                h = np.tanh(pre) if mode == "RNN_TANH" else np.maximum(pre, 0)
                acts[t] = pre
        outputs[t] = h
    return outputs, acts, saved


def optional_tensor(array):
    return None if array is None else ember.tensor(array)


@pytest.mark.parametrize("mode, proj", [(mode, None) for mode in MODES] + [("LSTM", 3)])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("batch, hidden", [(2, 4), (20, 40)])
def test_forward_loop_matches_numpy(mode, proj, reverse, batch, hidden):
    """Batch 20 and hidden 40: each step's product runs the packed kernel
    on W_hh^T (and W_hr^T, a projection of 33) packed once (Note [One
    packed B for many products] in c/th/THBlas.c)."""
    rng = np.random.default_rng(0)
    steps = 3
    proj = proj and (proj if hidden == 4 else 33)
    width, state = GATES[mode] * hidden, proj or hidden
    gates = rng.standard_normal((steps, batch, width))
    w_hh = rng.standard_normal((width, state)) * 0.5
    h0 = rng.standard_normal((batch, state))
    c0 = rng.standard_normal((batch, hidden)) if mode == "LSTM" else None
    b_hh = rng.standard_normal(width) if mode == "GRU" else None
    w_hr = rng.standard_normal((proj, hidden)) * 0.5 if proj else None
    in_place = ember.tensor(gates)
    output, saved = _C._rnn_forward(in_place, ember.tensor(w_hh), ember.tensor(h0),
                                    optional_tensor(c0), optional_tensor(b_hh),
                                    optional_tensor(w_hr), mode, reverse)
    expected, acts, kept = reference_loop(mode, gates, w_hh, b_hh, h0, c0, reverse, w_hr)
    np.testing.assert_allclose(output.numpy(), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(in_place.numpy(), acts, rtol=1e-12, atol=1e-12)
    if mode in ("LSTM", "GRU"):
        np.testing.assert_allclose(saved.numpy(), kept, rtol=1e-12, atol=1e-12)
    else:
        assert saved is None


# ---- gradients -------------------------------------------------------------------

def layer_inputs(mode, dtype=ember.float64, bias=True, proj=0):
    """x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr of one layer and direction
    (c0 None except for LSTM, w_hr None without a projection)."""
    ember.manual_seed(0)
    steps, batch, features, hidden = 3, 2, 3, 3 if proj else 2
    width, state = GATES[mode] * hidden, proj or hidden

    def leaf(*shape):
        return (ember.randn(*shape, dtype=dtype) * 0.6).requires_grad_()
    c0 = leaf(batch, hidden) if mode == "LSTM" else None
    biases = (leaf(width), leaf(width)) if bias else (None, None)
    return (leaf(steps, batch, features), leaf(batch, state), c0,
            leaf(width, features), leaf(width, state), *biases,
            leaf(proj, hidden) if proj else None)


def direction(mode, reverse):
    def run(x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr):
        out, h, c = _rnn.run_direction(mode, x, h0, c0, (w_ih, w_hh, b_ih, b_hh, w_hr),
                                       reverse)
        return (out, h) if c is None else (out, h, c)
    return run


CASES = [(mode, 0) for mode in MODES] + [("LSTM", 2)]


@pytest.mark.parametrize("mode, proj", CASES)
@pytest.mark.parametrize("reverse", [False, True])
def test_layer_gradcheck(mode, proj, reverse):
    inputs = layer_inputs(mode, proj=proj)
    assert type(direction(mode, reverse)(*inputs)[0].grad_fn).__name__ == "_DirectionBackward"
    assert gradcheck(direction(mode, reverse), inputs)


def test_layer_without_bias_gradcheck():
    assert gradcheck(direction("GRU", False), layer_inputs("GRU", bias=False))


@pytest.mark.parametrize("mode, proj", [("LSTM", 0), ("GRU", 0), ("LSTM", 2)])
def test_layer_gradgradcheck(mode, proj):
    assert gradgradcheck(direction(mode, False), layer_inputs(mode, proj=proj))


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


def counting_directions(calls, model, args):
    """model(*args), appending to `calls` each layer and direction that ran
    on the C loop (_rnn.run_direction)."""
    run_direction = _rnn.run_direction

    def counted(*direction_args):
        calls.append(direction_args[0])
        return run_direction(*direction_args)
    _rnn.run_direction = counted
    try:
        return model(*args)
    finally:
        _rnn.run_direction = run_direction


def check_layer_matches_torch(kind, kwargs, dtype="float32", with_states=True, hidden=6,
                              batch=4):
    """Outputs, final states and the gradients of the input, the initial
    states and every weight of torch.nn.`kind` and ours, same weights."""
    theirs = getattr(torch.nn, kind)(5, hidden, **kwargs).to(getattr(torch, dtype))
    ours = getattr(ember.nn, kind)(5, hidden, **kwargs).to(getattr(ember, dtype))
    copy_weights(ours, theirs)
    directions = 2 if kwargs.get("bidirectional") else 1
    states_first = directions * kwargs.get("num_layers", 1)
    batch_first = kwargs.get("batch_first", False)
    shape = (batch, 3, 5) if batch_first else (3, batch, 5)
    x = torch.randn(*shape, dtype=getattr(torch, dtype), requires_grad=True)
    widths = [kwargs.get("proj_size") or hidden] + ([hidden] if kind == "LSTM" else [])
    states = [torch.randn(states_first, batch, width, dtype=x.dtype, requires_grad=True)
              for width in widths] if with_states else []
    our_x = ember.tensor(x.detach().numpy(), requires_grad=True)
    our_states = [ember.tensor(s.detach().numpy(), requires_grad=True) for s in states]
    results, on_the_loop = [], []
    for lib, xs, hx in ((torch, x, states), (ember, our_x, our_states)):
        model = theirs if lib is torch else ours
        args = (xs, tuple(hx) if kind == "LSTM" else hx[0]) if hx else (xs,)
        out, h = model(*args) if lib is torch else counting_directions(on_the_loop, model,
                                                                         args)
        h = h if kind == "LSTM" else (h,)
        (out.pow(2).sum() + sum((s * (i + 2)).sum() for i, s in enumerate(h))).backward()
        results.append([out.detach().numpy()] + [s.detach().numpy() for s in h])
    assert len(on_the_loop) == states_first     # every layer and direction ran in C
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == "float32" else dict(rtol=1e-9, atol=1e-11)
    for a, b in zip(*results):
        np.testing.assert_allclose(b, a, **tol)
    for a, b in zip([x] + states, [our_x] + our_states):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), **tol)
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(getattr(ours, name).grad.numpy(), p.grad.numpy(),
                                   **tol, err_msg=name)


@needs_torch
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_layers_match_torch(kind):
    """Two bidirectional batch-first layers with initial states."""
    kwargs = dict(num_layers=2, bidirectional=True, batch_first=True)
    if kind == "RNN":
        kwargs["nonlinearity"] = "relu"
    check_layer_matches_torch(kind, kwargs)


@needs_torch
@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kwargs, with_states", [
    (dict(), False),
    (dict(), True),
    (dict(num_layers=2), True),
    (dict(bidirectional=True), True),
    (dict(batch_first=True, bias=False), False),
    (dict(num_layers=2, bidirectional=True, batch_first=True), True),
])
def test_projected_lstm_matches_torch(kwargs, with_states, dtype):
    """LSTM with proj_size on the C loop: h0 and the output have proj_size
    features, c0 hidden_size; weight_hr's gradient summed over the steps."""
    check_layer_matches_torch("LSTM", dict(kwargs, proj_size=2), dtype, with_states)


def gemm_families():
    saved, families = _C._gemm_kernel(), []
    for name in ("avx512", "avx2", "generic"):
        try:
            _C._gemm_kernel(name)
        except RuntimeError:    # not on this CPU
            continue
        families.append(name)
    _C._gemm_kernel(saved)
    return families


@needs_torch
@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("family", gemm_families())
@pytest.mark.parametrize("kind, kwargs, dtype", [
    ("LSTM", dict(num_layers=2), "float32"),
    ("LSTM", dict(bidirectional=True), "float64"),
    ("LSTM", dict(proj_size=40), "float32"),
    ("GRU", dict(), "float32"),
    ("RNN", dict(), "float64"),
])
def test_layers_on_packed_weights_match_torch(kind, kwargs, dtype, family, threads):
    """Widths at which each step's product runs the packed kernel on W_hh^T
    (and W_hr^T) packed once per forward (Note [One packed B for many
    products] in c/th/THBlas.c): batch 20, hidden 64 (gate widths 256, 192
    and 64: LSTM's product is large enough to split over two threads), a
    projection of 40 (a partial last panel); every GEMM family, one and
    two threads."""
    saved_family, saved_threads = _C._gemm_kernel(), ember.get_num_threads()
    try:
        _C._gemm_kernel(family)
        ember.set_num_threads(threads)
        check_layer_matches_torch(kind, kwargs, dtype, hidden=64, batch=20)
    finally:
        _C._gemm_kernel(saved_family)
        ember.set_num_threads(saved_threads)


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
            ember.zeros(2, 4, dtype=dtype), c0, None, None, mode, False]


@pytest.mark.parametrize("change, error, message", [
    ({6: "lstm"}, ValueError, "mode must be"),
    ({6: 3}, ValueError, "mode must be"),
    ({0: 1.0}, TypeError, "must be Tensor"),
    ({0: ember.zeros(3, 2, 15)}, RuntimeError, "4 \\* hidden_size"),
    ({0: ember.zeros(3, 2, 16, dtype=ember.int64)}, RuntimeError, "float32 or float64"),
    ({1: ember.zeros(16, 5)}, RuntimeError, "w_hh must be"),
    ({1: ember.zeros(4, 16).t()}, RuntimeError, "w_hh must be a contiguous"),
    ({1: ember.zeros(16, 4, dtype=ember.float64)}, RuntimeError, "w_hh must be"),
    ({3: None}, TypeError, "c0 must be Tensor"),
    ({3: ember.zeros(3, 4)}, RuntimeError, "c0 must be"),
    ({4: ember.zeros(16)}, RuntimeError, "b_hh must be None for mode LSTM"),
    ({7: "yes"}, TypeError, "argument 'reverse' must be int"),
    # a projection: w_hh, h0 and w_hr sized by h0's width, c0 by the gates'
    ({2: ember.zeros(2, 3), 5: ember.zeros(3, 5)}, RuntimeError, "w_hh must be"),
    ({1: ember.zeros(16, 3), 2: ember.zeros(2, 3), 5: ember.zeros(3, 5)}, RuntimeError,
     "w_hr must be a contiguous"),
    ({1: ember.zeros(16, 3), 2: ember.zeros(2, 3), 5: ember.zeros(4, 3).t()}, RuntimeError,
     "w_hr must be a contiguous"),
    ({1: ember.zeros(16, 3), 2: ember.zeros(2, 3), 3: ember.zeros(2, 3),
      5: ember.zeros(3, 4)}, RuntimeError, "c0 must be"),
    ({5: 1.0}, TypeError, "w_hr must be Tensor"),
])
def test_forward_refuses_bad_arguments(change, error, message):
    args = forward_args()
    for index, value in change.items():
        args[index] = value
    with pytest.raises(error, match=message):
        _C._rnn_forward(*args)


def test_entry_points_refuse_bad_calls():
    with pytest.raises(TypeError, match="takes 8 arguments"):
        _C._rnn_forward(*forward_args()[:7])
    with pytest.raises(TypeError, match="no keyword arguments"):
        _C._rnn_forward(*forward_args()[:7], reverse=False)
    with pytest.raises(RuntimeError, match="c0 must be None for mode GRU"):
        args = forward_args("GRU")
        args[3] = ember.zeros(2, 4)
        _C._rnn_forward(*args)
    with pytest.raises(RuntimeError, match="w_hr must be None for mode GRU"):
        args = forward_args("GRU")
        args[1:3] = ember.zeros(12, 3), ember.zeros(2, 3)
        args[5] = ember.zeros(3, 4)
        _C._rnn_forward(*args)
    gates, w_hh, h0, c0, _, _, mode, _ = forward_args()
    output, saved = _C._rnn_forward(gates, w_hh, h0, c0, None, None, mode, False)
    good = [output, h0, c0, gates, output, saved, w_hh, None, h0, c0, mode, False]
    grads = _C._rnn_backward(*good)
    assert [tuple(g.shape) if g is not None else None for g in grads] == [
        (3, 2, 16), None, (2, 4), (2, 4), None]
    w_hh_p, h0_p, w_hr = ember.zeros(16, 3), ember.zeros(2, 3), ember.zeros(3, 4)
    output_p, saved_p = _C._rnn_forward(gates, w_hh_p, h0_p, c0, None, w_hr, mode, False)
    assert (tuple(output_p.shape), tuple(saved_p.shape)) == ((3, 2, 3), (3, 2, 4))
    projected = [output_p, h0_p, c0, gates, output_p, saved_p, w_hh_p, w_hr, h0_p, c0,
                 mode, False]
    grads = _C._rnn_backward(*projected)
    assert [tuple(g.shape) if g is not None else None for g in grads] == [
        (3, 2, 16), None, (2, 3), (2, 4), (3, 4)]
    bad = list(projected)
    bad[4] = output
    with pytest.raises(RuntimeError, match="output must be"):
        _C._rnn_backward(*bad)
    bad = list(good)
    bad[5] = ember.zeros(2, 2, 4)
    with pytest.raises(RuntimeError, match="saved must be"):
        _C._rnn_backward(*bad)
    bad = list(good)
    bad[3] = None
    with pytest.raises(TypeError, match="gates and h0 must be Tensors"):
        _C._rnn_backward(*bad)
