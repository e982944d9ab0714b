"""RNN, LSTM, GRU, their cells and packed sequences (issue 12) against
PyTorch with the same weights: outputs, final states and every gradient,
float64, batch_first, bidirectional, projections, packed input; gradchecks;
errors.  Layers without packed input run on the C time loop of
c/th/THRNN.c (tests/test_rnn_kernels.py tests it closer); cells and packed
sequences are composites of existing operators."""

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.autograd import gradcheck
from ember.nn.utils import rnn as ember_rnn

torch = pytest.importorskip("torch")
torch_rnn = torch.nn.utils.rnn


def copy_state(ours, theirs):
    ours.load_state_dict({k: ember.tensor(v.detach().numpy().copy())
                          for k, v in theirs.state_dict().items()})


def check_same(ours, theirs, rtol=1e-9, atol=1e-11):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(),
                               rtol=rtol, atol=atol)


def flatten_states(state):
    return list(state) if isinstance(state, tuple) else [state]


LAYERS = [
    ("RNN", dict(num_layers=2)),
    ("RNN", dict(nonlinearity="relu", bias=False, batch_first=True)),
    ("RNN", dict(bidirectional=True)),
    ("LSTM", dict()),
    ("LSTM", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("LSTM", dict(proj_size=2, num_layers=2)),
    ("LSTM", dict(proj_size=3, bidirectional=True, batch_first=True)),
    ("GRU", dict()),
    ("GRU", dict(num_layers=2, bidirectional=True, bias=False)),
]


@pytest.mark.parametrize("name, kwargs", LAYERS)
@pytest.mark.parametrize("with_state", [False, True])
def test_layer_matches_torch(name, kwargs, with_state):
    torch.manual_seed(0)
    theirs = getattr(torch.nn, name)(3, 4, **kwargs).double()
    ours = getattr(nn, name)(3, 4, **kwargs).double()
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    copy_state(ours, theirs)
    rng = np.random.default_rng(1)
    shape = (2, 5, 3) if kwargs.get("batch_first") else (5, 2, 3)
    x = rng.standard_normal(shape)
    ours_x, theirs_x = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours_args, theirs_args = [ours_x], [theirs_x]
    if with_state:
        directions = 2 if kwargs.get("bidirectional") else 1
        layers = kwargs.get("num_layers", 1)
        h_size = kwargs.get("proj_size") or 4
        h0 = rng.standard_normal((directions * layers, 2, h_size))
        c0 = rng.standard_normal((directions * layers, 2, 4))
        ours_h = [ember.tensor(h0, requires_grad=True)]
        theirs_h = [torch.tensor(h0, requires_grad=True)]
        if name == "LSTM":
            ours_h.append(ember.tensor(c0, requires_grad=True))
            theirs_h.append(torch.tensor(c0, requires_grad=True))
        ours_args.append(tuple(ours_h) if name == "LSTM" else ours_h[0])
        theirs_args.append(tuple(theirs_h) if name == "LSTM" else theirs_h[0])
    ours_out, ours_state = ours(*ours_args)
    theirs_out, theirs_state = theirs(*theirs_args)
    check_same(ours_out, theirs_out)
    ours_states, theirs_states = flatten_states(ours_state), flatten_states(theirs_state)
    for a, b in zip(ours_states, theirs_states):
        check_same(a, b)
    weights = rng.standard_normal(tuple(theirs_out.shape))
    ours_loss = (ours_out * ember.tensor(weights)).sum() + sum(s.sum() for s in ours_states)
    theirs_loss = (theirs_out * torch.tensor(weights)).sum() + sum(s.sum() for s in theirs_states)
    ours_loss.backward()
    theirs_loss.backward()
    check_same(ours_x.grad, theirs_x.grad)
    for (n, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        check_same(p.grad, q.grad)
    if with_state:
        for a, b in zip(ours_h, theirs_h):
            check_same(a.grad, b.grad)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_unbatched_input_matches_torch(name):
    torch.manual_seed(2)
    theirs = getattr(torch.nn, name)(3, 4).double()
    ours = getattr(nn, name)(3, 4).double()
    copy_state(ours, theirs)
    x = np.random.default_rng(3).standard_normal((6, 3))
    ours_out, ours_state = ours(ember.tensor(x))
    theirs_out, theirs_state = theirs(torch.tensor(x))
    check_same(ours_out, theirs_out)
    for a, b in zip(flatten_states(ours_state), flatten_states(theirs_state)):
        check_same(a, b)


@pytest.mark.parametrize("name, kwargs", [("LSTM", dict(bidirectional=True, num_layers=2)),
                                          ("GRU", dict(bidirectional=True)),
                                          ("RNN", dict())])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_packed_sequences_match_torch(name, kwargs, enforce_sorted):
    torch.manual_seed(4)
    theirs = getattr(torch.nn, name)(3, 4, **kwargs).double()
    ours = getattr(nn, name)(3, 4, **kwargs).double()
    copy_state(ours, theirs)
    lengths = [5, 3, 2] if enforce_sorted else [2, 5, 3]
    x = np.random.default_rng(5).standard_normal((5, 3, 3))
    ours_x, theirs_x = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours_packed = ember_rnn.pack_padded_sequence(ours_x, lengths, enforce_sorted=enforce_sorted)
    theirs_packed = torch_rnn.pack_padded_sequence(theirs_x, lengths,
                                                   enforce_sorted=enforce_sorted)
    check_same(ours_packed.data, theirs_packed.data)
    assert ours_packed.batch_sizes.tolist() == theirs_packed.batch_sizes.tolist()
    ours_out, ours_state = ours(ours_packed)
    theirs_out, theirs_state = theirs(theirs_packed)
    check_same(ours_out.data, theirs_out.data)
    for a, b in zip(flatten_states(ours_state), flatten_states(theirs_state)):
        check_same(a, b)
    ours_padded, ours_lengths = ember_rnn.pad_packed_sequence(ours_out, batch_first=True)
    theirs_padded, theirs_lengths = torch_rnn.pad_packed_sequence(theirs_out, batch_first=True)
    check_same(ours_padded, theirs_padded)
    assert ours_lengths.tolist() == theirs_lengths.tolist() == lengths
    (ours_padded ** 2).sum().backward()
    (theirs_padded ** 2).sum().backward()
    check_same(ours_x.grad, theirs_x.grad)
    for (n, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        check_same(p.grad, q.grad)


def test_sequence_utilities_match_torch():
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal((n, 2)) for n in (3, 1, 4)]
    ours_seqs = [ember.tensor(a) for a in arrays]
    theirs_seqs = [torch.tensor(a) for a in arrays]
    for kwargs in (dict(), dict(batch_first=True, padding_value=-1.0),
                   dict(padding_side="left")):
        check_same(ember_rnn.pad_sequence(ours_seqs, **kwargs),
                   torch_rnn.pad_sequence(theirs_seqs, **kwargs))
    ours_packed = ember_rnn.pack_sequence(ours_seqs, enforce_sorted=False)
    theirs_packed = torch_rnn.pack_sequence(theirs_seqs, enforce_sorted=False)
    check_same(ours_packed.data, theirs_packed.data)
    assert ours_packed.sorted_indices.tolist() == theirs_packed.sorted_indices.tolist()
    assert ours_packed.unsorted_indices.tolist() == theirs_packed.unsorted_indices.tolist()
    for ours_s, theirs_s in zip(ember_rnn.unpack_sequence(ours_packed),
                                torch_rnn.unpack_sequence(theirs_packed)):
        check_same(ours_s, theirs_s)
    padded, _ = ember_rnn.pad_packed_sequence(ours_packed, total_length=6)
    assert padded.shape == (6, 3, 2)


@pytest.mark.parametrize("name", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells_match_torch(name):
    torch.manual_seed(7)
    theirs = getattr(torch.nn, name)(3, 4).double()
    ours = getattr(nn, name)(3, 4).double()
    assert repr(ours) == repr(theirs)
    copy_state(ours, theirs)
    rng = np.random.default_rng(8)
    x, h = rng.standard_normal((2, 3)), rng.standard_normal((2, 4))
    ours_x, theirs_x = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    hx_ours = (ember.tensor(h), ember.tensor(h * 0.5)) if name == "LSTMCell" else ember.tensor(h)
    hx_theirs = (torch.tensor(h), torch.tensor(h * 0.5)) if name == "LSTMCell" else torch.tensor(h)
    ours_out, theirs_out = ours(ours_x, hx_ours), theirs(theirs_x, hx_theirs)
    ours_flat, theirs_flat = flatten_states(ours_out), flatten_states(theirs_out)
    for a, b in zip(ours_flat, theirs_flat):
        check_same(a, b)
    sum(s.sum() for s in ours_flat).backward()
    sum(s.sum() for s in theirs_flat).backward()
    check_same(ours_x.grad, theirs_x.grad)
    check_same(ours.weight_hh.grad, theirs.weight_hh.grad)
    unbatched = ours(ember.tensor(x[0]))
    assert flatten_states(unbatched)[0].shape == (4,)


def test_lstm_gradcheck():
    lstm = nn.LSTM(2, 3, bidirectional=True, proj_size=1).double()
    x = ember.randn(3, 1, 2, dtype=ember.float64, requires_grad=True)
    assert gradcheck(lambda t: lstm(t)[0], (x,))


def test_gru_and_rnn_gradcheck_through_input_and_state():
    gru = nn.GRU(2, 2, num_layers=2).double()
    rnn = nn.RNN(2, 2, nonlinearity="relu").double()
    x = ember.randn(3, 2, 2, dtype=ember.float64, requires_grad=True)
    h0 = ember.randn(2, 2, 2, dtype=ember.float64, requires_grad=True)
    assert gradcheck(lambda t, h: gru(t, h)[1], (x, h0))
    assert gradcheck(lambda t: rnn(t)[0], (x,))


@pytest.mark.parametrize("name", ["LSTM", "RNN"])
def test_bias_grads_are_separate_tensors(name):
    # the C loop's backward sums one gradient for both biases; each .grad
    # must still own its memory, so accumulating into one leaves the other
    layer = getattr(nn, name)(3, 4)
    x = ember.randn(5, 2, 3)
    layer(x)[0].sum().backward()
    b_ih, b_hh = layer.bias_ih_l0.grad, layer.bias_hh_l0.grad
    np.testing.assert_array_equal(b_ih.numpy(), b_hh.numpy())
    before = b_hh.numpy().copy()
    b_ih.add_(1.0)
    np.testing.assert_array_equal(b_hh.numpy(), before)
    layer(x)[0].sum().backward()
    np.testing.assert_array_equal(layer.bias_hh_l0.grad.numpy(), 2 * before)


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU"])
def test_flatten_parameters_keeps_the_weights_as_they_were(name):
    """PyTorch's word_language_model calls flatten_parameters() after a load;
    torch does nothing there on the CPU, and neither may ember: the same
    Parameter objects, the same values, the same output."""
    layer = getattr(nn, name)(3, 4, num_layers=2)
    before = [(p, p.detach().numpy().copy()) for p in layer.parameters()]
    x = ember.randn(5, 2, 3)
    expected = layer(x)[0].detach().numpy()
    assert layer.flatten_parameters() is None
    assert all(p is q for (p, _), q in zip(before, layer.parameters(), strict=True))
    for p, values in before:
        np.testing.assert_array_equal(p.detach().numpy(), values)
    np.testing.assert_array_equal(layer(x)[0].detach().numpy(), expected)


def _same_error(ours_call, theirs_call):
    with pytest.raises(Exception) as theirs_info:
        theirs_call()
    with pytest.raises(type(theirs_info.value)) as ours_info:
        ours_call()
    assert str(ours_info.value) == str(theirs_info.value)


def test_errors_match_torch():
    _same_error(lambda: nn.LSTM(3, 4)(ember.ones(5, 2, 2)),
                lambda: torch.nn.LSTM(3, 4)(torch.ones(5, 2, 2)))
    _same_error(lambda: nn.GRU(3, 4)(ember.ones(5, 2, 3), ember.ones(2, 2, 4)),
                lambda: torch.nn.GRU(3, 4)(torch.ones(5, 2, 3), torch.ones(2, 2, 4)))
    _same_error(lambda: nn.LSTM(3, 4)(ember.ones(5, 2, 3), (ember.ones(1, 2, 4), ember.ones(1, 2, 3))),
                lambda: torch.nn.LSTM(3, 4)(torch.ones(5, 2, 3), (torch.ones(1, 2, 4), torch.ones(1, 2, 3))))
    _same_error(lambda: nn.LSTM(3, 4, proj_size=4), lambda: torch.nn.LSTM(3, 4, proj_size=4))
    _same_error(lambda: nn.RNN(3, 4, nonlinearity="gelu"),
                lambda: torch.nn.RNN(3, 4, nonlinearity="gelu"))
    _same_error(lambda: nn.GRU(3, 4, dropout=2.0), lambda: torch.nn.GRU(3, 4, dropout=2.0))
    _same_error(lambda: ember_rnn.pack_padded_sequence(ember.ones(3, 2, 1), [1, 2]),
                lambda: torch_rnn.pack_padded_sequence(torch.ones(3, 2, 1), [1, 2]))
    with pytest.warns(UserWarning, match="dropout option adds dropout after all but last"):
        nn.LSTM(3, 4, dropout=0.5)


def test_cell_checks_its_states_as_pytorch():
    cell = nn.LSTMCell(3, 4)
    x = ember.randn(2, 3)
    with pytest.raises(RuntimeError, match="inconsistent input_size: got 5 expected 3"):
        cell(ember.randn(2, 5))
    with pytest.raises(RuntimeError,
                       match="Input batch size 2 doesn't match hidden0 batch size 3"):
        cell(x, (ember.randn(3, 4), ember.randn(3, 4)))
    with pytest.raises(RuntimeError,
                       match="hidden1 has inconsistent hidden_size: got 5, expected 4"):
        cell(x, (ember.randn(2, 4), ember.randn(2, 5)))
