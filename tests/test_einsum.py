"""ember.einsum and ember.einsum_path: values against np.einsum, gradients
and error messages against PyTorch, gradcheck and gradgradcheck."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.autograd import gradcheck, gradgradcheck

CASES = [
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ab,bc,cd,de->ae", [(2, 9), (9, 8), (8, 3), (3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->ji", [(2, 2, 3)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ij", [(2, 3)]),
    ("ba", [(2, 3)]),
    ("i,i", [(3,), (3,)]),
    ("i,j->ij", [(2,), (3,)]),
    ("i,i->i", [(4,), (4,)]),
    ("bij,j->bi", [(2, 3, 1), (4,)]),
    ("ij,ij->", [(2, 3), (1, 3)]),
    ("...ij,...jk", [(2, 1, 2, 3), (4, 3, 5)]),
    ("...ij,...jk->...ik", [(2, 3), (5, 3, 2)]),
    ("i...->...", [(2, 3, 4)]),
    ("...,...", [(2, 3), (3,)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]),
    ("Ab,bA->", [(2, 3), (3, 2)]),
    ("i,,j->ij", [(2,), (), (3,)]),
    ("", [()]),
    (" i j , j k -> i k ", [(2, 3), (3, 4)]),
    ("ij,kl->", [(2, 3), (4, 5)]),
    ("aab,bc->ac", [(3, 3, 4), (4, 2)]),
]


def operands(shapes, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, shape).astype(dtype) for shape in shapes]


@pytest.mark.parametrize("equation,shapes", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_as_numpy(equation, shapes, dtype):
    arrays = operands(shapes, dtype)
    expected = np.einsum(equation.replace(" ", ""), *arrays)
    for got in (ember.einsum(equation, *[ember.tensor(a) for a in arrays]),
                ember.einsum(equation, [ember.tensor(a) for a in arrays])):
        assert tuple(got.shape) == expected.shape
        assert got.dtype == (ember.float32 if dtype == np.float32 else ember.float64)
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got.numpy(), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("equation,shapes", [c for c in CASES if c[0] != ""])
def test_gradcheck(equation, shapes):
    inputs = [ember.tensor(a, requires_grad=True) for a in operands(shapes)]
    assert gradcheck(lambda *xs: ember.einsum(equation, *xs), inputs)


@pytest.mark.parametrize("equation,shapes", [CASES[0], CASES[3], CASES[7], CASES[17]])
def test_gradgradcheck(equation, shapes):
    inputs = [ember.tensor(a, requires_grad=True) for a in operands(shapes)]
    assert gradgradcheck(lambda *xs: ember.einsum(equation, *xs), inputs)


def test_gradients_as_pytorch():
    torch = pytest.importorskip("torch")
    for equation, shapes in CASES:
        arrays = operands(shapes)
        ours = [ember.tensor(a, requires_grad=True) for a in arrays]
        theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
        ember.einsum(equation, *ours).square().sum().backward()
        torch.einsum(equation, *theirs).square().sum().backward()
        for e, t in zip(ours, theirs):
            np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_views_of_any_layout():
    base = np.random.default_rng(1).uniform(-1, 1, (4, 6, 5))
    a = ember.tensor(base).transpose(0, 2)[:, ::2]  # (5, 3, 4), no unit stride
    b = ember.tensor(base[:1]).expand(3, 6, 5)
    got = ember.einsum("kjb,bil->kjil", a, b[:, :, :4].transpose(0, 1)[:4])
    expected = np.einsum("kjb,bil->kjil", a.numpy(), b[:, :, :4].transpose(0, 1)[:4].numpy())
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)


def test_contraction_order_is_greedy_by_size():
    """A chain whose cheap end is on the right is contracted from there."""
    shapes = [(2, 50), (50, 60), (60, 3), (3, 4)]
    tensors = [ember.ones(s) for s in shapes]
    path, report = ember.einsum_path("ab,bc,cd,de->ae", *tensors)
    assert path[0] == "einsum_path"
    assert path[1] == (1, 2)  # bc,cd->bd removes 3000 + 180 - 150 elements
    assert "bc,cd->bd" in report
    assert len(path) == 4


def test_sublist_format():
    torch = pytest.importorskip("torch")
    a, b = operands([(2, 3), (3, 4)])
    for args in ([0, 1], [1, 2], [0, 2]), ([0, 1], [1, 2]), ([Ellipsis, 1], [1, 2]), ([0, 1], [1]):
        theirs = torch.einsum(*_interleave([torch.tensor(a), torch.tensor(b)], args))
        ours = ember.einsum(*_interleave([ember.tensor(a), ember.tensor(b)], args))
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
    for bad in [("ij",), (ember.ones(2), [99])]:
        with pytest.raises(ValueError) as ours:
            ember.einsum(*bad)
        with pytest.raises(ValueError) as theirs:
            torch.einsum(*[torch.ones(2) if isinstance(x, ember.Tensor) else x for x in bad])
        assert str(ours.value) == str(theirs.value)


def _interleave(tensors, sublists):
    """op0, sublist0, op1, sublist1, ... [output]: a one-operand form
    when only two sublists are given and the second is the output."""
    if len(sublists) == 2 and len(sublists[1]) == 1:
        return [tensors[0], sublists[0], sublists[1]]
    args = []
    for t, s in zip(tensors, sublists):
        args += [t, s]
    return args + list(sublists[len(tensors):])


def test_identity_is_a_new_alias():
    a = ember.ones(2, 3, requires_grad=True)
    b = ember.einsum("ij->ij", a)
    assert b is not a and b.data_ptr() == a.data_ptr()
    b.sum().backward()
    assert a.grad.tolist() == [[1.0] * 3] * 2


def test_programs_are_reused_and_errors_repeat():
    a, b = ember.ones(2, 3), ember.ones(3, 4)
    first = ember.einsum("ij,jk->ik", a, b)
    second = ember.einsum("ij,jk->ik", a * 2, b)
    assert (second - 2 * first).abs().max().item() == 0
    for _ in range(2):
        with pytest.raises(RuntimeError, match="does not broadcast"):
            ember.einsum("ij,ik->jk", a, b)


def test_empty_operands():
    got = ember.einsum("bij,bjk->bik", ember.ones(0, 2, 3), ember.ones(0, 3, 4))
    assert tuple(got.shape) == (0, 2, 4)
    got = ember.einsum("ij,jk->ik", ember.ones(2, 0), ember.ones(0, 4))
    assert got.tolist() == [[0.0] * 4] * 2


def test_path_of_one_operand_is_empty():
    path, report = ember.einsum_path("ii->i", ember.ones(3, 3))
    assert path == ["einsum_path"]
    assert "ii->i" in report


@settings(max_examples=min(60, settings.default.max_examples), deadline=None)
@given(st.data())
def test_random_equations_as_numpy(data):
    letters = "abcdef"
    sizes = {x: data.draw(st.integers(1, 3)) for x in letters}
    n_operands = data.draw(st.integers(1, 3))
    terms = [data.draw(st.lists(st.sampled_from(letters), max_size=4)) for _ in range(n_operands)]
    used = sorted({x for t in terms for x in t})
    output = data.draw(st.permutations(used)).__getitem__(slice(0, data.draw(st.integers(0, len(used)))))
    equation = ",".join("".join(t) for t in terms) + "->" + "".join(output)
    arrays = [np.random.default_rng(3).uniform(-1, 1, [sizes[x] for x in t]) for t in terms]
    got = ember.einsum(equation, *[ember.tensor(a) for a in arrays])
    np.testing.assert_allclose(got.numpy(), np.einsum(equation, *arrays), rtol=1e-10, atol=1e-12)


ERRORS = [
    ("ij,jk", [(2, 3)]),
    ("ij", [(2, 3), (3, 4)]),
    ("i1,jk", [(2, 3), (3, 4)]),
    ("ijk", [(2, 3)]),
    ("i", [(2, 3)]),
    ("ij,jk->iz", [(2, 3), (3, 4)]),
    ("ij,jk->ii", [(2, 3), (3, 4)]),
    ("ij,ik->jk", [(2, 3), (3, 4)]),
    ("ii", [(2, 3)]),
    ("i..j", [(2, 3)]),
    ("...i...", [(2, 3)]),
    ("ij->i->j", [(2, 3)]),
    ("ijk...", [(2, 3)]),
    ("i j,j k->i 1", [(2, 3), (3, 4)]),
]


@pytest.mark.parametrize("equation,shapes", ERRORS)
def test_errors_as_pytorch(equation, shapes):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as theirs:
        torch.einsum(equation, *[torch.ones(s) for s in shapes])
    with pytest.raises(RuntimeError) as ours:
        ember.einsum(equation, *[ember.ones(s) for s in shapes])
    assert str(ours.value) == str(theirs.value)
