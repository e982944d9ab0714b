"""Activation modules: thin Modules over ember.nn.functional."""

import math
from typing import Optional

import ember

from .. import functional as F
from ..._tensor import Tensor
from ..parameter import Parameter
from .module import Module

__all__ = ["ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax"]


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class SiLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """approximate='none' (exact, with erf) or 'tanh'."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


# ---- the rest of PyTorch's activation modules ----------------------------------

def _inplace_repr(module, text=""):
    """`text`, followed by ", inplace=True" when the module works in place."""
    if getattr(module, "inplace", False):
        return f"{text}, inplace=True" if text else "inplace=True"
    return text


class Threshold(Module):
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return _inplace_repr(self, f"threshold={self.threshold}, value={self.value}")


class LeakyReLU(Module):
    def __init__(self, negative_slope=1e-2, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return _inplace_repr(self, f"negative_slope={self.negative_slope}")


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return _inplace_repr(self, f"alpha={self.alpha}")


class CELU(ELU):
    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)


class SELU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.selu(input, self.inplace)

    def extra_repr(self):
        return _inplace_repr(self)


class Mish(SELU):
    def forward(self, input):
        return F.mish(input, self.inplace)


class Hardswish(SELU):
    def forward(self, input):
        return F.hardswish(input, self.inplace)


class Hardsigmoid(SELU):
    def forward(self, input):
        return F.hardsigmoid(input, self.inplace)


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace
        if self.max_val <= self.min_val:
            raise AssertionError(f"max_val ({max_val}) must be greater than "
                                 f"min_val ({min_val})")   # PyTorch's exception type

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return _inplace_repr(self, f"min_val={self.min_val}, max_val={self.max_val}")


class ReLU6(Hardtanh):
    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return _inplace_repr(self)


class PReLU(Module):
    """x if x > 0 else a * x, with a learnable `weight` (one per channel, or
    one shared), initialised to `init`."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(ember.empty(num_parameters, dtype=dtype, device=device))
        self.reset_parameters()

    def reset_parameters(self):
        from .. import init
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class GLU(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmin(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class Hardshrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.hardshrink(input, self.lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    def forward(self, input):
        return F.softshrink(input, self.lambd)


def _stateless(name, function):
    """A module with no options over a one-argument function."""
    def forward(self, input):
        return function(input)
    return type(name, (Module,), {"forward": forward, "__module__": __name__,
                                  "__doc__": f"Applies F.{function.__name__}."})


Softsign = _stateless("Softsign", F.softsign)
LogSigmoid = _stateless("LogSigmoid", F.logsigmoid)
Tanhshrink = _stateless("Tanhshrink", F.tanhshrink)

__all__ += ["Threshold", "LeakyReLU", "ELU", "CELU", "SELU", "Mish", "Hardswish",
            "Hardsigmoid", "Softplus", "Hardtanh", "ReLU6", "PReLU", "GLU", "Softmin",
            "Hardshrink", "Softshrink", "Softsign", "LogSigmoid", "Tanhshrink"]


# ---- multi-head attention ----------------------------------------------------------

class MultiheadAttention(Module):
    """PyTorch's nn.MultiheadAttention: its parameters (in_proj_weight, or
    q/k/v_proj_weight when kdim/vdim differ; in_proj_bias; out_proj;
    bias_k/bias_v), init, masks and outputs.  Sequence-first (L, N, E)
    unless batch_first; unbatched (L, E) inputs work too."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        from .linear import NonDynamicallyQuantizableLinear
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(ember.empty((3 * embed_dim, embed_dim), dtype=dtype))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(ember.empty((embed_dim, embed_dim), dtype=dtype))
            self.k_proj_weight = Parameter(ember.empty((embed_dim, self.kdim), dtype=dtype))
            self.v_proj_weight = Parameter(ember.empty((embed_dim, self.vdim), dtype=dtype))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(ember.empty(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(ember.empty((1, 1, embed_dim), dtype=dtype))
            self.bias_v = Parameter(ember.empty((1, 1, embed_dim), dtype=dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        from .. import init
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for weight in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Optional[Tensor] = None, need_weights: bool = True,
                attn_mask: Optional[Tensor] = None, average_attn_weights: bool = True,
                is_causal: bool = False):
        # annotated as PyTorch's, so that ember.jit.script compiles it (an
        # unannotated parameter is a Tensor there)
        batched = query.dim() == 3
        if self.batch_first and batched:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        output, weights = self._attention(query, key, value, key_padding_mask, need_weights,
                                          attn_mask, average_attn_weights, is_causal)
        if not batched:
            output = output.squeeze(1)
            weights = None if weights is None else weights.squeeze(0)
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, weights

    def _projection_weights(self):
        """(w_q, w_k, w_v, b_q, b_k, b_v)."""
        if self._qkv_same_embed_dim:
            w_q, w_k, w_v = ember.chunk(self.in_proj_weight, 3)
        else:
            w_q, w_k, w_v = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        if self.in_proj_bias is None:
            return w_q, w_k, w_v, None, None, None
        b_q, b_k, b_v = ember.chunk(self.in_proj_bias, 3)
        return w_q, w_k, w_v, b_q, b_k, b_v

    def _attention(self, query: Tensor, key: Tensor, value: Tensor,
                   key_padding_mask: Optional[Tensor], need_weights: bool,
                   attn_mask: Optional[Tensor], average_attn_weights: bool, is_causal: bool):
        """The sequence-first (L, N, E) computation of PyTorch's
        multi_head_attention_forward; returns (output, weights or None)."""
        length, batch, embed = query.shape
        heads, head_dim = self.num_heads, self.head_dim
        if embed != self.embed_dim:
            raise AssertionError(f"was expecting embedding dimension of {self.embed_dim}, but got "
                                 f"{embed}")
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                               "Transformer module method `generate_square_subsequent_mask` to "
                               "create this mask.")
        # PyTorch's rule: a causal hint without padding or weights to return lets
        # the attention kernel build the causal mask itself; otherwise the given
        # mask is used and the hint dropped.
        use_causal_kernel = is_causal and key_padding_mask is None and not need_weights
        if use_causal_kernel:
            attn_mask = None
        w_q, w_k, w_v, b_q, b_k, b_v = self._projection_weights()
        q, k, v = F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)
        attn_mask = _additive_mask(attn_mask, q)
        key_padding_mask = _additive_mask(key_padding_mask, q)
        if attn_mask is not None:
            attn_mask = _check_attn_mask(attn_mask, length, key.shape[0], batch * heads)
        if self.bias_k is not None:
            k = ember.cat([k, self.bias_k.expand(1, batch, embed)])
            v = ember.cat([v, self.bias_v.expand(1, batch, embed)])
            attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)
        q = q.reshape(length, batch * heads, head_dim).transpose(0, 1)
        k = k.reshape(k.shape[0], batch * heads, head_dim).transpose(0, 1)
        v = v.reshape(v.shape[0], batch * heads, head_dim).transpose(0, 1)
        if self.add_zero_attn:
            zeros = ember.zeros((batch * heads, 1, head_dim), dtype=q.dtype)
            k, v = ember.cat([k, zeros], 1), ember.cat([v, zeros], 1)
            attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)
        source = k.shape[1]
        if key_padding_mask is not None:
            if key_padding_mask.dim() != 2 or key_padding_mask.shape[0] != batch \
                    or key_padding_mask.shape[1] != source:
                raise AssertionError(f"expecting key_padding_mask shape of {(batch, source)}, but "
                                     f"got {key_padding_mask.shape}")
            padding = key_padding_mask.reshape(batch, 1, 1, source).expand(
                batch, heads, 1, source).reshape(batch * heads, 1, source)
            attn_mask = padding if attn_mask is None else attn_mask + padding
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            scores = ember.bmm(q * (1.0 / math.sqrt(head_dim)), k.transpose(1, 2))
            if attn_mask is not None:
                scores = scores + attn_mask
            weights = F.softmax(scores, -1)
            if dropout_p > 0.0:
                weights = F.dropout(weights, dropout_p, training=True)
            attended = ember.bmm(weights, v)
            weights = weights.reshape(batch, heads, length, source)
            if average_attn_weights:
                weights = weights.mean(dim=1)
        else:
            weights = None
            if attn_mask is not None:   # (N*H or 1, L or 1, S) -> (N or 1, H or 1, ., S)
                attn_mask = attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1 else \
                    attn_mask.reshape(batch, heads, attn_mask.shape[1], source)
            attended = F.scaled_dot_product_attention(
                q.reshape(batch, heads, length, head_dim), k.reshape(batch, heads, source, head_dim),
                v.reshape(batch, heads, source, head_dim), attn_mask, dropout_p,
                is_causal=use_causal_kernel)
            attended = attended.reshape(batch * heads, length, head_dim)
        attended = attended.transpose(0, 1).reshape(length * batch, embed)
        output = F.linear(attended, self.out_proj.weight, self.out_proj.bias)
        return output.reshape(length, batch, embed), weights


def _additive_mask(mask: Optional[Tensor], like: Tensor):
    """A bool mask (True = may not attend) as 0 / -inf in like's dtype; a
    float mask as is."""
    if mask is None or mask.dtype != ember.bool:
        return mask
    return ember.zeros(mask.shape, dtype=like.dtype).masked_fill(mask, float("-inf"))


def _pad_last(mask: Optional[Tensor]):
    """One more (allowed) key position at the end of a mask's last dim."""
    if mask is None:
        return None
    return ember.cat([mask, ember.zeros_like(mask.narrow(-1, 0, 1))], -1)


def _check_attn_mask(attn_mask: Tensor, length: int, source: int, batch_heads: int):
    if attn_mask.dim() == 2:
        if attn_mask.shape[0] != length or attn_mask.shape[1] != source:
            raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but "
                               f"should be {(length, source)}.")
        return attn_mask.unsqueeze(0)
    if attn_mask.dim() == 3:
        if attn_mask.shape[0] != batch_heads or attn_mask.shape[1] != length \
                or attn_mask.shape[2] != source:
            raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but "
                               f"should be {(batch_heads, length, source)}.")
        return attn_mask
    raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")


__all__ += ["MultiheadAttention"]


class RReLU(Module):
    """Randomized leaky ReLU: a slope drawn from U(lower, upper) for each
    negative element while training, (lower + upper) / 2 in eval mode."""

    __constants__ = ["lower", "upper", "inplace"]

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return _inplace_repr(self, f"lower={self.lower}, upper={self.upper}")


class Softmax2d(Module):
    """Softmax over the channels (dim -3) at each spatial location of a
    (N, C, H, W) or (C, H, W) input."""

    def forward(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(
                f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D instead")
        return F.softmax(input, -3, _stacklevel=5)


__all__ += ["RReLU", "Softmax2d"]
