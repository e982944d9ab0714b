"""scaled_dot_product_attention, MultiheadAttention and the Transformer
layers (issue 12) against PyTorch with the same weights: outputs and every
gradient in float64 (dropout 0 or eval), masks of every kind; gradchecks;
state_dict keys and reprs.  Pure Python composites over existing C."""

import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.autograd import gradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def twins(rng, *shapes):
    """(ember tensors, torch tensors) with the same float64 values, requiring grad."""
    arrays = [rng.standard_normal(shape) for shape in shapes]
    return ([ember.tensor(a, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


def check_same(ours, theirs, rtol=1e-9, atol=1e-11):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(),
                               rtol=rtol, atol=atol)


def backward_both(ours_out, theirs_out, rng):
    weights = rng.standard_normal(tuple(theirs_out.shape))
    (ours_out * ember.tensor(weights)).sum().backward()
    (theirs_out * torch.tensor(weights)).sum().backward()


def copy_state(ours, theirs):
    ours.load_state_dict({k: ember.tensor(v.detach().numpy().copy())
                          for k, v in theirs.state_dict().items()})


SDPA_CASES = [
    dict(),
    dict(is_causal=True),
    dict(scale=0.3),
    dict(mask="bool"),
    dict(mask="float"),
    dict(mask="bool", is_causal=True),
    dict(mask="empty_row"),
    dict(gqa=True),
]


@pytest.mark.parametrize("case", SDPA_CASES)
def test_sdpa_matches_torch(case):
    rng = np.random.default_rng(0)
    heads_kv = 2 if case.get("gqa") else 4
    (q, k, v), (tq, tk, tv) = twins(rng, (2, 4, 3, 5), (2, heads_kv, 6, 5), (2, heads_kv, 6, 5))
    kwargs = {key: case[key] for key in ("is_causal", "scale") if key in case}
    if case.get("gqa"):
        kwargs["enable_gqa"] = True
    ours_mask = theirs_mask = None
    if case.get("mask") in ("bool", "empty_row"):
        allowed = rng.random((3, 6)) > 0.4
        allowed[:, 0] = True
        if case["mask"] == "empty_row":
            allowed[1] = False
        ours_mask, theirs_mask = ember.tensor(allowed), torch.tensor(allowed)
    elif case.get("mask") == "float":
        bias = rng.standard_normal((2, 1, 3, 6))
        ours_mask, theirs_mask = ember.tensor(bias), torch.tensor(bias)
    ours = F.scaled_dot_product_attention(q, k, v, attn_mask=ours_mask, **kwargs)
    theirs = TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=theirs_mask, **kwargs)
    check_same(ours, theirs)
    backward_both(ours, theirs, rng)
    for a, b in zip((q, k, v), (tq, tk, tv)):
        check_same(a.grad, b.grad)


def test_sdpa_gradcheck():
    rng = np.random.default_rng(1)
    q, k, v = (ember.tensor(rng.standard_normal(s), requires_grad=True)
               for s in ((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)))
    mask = ember.tensor(rng.random((3, 5)) > 0.3)
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=mask),
                     (q, k, v))
    assert gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
                     (q, k, v))


MHA_CASES = [
    dict(),
    dict(need_weights=False),
    dict(average_attn_weights=False),
    dict(batch_first=True),
    dict(kdim=3, vdim=7),
    dict(add_bias_kv=True, add_zero_attn=True),
    dict(bias=False),
    dict(attn_mask="bool2d", key_padding_mask="bool"),
    dict(attn_mask="float3d", need_weights=False),
    dict(key_padding_mask="float"),
    dict(attn_mask="causal", is_causal=True, need_weights=False),
    dict(unbatched=True),
]

MODULE_KEYS = ("batch_first", "kdim", "vdim", "add_bias_kv", "add_zero_attn", "bias")


@pytest.mark.parametrize("case", MHA_CASES)
def test_multihead_attention_matches_torch(case):
    torch.manual_seed(0)
    options = {key: case[key] for key in MODULE_KEYS if key in case}
    theirs = torch.nn.MultiheadAttention(8, 2, **options).double()
    ours = nn.MultiheadAttention(8, 2, **options).double()
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    copy_state(ours, theirs)
    rng = np.random.default_rng(2)
    length, source, batch = 3, 5, 2
    kdim, vdim = case.get("kdim", 8), case.get("vdim", 8)
    if case.get("unbatched"):
        shapes = [(length, 8), (source, kdim), (source, vdim)]
    elif case.get("batch_first"):
        shapes = [(batch, length, 8), (batch, source, kdim), (batch, source, vdim)]
    else:
        shapes = [(length, batch, 8), (source, batch, kdim), (source, batch, vdim)]
    ours_in, theirs_in = twins(rng, *shapes)
    call = {key: case[key] for key in ("need_weights", "average_attn_weights", "is_causal")
            if key in case}
    ours_call, theirs_call = dict(call), dict(call)
    if case.get("attn_mask") == "bool2d":
        mask = rng.random((length, source)) > 0.7
        ours_call["attn_mask"], theirs_call["attn_mask"] = ember.tensor(mask), torch.tensor(mask)
    elif case.get("attn_mask") == "float3d":
        mask = rng.standard_normal((batch * 2, length, source))
        ours_call["attn_mask"], theirs_call["attn_mask"] = ember.tensor(mask), torch.tensor(mask)
    elif case.get("attn_mask") == "causal":
        mask = torch.nn.Transformer.generate_square_subsequent_mask(length, dtype=torch.float64)
        pad = torch.zeros(length, source - length, dtype=torch.float64)
        mask = torch.cat([mask, pad], 1)
        ours_call["attn_mask"], theirs_call["attn_mask"] = ember.tensor(mask.numpy()), mask
    if case.get("key_padding_mask") == "bool":
        padding = np.array([[False] * 4 + [True], [False] * 5])
        ours_call["key_padding_mask"] = ember.tensor(padding)
        theirs_call["key_padding_mask"] = torch.tensor(padding)
    elif case.get("key_padding_mask") == "float":
        padding = rng.standard_normal((batch, source))
        ours_call["key_padding_mask"] = ember.tensor(padding)
        theirs_call["key_padding_mask"] = torch.tensor(padding)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # torch's notes about mask types and fast paths
        ours_out, ours_weights = ours(*ours_in, **ours_call)
        theirs_out, theirs_weights = theirs(*theirs_in, **theirs_call)
    check_same(ours_out, theirs_out)
    if theirs_weights is None:
        assert ours_weights is None
    else:
        check_same(ours_weights, theirs_weights)
    backward_both(ours_out, theirs_out, rng)
    for a, b in zip(ours_in, theirs_in):
        check_same(a.grad, b.grad)
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        check_same(p.grad, q.grad)


LAYER_CASES = [
    ("TransformerEncoderLayer", dict()),
    ("TransformerEncoderLayer", dict(norm_first=True, activation="gelu", batch_first=True)),
    ("TransformerDecoderLayer", dict()),
    ("TransformerDecoderLayer", dict(norm_first=True, bias=False)),
]


@pytest.mark.parametrize("name, options", LAYER_CASES)
def test_transformer_layers_match_torch(name, options):
    torch.manual_seed(3)
    theirs = getattr(torch.nn, name)(8, 2, 16, dropout=0.0, **options).double()
    ours = getattr(nn, name)(8, 2, 16, dropout=0.0, **options).double()
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    copy_state(ours, theirs)
    rng = np.random.default_rng(4)
    first = (2, 4, 8) if options.get("batch_first") else (4, 2, 8)
    shapes = [first, (5, 2, 8)] if "Decoder" in name else [first]
    ours_in, theirs_in = twins(rng, *shapes)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64)
    padding = np.array([[False, False, False, True], [False] * 4])
    if "Decoder" in name:
        ours_kw = dict(tgt_mask=ember.tensor(causal.numpy()), tgt_is_causal=True)
        theirs_kw = dict(tgt_mask=causal, tgt_is_causal=True)
    else:
        ours_kw = dict(src_key_padding_mask=ember.tensor(padding))
        theirs_kw = dict(src_key_padding_mask=torch.tensor(padding))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours_out = ours(*ours_in, **ours_kw)
        theirs_out = theirs(*theirs_in, **theirs_kw)
    check_same(ours_out, theirs_out)
    backward_both(ours_out, theirs_out, rng)
    for a, b in zip(ours_in, theirs_in):
        check_same(a.grad, b.grad)
    for (pname, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        check_same(p.grad, q.grad)


def test_full_transformer_matches_torch():
    torch.manual_seed(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nn.Transformer(8, 2, 2, 2, 16, dropout=0.0).double()
    ours = nn.Transformer(8, 2, 2, 2, 16, dropout=0.0).double()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    copy_state(ours, theirs)
    rng = np.random.default_rng(6)
    (src, tgt), (tsrc, ttgt) = twins(rng, (5, 2, 8), (4, 2, 8))
    mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=ember.float64)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=torch.float64)
    check_same(mask, tmask)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours_out = ours(src, tgt, tgt_mask=mask)
        theirs_out = theirs(tsrc, ttgt, tgt_mask=tmask)
    check_same(ours_out, theirs_out, rtol=1e-8)
    backward_both(ours_out, theirs_out, rng)
    check_same(src.grad, tsrc.grad, rtol=1e-8)
    for (name, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        check_same(p.grad, q.grad, rtol=1e-7, atol=1e-10)


def test_multihead_attention_gradcheck_and_errors():
    mha = nn.MultiheadAttention(4, 2).double()
    x = ember.randn(3, 1, 4, dtype=ember.float64, requires_grad=True)
    assert gradcheck(lambda t: mha(t, t, t)[0], (x,))
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(5, 2)
    with pytest.raises(RuntimeError, match="The shape of the 2D attn_mask is"):
        mha(x, x, x, attn_mask=ember.zeros(2, 2, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        mha(x, x, x, is_causal=True)
    with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
        nn.TransformerEncoderLayer(4, 2, activation="tanh")
