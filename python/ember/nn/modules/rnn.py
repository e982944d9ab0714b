"""Recurrent layers: RNN, LSTM, GRU and their one-step cells (PyTorch's
torch.nn.modules.rnn, with its parameter names, shapes and init).

Each layer and direction runs as in PyTorch's reference (non-cuDNN) path:
the input projection W_ih x + b_ih of every time step is one matrix
product, then a loop over time applies the recurrent product W_hh h + b_hh
and the gate math (and an LSTM's projection W_hr h with proj_size).
float32/float64 layers run that loop in C with one autograd node per layer
and direction (ember/nn/_rnn.py, c/th/THRNN.c); packed sequences and other
dtypes run it here, made of ember operators that autograd differentiates
step by step.

PackedSequence inputs run on the padded batch with a mask: a sequence's
state stops changing after its last element (so h_n is its last state) and
its outputs past its end are 0; the reverse direction starts each sequence
at its own end.
"""

import math
import numbers
import warnings

import ember

from .. import _rnn
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# ---- one time step ------------------------------------------------------------------

def _rnn_step(activation):
    def step(x_gates, h_gates, h, c):
        return activation(x_gates + h_gates), None
    return step


def _lstm_step(x_gates, h_gates, h, c):
    """PyTorch's gate order: input, forget, cell, output."""
    i, f, g, o = ember.chunk(x_gates + h_gates, 4, 1)
    c_next = ember.sigmoid(f) * c + ember.sigmoid(i) * ember.tanh(g)
    return ember.sigmoid(o) * ember.tanh(c_next), c_next


def _gru_step(x_gates, h_gates, h, c):
    """Gate order: reset, update, new; the reset gate scales W_hn h + b_hn."""
    x_r, x_z, x_n = ember.chunk(x_gates, 3, 1)
    h_r, h_z, h_n = ember.chunk(h_gates, 3, 1)
    r = ember.sigmoid(x_r + h_r)
    z = ember.sigmoid(x_z + h_z)
    n = ember.tanh(x_n + r * h_n)
    return (1 - z) * n + z * h, None


_STEPS = {"RNN_TANH": _rnn_step(ember.tanh), "RNN_RELU": _rnn_step(ember.relu),
          "LSTM": _lstm_step, "GRU": _gru_step}


def _project(x, weight, bias):
    out = ember.matmul(x, weight.t())
    return out if bias is None else out + bias


# ---- the layers -----------------------------------------------------------------------

class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        _check_arguments(mode, hidden_size, num_layers, dropout, proj_size)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        directions = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        gate_size = _GATES[mode] * hidden_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes = [("weight_ih", (gate_size, layer_input)),
                          ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, name + suffix, Parameter(ember.empty(shape, dtype=dtype)))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    def reset_parameters(self):
        """Every weight and bias U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        bound = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -bound, bound)

    @property
    def all_weights(self):
        return [[getattr(self, name) for name in names] for names in self._layer_names()]

    def flatten_parameters(self):
        """torch copies the weights into one contiguous cuDNN buffer here, and
        does nothing on the CPU.  ember's kernels read each weight where it
        lies on every device, so there is nothing to gather: the parameters
        stay the objects (and memory) they are."""

    def _layer_names(self):
        per_direction = 2 + 2 * self.bias + (self.proj_size > 0)
        names = self._flat_weights_names
        return [names[i:i + per_direction] for i in range(0, len(names), per_direction)]

    def _direction_weights(self, index):
        """(w_ih, w_hh, b_ih, b_hh, w_hr) of layer*directions + direction."""
        weights = {}
        for name in self._layer_names()[index]:
            weights[name.split("_l")[0]] = getattr(self, name)
        return (weights["weight_ih"], weights["weight_hh"], weights.get("bias_ih"),
                weights.get("bias_hh"), weights.get("weight_hr"))

    def extra_repr(self):
        text = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            text += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        if self.batch_first is not False:
            text += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            text += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            text += f", bidirectional={self.bidirectional}"
        return text

    # ---- forward -----------------------------------------------------------------

    def forward(self, input, hx=None):
        packed = isinstance(input, PackedSequence)
        lengths = None
        unbatched = False
        if packed:
            x, lengths = pad_packed_sequence(input)
        else:
            if input.dim() not in (2, 3):
                raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, "
                                 f"got {input.dim()}D tensor instead")
            unbatched = input.dim() == 2
            x = input.unsqueeze(1) if unbatched else (
                input.transpose(0, 1) if self.batch_first else input)
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {x.shape[-1]}")
        h0, c0 = self._initial_state(x, hx, unbatched)
        output, h_n, c_n = self._run_layers(x, h0, c0, lengths)
        if packed:
            output = _pack_like(output, input)
        elif unbatched:
            output, h_n = output.squeeze(1), h_n.squeeze(1)
            c_n = None if c_n is None else c_n.squeeze(1)
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, (h_n if c_n is None else (h_n, c_n))

    def _initial_state(self, x, hx, unbatched):
        directions = 2 if self.bidirectional else 1
        batch = x.shape[1]
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        h_shape = (self.num_layers * directions, batch, real_hidden)
        c_shape = (self.num_layers * directions, batch, self.hidden_size)
        if hx is None:
            h0 = ember.zeros(h_shape, dtype=x.dtype)
            return h0, (ember.zeros(c_shape, dtype=x.dtype) if self.mode == "LSTM" else None)
        if self.mode == "LSTM":
            h0, c0 = hx
        else:
            h0, c0 = hx, None
        if unbatched:
            h0 = h0.unsqueeze(1)
            c0 = None if c0 is None else c0.unsqueeze(1)
        prefix = "Expected hidden[0] size" if self.mode == "LSTM" else "Expected hidden size"
        _check_hidden(h0, h_shape, prefix)
        if c0 is not None:
            _check_hidden(c0, c_shape, "Expected hidden[1] size")
        return h0, c0

    def _run_layers(self, x, h0, c0, lengths):
        directions = 2 if self.bidirectional else 1
        step = _STEPS[self.mode]
        mask_of = None
        if lengths is not None:
            mask_of = [(lengths > t).reshape(-1, 1) for t in range(x.shape[0])]
        h_last, c_last = [], []
        layer_input = x
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                index = layer * directions + direction
                h, c = h0[index], None if c0 is None else c0[index]
                weights = self._direction_weights(index)
                if mask_of is None and _rnn.kernel_fits(layer_input, h, c, weights):
                    out, h, c = _rnn.run_direction(self.mode, layer_input, h, c, weights,
                                                   direction == 1)
                else:
                    out, h, c = _run_direction(step, layer_input, h, c, weights,
                                               direction == 1, mask_of)
                outputs.append(out)
                h_last.append(h)
                c_last.append(c)
            layer_input = outputs[0] if directions == 1 else ember.cat(outputs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, training=True)
        c_n = None if c0 is None else ember.stack(c_last)
        return layer_input, ember.stack(h_last), c_n


def _run_direction(step, x, h, c, weights, reverse, mask_of):
    """One layer in one direction over all time steps: (outputs, h_n, c_n)."""
    w_ih, w_hh, b_ih, b_hh, w_hr = weights
    length, batch = x.shape[0], x.shape[1]
    x_gates = _project(x.reshape(length * batch, x.shape[2]), w_ih, b_ih)
    x_gates = x_gates.reshape(length, batch, -1)
    outputs = [None] * length
    for t in (range(length - 1, -1, -1) if reverse else range(length)):
        h_next, c_next = step(x_gates[t], _project(h, w_hh, b_hh), h, c)
        if w_hr is not None:
            h_next = ember.matmul(h_next, w_hr.t())
        if mask_of is None:
            h, c, outputs[t] = h_next, c_next, h_next
        else:
            running = mask_of[t]
            h = ember.where(running, h_next, h)
            c = None if c is None else ember.where(running, c_next, c)
            outputs[t] = ember.where(running, h_next, ember.zeros_like(h_next))
    return ember.stack(outputs), h, c


def _pack_like(padded, packed_input):
    """`padded` (T, B, *) in the caller's batch order, packed with the same
    batch_sizes and indices as packed_input."""
    if packed_input.sorted_indices is not None:
        padded = padded.index_select(1, packed_input.sorted_indices)
    sizes = [int(n) for n in packed_input.batch_sizes.tolist()]
    data = ember.cat([padded[t, :size] for t, size in enumerate(sizes)])
    return PackedSequence(data, packed_input.batch_sizes, packed_input.sorted_indices,
                          packed_input.unsorted_indices)


def _check_hidden(hidden, expected, prefix):
    if tuple(hidden.shape) != expected:
        raise RuntimeError(f"{prefix} {expected}, got {list(hidden.shape)}")


def _check_cell_hidden(input, h, label, hidden_size):
    """PyTorch's checks of a cell's state `label` (0: h, 1: c)."""
    if h.dim() != 2 or h.shape[0] != input.shape[0]:
        raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden{label} "
                           f"batch size {h.shape[0] if h.dim() else 0}")
    if h.shape[1] != hidden_size:
        raise RuntimeError(f"hidden{label} has inconsistent hidden_size: got {h.shape[1]}, "
                           f"expected {hidden_size}")


def _check_arguments(mode, hidden_size, num_layers, dropout, proj_size):
    if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
            or not 0 <= dropout <= 1):
        raise ValueError("dropout should be a number in range [0, 1] representing the "
                         "probability of an element being zeroed")
    if dropout > 0 and num_layers == 1:
        warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                      "non-zero dropout expects num_layers greater than 1, but got "
                      f"dropout={dropout} and num_layers={num_layers}")
    if not isinstance(hidden_size, int):
        raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
    if hidden_size <= 0:
        raise ValueError("hidden_size must be greater than zero")
    if num_layers <= 0:
        raise ValueError("num_layers must be greater than zero")
    if proj_size < 0:
        raise ValueError("proj_size should be a positive integer or zero to disable "
                         "projections")
    if proj_size >= hidden_size:
        raise ValueError("proj_size has to be smaller than hidden_size")
    if proj_size and mode != "LSTM":
        raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")


class RNN(RNNBase):
    """Elman RNN: h_t = nonlinearity(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh",
                 bias=True, batch_first=False, dropout=0.0, bidirectional=False,
                 device=None, dtype=None):
        modes = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}
        if nonlinearity not in modes:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             f"'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__(modes[nonlinearity], input_size, hidden_size, num_layers, bias,
                         batch_first, dropout, bidirectional, 0, device, dtype)


class LSTM(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)


# ---- cells ------------------------------------------------------------------------------

class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        gate_size = num_chunks * hidden_size
        self.weight_ih = Parameter(ember.empty((gate_size, input_size), dtype=dtype))
        self.weight_hh = Parameter(ember.empty((gate_size, hidden_size), dtype=dtype))
        if bias:
            self.bias_ih = Parameter(ember.empty(gate_size, dtype=dtype))
            self.bias_hh = Parameter(ember.empty(gate_size, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    reset_parameters = RNNBase.reset_parameters

    def extra_repr(self):
        text = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            text += f", nonlinearity={self.nonlinearity}"
        return text

    def _batched(self, input, hx, states):
        """(input as (N, H_in), the states as (N, H) each, unbatched?)."""
        if input.dim() not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got "
                             f"{input.dim()}D instead")
        unbatched = input.dim() == 1
        if unbatched:
            input = input.unsqueeze(0)
        if input.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[1]} "
                               f"expected {self.input_size}")
        if hx is None:
            hx = [ember.zeros((input.shape[0], self.hidden_size), dtype=input.dtype)] * states
        else:
            hx = list(hx) if states > 1 else [hx]
            hx = [h.unsqueeze(0) if unbatched else h for h in hx]
            for label, h in enumerate(hx):
                _check_cell_hidden(input, h, label, self.hidden_size)
        return input, hx, unbatched

    def _step(self, mode, input, hx):
        states = 2 if mode == "LSTM" else 1
        x, hx, unbatched = self._batched(input, hx, states)
        weights = (self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh, None)
        c = hx[1] if states > 1 else None
        if _rnn.kernel_fits(x.unsqueeze(0), hx[0], c, weights):   # one step of the loop
            _, h, c = _rnn.run_direction(mode, x.unsqueeze(0), hx[0], c, weights, False)
        else:
            h, c = _STEPS[mode](_project(x, self.weight_ih, self.bias_ih),
                                _project(hx[0], self.weight_hh, self.bias_hh), hx[0], c)
        if unbatched:
            h = h.squeeze(0)
            c = None if c is None else c.squeeze(0)
        return h if c is None else (h, c)


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input, hx=None):
        return self._step("RNN_TANH" if self.nonlinearity == "tanh" else "RNN_RELU", input, hx)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        return self._step("LSTM", input, hx)


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        return self._step("GRU", input, hx)
