"""The blockwise attention kernel (c/th/THAttention.c, Note [Attention in
blocks]) behind ember.nn.functional.scaled_dot_product_attention: against
NumPy written from the definition over Hypothesis-drawn shapes (L != S,
lengths that are not multiples of the 64 x 256 blocks, masks, is_causal,
grouped-query heads), float64 and float32; gradcheck and gradgradcheck
(the second order goes through the composite); PyTorch's outputs,
gradients and error messages where torch is installed; the private _C
entry points refuse bad arguments with exceptions, not crashes."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ember
import ember.nn.functional as F
from ember import _C
from ember.autograd import gradcheck, gradgradcheck

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


def attention_reference(q, k, v, allowed=None, bias=None, causal=False, scale=None):
    """softmax(q k^T scale + bias) v on (B, H, L, E) arrays, key/value heads
    repeated for grouped queries; a row that may attend to nothing gives 0."""
    groups = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, groups, axis=1), np.repeat(v, groups, axis=1)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if bias is not None:
        s = s + bias
    hidden = np.zeros(s.shape, bool)
    if allowed is not None:
        hidden |= ~allowed
    if causal:
        hidden |= np.triu(np.ones(s.shape[-2:], bool), 1)
    s = np.where(hidden, -np.inf, s)
    top = s.max(-1, keepdims=True)
    w = np.where(np.isneginf(top), 0.0, np.exp(s - np.where(np.isneginf(top), 0.0, top)))
    total = w.sum(-1, keepdims=True)
    return (w / np.where(total == 0, 1.0, total)) @ v


shapes = st.tuples(st.integers(1, 2), st.sampled_from([(1, 1), (2, 2), (4, 2)]),
                   st.integers(1, 80), st.integers(1, 300), st.integers(1, 9),
                   st.integers(1, 7))


@settings(max_examples=12, deadline=None)
@given(shape=shapes, masking=st.sampled_from(["none", "bool", "float", "causal"]),
       dtype=st.sampled_from(["float64", "float32"]), seed=st.integers(0, 2**16))
def test_forward_matches_numpy(shape, masking, dtype, seed):
    batch, (heads, kv_heads), length, source, dim, value_dim = shape
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((batch, heads, length, dim)).astype(dtype)
    k = rng.standard_normal((batch, kv_heads, source, dim)).astype(dtype)
    v = rng.standard_normal((batch, kv_heads, source, value_dim)).astype(dtype)
    mask = allowed = bias = None
    if masking == "bool":   # (L, S), broadcast over batch and heads
        allowed = rng.random((length, source)) > 0.3
        mask = ember.tensor(allowed)
    elif masking == "float":   # (B, 1, L, S), broadcast over heads
        bias = rng.standard_normal((batch, 1, length, source)).astype(dtype)
        mask = ember.tensor(bias)
    out = F.scaled_dot_product_attention(ember.tensor(q), ember.tensor(k), ember.tensor(v),
                                         attn_mask=mask, is_causal=masking == "causal",
                                         enable_gqa=True)
    want = attention_reference(q.astype(np.float64), k, v, allowed, bias,
                               masking == "causal")
    tol = 1e-12 if dtype == "float64" else 2e-5
    np.testing.assert_allclose(out.numpy(), want, rtol=tol, atol=tol)


def test_gradcheck_and_gradgradcheck():
    """A bool mask with an empty row and grouped heads; L != S.  (Gradients
    across several blocks: the C unit test's definition and the torch
    comparison below; a gradcheck there would take thousands of calls.)"""
    rng = np.random.default_rng(1)
    q, k, v = (ember.tensor(rng.standard_normal(s), requires_grad=True)
               for s in ((1, 2, 5, 3), (1, 1, 7, 3), (1, 1, 7, 2)))
    allowed = rng.random((5, 7)) > 0.5
    allowed[:, 0] = True
    allowed[2] = False
    mask = ember.tensor(allowed)

    def attend(a, b, c):
        return F.scaled_dot_product_attention(a, b, c, attn_mask=mask, enable_gqa=True)

    assert gradcheck(attend, (q, k, v))
    small = [ember.tensor(rng.standard_normal(s), requires_grad=True)
             for s in ((2, 5, 3), (2, 4, 3), (2, 4, 2))]
    assert gradgradcheck(lambda a, b, c: F.scaled_dot_product_attention(
        a, b, c, is_causal=True), small)


def test_strided_operands_and_3d_and_2d_inputs():
    """Transposed views (as MultiheadAttention passes) are read in place."""
    rng = np.random.default_rng(2)
    base = rng.standard_normal((6, 3, 2, 4))          # (L, B, H, E) -> (B, H, L, E)
    q = ember.tensor(base).permute(1, 2, 0, 3)
    out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    want = attention_reference(*(np.transpose(base, (1, 2, 0, 3)),) * 3, causal=True)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12, atol=1e-12)
    flat = base[:, 0, 0, :]
    out2 = F.scaled_dot_product_attention(*(ember.tensor(flat),) * 3)
    np.testing.assert_allclose(out2.numpy(), attention_reference(*(flat[None, None],) * 3)[0, 0],
                               rtol=1e-12, atol=1e-12)
    out3 = F.scaled_dot_product_attention(*(ember.tensor(base[:, 0]),) * 3)
    np.testing.assert_allclose(out3.numpy(), attention_reference(*(base[None, :, 0],) * 3)[0],
                               rtol=1e-12, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("case", ["causal", "bool", "float32_mask", "gqa"])
def test_outputs_and_gradients_match_torch(case):
    rng = np.random.default_rng(3)
    kv_heads = 2 if case == "gqa" else 4
    arrays = [rng.standard_normal(s).astype(np.float32)
              for s in ((2, 4, 67, 8), (2, kv_heads, 270, 8), (2, kv_heads, 270, 5))]
    ours = [ember.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    kwargs, mask = {}, None
    if case == "causal":
        kwargs["is_causal"] = True
    elif case == "bool":
        mask = rng.random((67, 270)) > 0.4
    elif case == "float32_mask":
        mask = rng.standard_normal((2, 1, 67, 270)).astype(np.float32)
    else:
        kwargs["enable_gqa"] = True
    out = F.scaled_dot_product_attention(
        *ours, attn_mask=None if mask is None else ember.tensor(mask), **kwargs)
    ref = torch.nn.functional.scaled_dot_product_attention(
        *theirs, attn_mask=None if mask is None else torch.tensor(mask), **kwargs)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), atol=1e-5)
    grad = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(ember.tensor(grad))
    ref.backward(torch.tensor(grad))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_scores_far_below_their_row_max(dtype):
    """Scores whose exps underflow (Note [Exp without underflow]): a float
    mask of -95 (subnormal exps), -120 and -1e4 (exps of +0) beside a causal
    block's -inf, rows of 300 keys (two key blocks and a vector tail), so
    the forward's running sums and the backward's recomputed probabilities
    run the exps in both dtypes (Note [Exps apart from their sum]);
    against NumPy for the output, torch for the gradients."""
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((1, 2, 300, 6)).astype(dtype) for _ in range(3))
    bias = rng.choice(np.array([0.0, -95.0, -120.0, -1e4], dtype), size=(1, 1, 300, 300))
    bias[..., 0] = 0.0                      # every row sees key 0
    ours = [ember.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*ours, attn_mask=ember.tensor(bias), is_causal=False)
    causal = F.scaled_dot_product_attention(*(ember.tensor(a) for a in (q, k, v)),
                                            is_causal=True)
    tol = 1e-12 if dtype == "float64" else 2e-5
    np.testing.assert_allclose(out.detach().numpy(),
                               attention_reference(q.astype(np.float64), k, v, bias=bias),
                               rtol=tol, atol=tol)
    np.testing.assert_allclose(causal.numpy(),
                               attention_reference(q.astype(np.float64), k, v, causal=True),
                               rtol=tol, atol=tol)
    if torch is None:
        return
    grad = rng.standard_normal(out.shape).astype(dtype)
    out.backward(ember.tensor(grad))
    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    torch.nn.functional.scaled_dot_product_attention(
        *theirs, attn_mask=torch.tensor(bias)).backward(torch.tensor(grad))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=tol * 10,
                                   atol=tol * 10)


@needs_torch
def test_bad_arguments_give_torchs_messages():
    q = np.zeros((1, 2, 3, 4), np.float32)
    k = np.zeros((1, 3, 5, 4), np.float32)
    calls = [
        lambda lib: lib.nn.functional.scaled_dot_product_attention(
            lib.tensor(q), lib.tensor(q).double(), lib.tensor(q)),
        lambda lib: lib.nn.functional.scaled_dot_product_attention(
            lib.tensor(q), lib.tensor(q), lib.tensor(q),
            attn_mask=lib.ones(3, 3, dtype=lib.int64)),
        lambda lib: lib.nn.functional.scaled_dot_product_attention(
            lib.tensor(q), lib.tensor(k), lib.tensor(k), enable_gqa=True),
    ]
    for call in calls:
        with pytest.raises(RuntimeError) as theirs:
            call(torch)
        with pytest.raises(RuntimeError) as ours:
            call(ember)
        assert str(ours.value) == str(theirs.value)


def test_private_entry_points_refuse_bad_arguments():
    q = ember.zeros(1, 2, 3, 4)
    with pytest.raises(TypeError, match="argument 2 must be Tensor"):
        _C._attention(q, 1, q, None, 1.0, False)
    with pytest.raises(TypeError, match="takes 6 arguments"):
        _C._attention(q, q, q)
    with pytest.raises(RuntimeError, match="multiple of Hk"):
        _C._attention(q, ember.zeros(1, 3, 3, 4), ember.zeros(1, 3, 3, 4), None, 1.0, False)
    with pytest.raises(RuntimeError, match="mask"):
        _C._attention(q, q, q, ember.zeros(3, 3), 1.0, False)
    with pytest.raises(TypeError, match="float32 or float64"):
        _C._attention(*(ember.zeros(1, 2, 3, 4, dtype=ember.int64),) * 3, None, 1.0, False)
    out, lse = _C._attention(q, q, q, None, 0.5, True)
    with pytest.raises(RuntimeError, match="grad_out must match"):
        _C._attention_backward(lse, q, q, q, out, lse, None, 0.5, True, True, True, True)
