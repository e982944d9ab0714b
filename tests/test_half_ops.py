"""Operators on float16 and bfloat16: elementwise, unary, reductions,
scans, softmax and matmul compute in float32 and round once (PyTorch's CPU
does the same), so the results agree with PyTorch's within its own
tolerances for the dtype; and gradients flow through them in the same
dtype.  The casts themselves are in test_half.py.
"""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

HALVES = [(ember.float16, torch.float16), (ember.bfloat16, torch.bfloat16)]
HALF_IDS = ["float16", "bfloat16"]
# torch.testing's default tolerances for the dtypes
TOL = {torch.float16: dict(rtol=1e-3, atol=1e-5),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1e-5)}


def pair(shape, tdtype, seed, positive=False):
    gen = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=gen)
    if positive:
        t = t.abs() + 0.1
    t = t.to(tdtype)
    return ember.from_dlpack(t.clone()), t


def check(ours, theirs, tdtype, scale=1):
    if isinstance(theirs, tuple):
        for o, t in zip(ours, theirs):
            check(o, t, tdtype, scale)
        return
    assert str(ours.dtype).removeprefix("ember.") == str(theirs.dtype).removeprefix("torch.")
    got = torch.from_dlpack(ours.contiguous())
    tol = {k: v * scale for k, v in TOL.get(theirs.dtype, TOL[tdtype]).items()}
    torch.testing.assert_close(got.float(), theirs.float(), equal_nan=True, **tol)


BINARY = {
    "add": lambda m, a, b: a + b,
    "sub_alpha": lambda m, a, b: m.sub(a, b, alpha=2),
    "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b,
    "maximum": lambda m, a, b: m.maximum(a, b),
    "pow": lambda m, a, b: a.abs() ** b,
    "atan2": lambda m, a, b: m.atan2(a, b),
    "scalar": lambda m, a, b: a * 0.1 + 3,
    "where": lambda m, a, b: m.where(a > b, a, b),
    "lt": lambda m, a, b: a < b,
}


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_ops(edtype, tdtype, name):
    (ea, ta), (eb, tb) = pair((5, 33), tdtype, 1), pair((5, 33), tdtype, 2)
    check(BINARY[name](ember, ea, eb), BINARY[name](torch, ta, tb), tdtype)


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
def test_elementwise_rounds_once_from_float32(edtype, tdtype):
    # exactly the float32 result rounded: bit for bit
    (ea, ta), (eb, tb) = pair((4096,), tdtype, 3), pair((4096,), tdtype, 4)
    for op in (lambda a, b: a * b, lambda a, b: a / b, lambda a, b: a + b):
        expected = op(ta.float(), tb.float()).to(tdtype)
        assert torch.equal(torch.from_dlpack(op(ea, eb)), expected)


UNARY = ["exp", "log", "sqrt", "sin", "tanh", "sigmoid", "neg", "abs",
         "floor", "round", "reciprocal", "rsqrt", "erf", "isnan"]


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
@pytest.mark.parametrize("name", UNARY)
def test_unary_ops(edtype, tdtype, name):
    ea, ta = pair((7, 19), tdtype, 5, positive=name in ("log", "sqrt", "rsqrt"))
    check(getattr(ea, name)(), getattr(ta, name)(), tdtype)


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
def test_unary_inplace_and_nan_to_num(edtype, tdtype):
    ea, ta = pair((3, 5), tdtype, 6)
    ea.exp_()
    ta.exp_()
    check(ea, ta, tdtype)
    special = [float("nan"), float("inf"), -float("inf"), 1.5]
    check(ember.tensor(special, dtype=edtype).nan_to_num(),
          torch.tensor(special, dtype=tdtype).nan_to_num(), tdtype)


REDUCTIONS = {
    "sum": lambda t: t.sum(),
    "sum_dim": lambda t: t.sum(1),
    "mean": lambda t: t.mean(0),
    "prod": lambda t: (t[:, :8] * 0.1 + 1).prod(1),
    "amax": lambda t: t.amax(0),
    "max_dim": lambda t: t.max(1),
    "argmin": lambda t: t.argmin(1),
    "var": lambda t: t.var(1),
    "std": lambda t: t.std(),
    "norm": lambda t: t.norm(),
    "logsumexp": lambda t: t.logsumexp(1),
    "softmax": lambda t: t.softmax(1),
    "log_softmax": lambda t: t.log_softmax(0),
    "cumsum": lambda t: t.cumsum(1),
    "sort": lambda t: t.sort(1)[0],  # (indices of ties may differ)
    "count_nonzero": lambda t: (t > 0.5).count_nonzero(),
    "sum_to_float32": lambda t: t.sum(0, dtype=t.new_ones(1).float().dtype),
}


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_reductions(edtype, tdtype, name):
    # a long axis: float32 accumulation keeps the sum of 3000 halves accurate
    ea, ta = pair((6, 3000), tdtype, 7)
    check(REDUCTIONS[name](ea), REDUCTIONS[name](ta), tdtype, scale=2)


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
def test_index_ops(edtype, tdtype):
    ea, ta = pair((4, 6), tdtype, 8)
    index = [[0, 1, 2], [3, 0, 1], [2, 2, 2], [5, 4, 3]]
    check(ea.gather(1, ember.tensor(index)), ta.gather(1, torch.tensor(index)), tdtype)
    check(ea.scatter_add(1, ember.tensor(index), ea[:, :3]),
          ta.scatter_add(1, torch.tensor(index), ta[:, :3]), tdtype)
    check(ea.index_select(0, ember.tensor([3, 1])), ta.index_select(0, torch.tensor([3, 1])), tdtype)
    check(ea[ea > 0], ta[ta > 0], tdtype)
    assert ea.nonzero().tolist() == ta.nonzero().tolist()


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
@pytest.mark.parametrize("shapes", [((33, 70), (70, 17)), ((3, 20, 30), (30, 8)),
                                    ((128, 256), (256, 64))])
def test_matmul(edtype, tdtype, shapes):
    (ea, ta), (eb, tb) = pair(shapes[0], tdtype, 9), pair(shapes[1], tdtype, 10)
    check(ea @ eb, ta @ tb, tdtype, scale=4)
    # float32 accumulation, rounded once: the float32 product rounded
    expected = (ta.float() @ tb.float()).to(tdtype)
    check(ea @ eb, expected, tdtype)


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
def test_matmul_with_out_and_addmm(edtype, tdtype):
    (ea, ta), (eb, tb), (ec, tc) = (pair((8, 5), tdtype, 11),
                                    pair((5, 6), tdtype, 12), pair((8, 6), tdtype, 13))
    check(ember.addmm(ec, ea, eb, beta=0.5, alpha=2),
          torch.addmm(tc, ta, tb, beta=0.5, alpha=2), tdtype, scale=2)
    out = ember.empty(8, 6, dtype=edtype)
    ember.matmul(ea, eb, out=out)
    check(out, ta @ tb, tdtype)


# ---- autograd ----------------------------------------------------------------------


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
def test_gradients_in_half_like_torch(edtype, tdtype):
    (ea, ta), (eb, tb) = pair((4, 7), tdtype, 14), pair((7, 3), tdtype, 15)
    ea.requires_grad_()
    eb.requires_grad_()
    ta.requires_grad_()
    tb.requires_grad_()

    def program(m, a, b):
        h = (a @ b).tanh() * 2 + a.sum(1, keepdim=True)
        return (h.softmax(1) * h.exp()).mean()

    program(ember, ea, eb).backward()
    program(torch, ta, tb).backward()
    assert ea.grad.dtype is edtype and eb.grad.dtype is edtype
    check(ea.grad, ta.grad, tdtype, scale=4)
    check(eb.grad, tb.grad, tdtype, scale=4)


@pytest.mark.parametrize("edtype,tdtype", HALVES, ids=HALF_IDS)
@pytest.mark.parametrize("cast", ["to", "method"])
def test_gradient_through_casts(edtype, tdtype, cast):
    # (no gradcheck: its float64 finite differences are rounded away by a
    # cast to 16 bits; the gradient is compared with PyTorch's instead)
    def run(m, x, dtype):
        name = "half" if "float16" in str(dtype) else "bfloat16"
        narrow = x.to(dtype) if cast == "to" else getattr(x, name)()
        return (narrow * narrow.new_tensor([0.3, 2.0, -1.0])).sum()

    x = ember.tensor([0.5, -1.25, 3.0], requires_grad=True)
    t = torch.tensor([0.5, -1.25, 3.0], requires_grad=True)
    run(ember, x, edtype).backward()
    run(torch, t, tdtype).backward()
    assert x.grad.dtype is ember.float32
    assert x.grad.tolist() == t.grad.tolist()

