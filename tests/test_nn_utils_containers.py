"""nn.utils (gradient clipping, parameters <-> vector), ParameterList,
ParameterDict, Bilinear and the full backward hooks of issue 12, against
PyTorch.  Pure Python over existing C operators."""

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.autograd import gradcheck

torch = pytest.importorskip("torch")


def twin_parameters(shapes, seed=0):
    """The same float64 parameters, with the same gradients, in both libraries."""
    rng = np.random.default_rng(seed)
    ours, theirs = [], []
    for shape in shapes:
        value, grad = rng.standard_normal(shape), rng.standard_normal(shape) * 3
        for params, lib in ((ours, ember), (theirs, torch)):
            p = lib.nn.Parameter(lib.tensor(value))
            p.grad = lib.tensor(grad)
            params.append(p)
    return ours, theirs


def check_same(ours, theirs, rtol=1e-12):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.5, float("inf"), "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    ours, theirs = twin_parameters([(3, 4), (5,), (2, 2, 2)])
    ours_total = nn.utils.clip_grad_norm_(ours, max_norm, norm_type)
    theirs_total = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
    check_same(ours_total, theirs_total)
    for p, q in zip(ours, theirs):
        check_same(p.grad, q.grad)


def test_clip_grad_norm_edge_cases():
    ours, theirs = twin_parameters([(2, 2)])
    check_same(nn.utils.clip_grad_norm_(ours[0], 0.1), torch.nn.utils.clip_grad_norm_(theirs[0], 0.1))
    no_grad = nn.Parameter(ember.ones(2))
    assert nn.utils.clip_grad_norm_([no_grad], 1.0).item() == 0.0
    ours[0].grad[0, 0] = float("nan")
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from "
                                           "`parameters` is non-finite"):
        nn.utils.clip_grad_norm_(ours, 1.0, error_if_nonfinite=True)
    assert bool(ember.isnan(nn.utils.clip_grad_norm_(ours, 1.0)))


def test_clip_grad_value_and_vector_round_trip():
    ours, theirs = twin_parameters([(3, 4), (5,)])
    nn.utils.clip_grad_value_(ours, 0.7)
    torch.nn.utils.clip_grad_value_(theirs, 0.7)
    for p, q in zip(ours, theirs):
        check_same(p.grad, q.grad)
    check_same(nn.utils.parameters_to_vector(ours), torch.nn.utils.parameters_to_vector(theirs))
    vector = ember.arange(17, dtype=ember.float64)
    nn.utils.vector_to_parameters(vector, ours)
    assert ours[0].tolist() == np.arange(12.0).reshape(3, 4).tolist()
    assert ours[1].tolist() == [12.0, 13.0, 14.0, 15.0, 16.0]
    with pytest.raises(TypeError, match="expected ember.Tensor, but got: list"):
        nn.utils.vector_to_parameters([1.0], ours)


def test_parameters_to_vector_is_differentiable():
    a = ember.tensor([[1.0, 2.0]], dtype=ember.float64, requires_grad=True)
    b = ember.tensor([3.0], dtype=ember.float64, requires_grad=True)
    assert gradcheck(lambda x, y: nn.utils.parameters_to_vector([x, y]) ** 2, (a, b))


def test_parameter_list_matches_torch():
    ours = nn.ParameterList([nn.Parameter(ember.ones(2, 3)), ember.ones(3)])
    theirs = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(2, 3)), torch.ones(3)])
    assert repr(ours) == repr(theirs).replace("torch", "ember")
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert all(isinstance(p, nn.Parameter) for p in ours) and len(ours) == 2
    ours.append(ember.zeros(1))
    ours[0] = ember.full((1,), 5.0)
    assert isinstance(ours[0], nn.Parameter) and ours[0].tolist() == [5.0]
    assert len(list(ours.parameters())) == 3 and ours[-1].shape == (1,)
    assert [p.shape for p in ours[1:]] == [(3,), (1,)]
    with pytest.raises(IndexError, match="index 3 is out of range"):
        ours[3]
    with pytest.raises(RuntimeError, match="ParameterList should not be called."):
        ours(1)


def test_parameter_dict_matches_torch():
    ours = nn.ParameterDict({"b": ember.ones(2), "a": nn.Parameter(ember.ones(1, 2, dtype=ember.float64))})
    theirs = torch.nn.ParameterDict({"b": torch.ones(2), "a": torch.nn.Parameter(torch.ones(1, 2, dtype=torch.float64))})
    assert repr(ours) == repr(theirs).replace("torch", "ember")
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["a", "b"]
    assert list(ours.keys()) == ["a", "b"] and "a" in ours and len(ours) == 2
    ours["c"] = ember.zeros(3)
    assert isinstance(ours["c"], nn.Parameter)
    assert ours.pop("c").shape == (3,) and "c" not in ours
    assert [k for k, _ in ours.items()] == ["a", "b"]
    with pytest.raises(TypeError, match="should be called with an iterable"):
        ours.update(3)


def test_bilinear_matches_torch():
    torch.manual_seed(0)
    theirs = torch.nn.Bilinear(3, 4, 5).double()
    ours = nn.Bilinear(3, 4, 5).double()
    ours.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    assert repr(ours) == repr(theirs) and list(ours.state_dict()) == ["weight", "bias"]
    rng = np.random.default_rng(1)
    x1, x2 = rng.standard_normal((2, 6, 3)), rng.standard_normal((2, 6, 4))
    ours_in = [ember.tensor(x1, requires_grad=True), ember.tensor(x2, requires_grad=True)]
    theirs_in = [torch.tensor(x1, requires_grad=True), torch.tensor(x2, requires_grad=True)]
    ours_out, theirs_out = ours(*ours_in), theirs(*theirs_in)
    check_same(ours_out, theirs_out, rtol=1e-10)
    (ours_out ** 2).sum().backward()
    (theirs_out ** 2).sum().backward()
    for a, b in zip(ours_in + [ours.weight, ours.bias], theirs_in + [theirs.weight, theirs.bias]):
        check_same(a.grad, b.grad, rtol=1e-10)
    w = ember.tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
    assert gradcheck(nn.functional.bilinear, (ours_in[0][0, :2], ours_in[1][0, :2], w))
    with pytest.raises(RuntimeError, match="input1 size does not match weight size"):
        ours(ember.ones(6, 2, dtype=ember.float64), ember.ones(6, 4, dtype=ember.float64))


def _run_hooks(lib, inputs_require_grad):
    """Linear with a pre-hook and a full hook (which doubles grad_input)."""
    lin = lib.nn.Linear(3, 2).double()
    with lib.no_grad():
        lin.weight.copy_(lib.tensor(np.arange(6.0).reshape(2, 3) / 10))
        lin.bias.zero_()
    seen = []

    def pre_hook(module, grad_output):
        seen.append(("pre", [g.tolist() for g in grad_output]))
        return (grad_output[0] * 3,)

    def full_hook(module, grad_input, grad_output):
        seen.append(("full", [None if g is None else g.tolist() for g in grad_input],
                     [g.tolist() for g in grad_output]))
        return None if grad_input[0] is None else (grad_input[0] * 2,)

    lin.register_full_backward_pre_hook(pre_hook)
    handle = lin.register_full_backward_hook(full_hook)
    x = lib.tensor(np.ones((1, 3)), requires_grad=inputs_require_grad)
    out = lin(x)
    (out * lib.tensor([[1.0, 2.0]], dtype=lib.float64)).sum().backward()
    handle.remove()
    seen_after_remove = len(seen)
    lin(x).sum().backward()
    return seen[:seen_after_remove], x.grad, lin.weight.grad, len(seen) - seen_after_remove


@pytest.mark.filterwarnings("ignore:Full backward hook is firing")
@pytest.mark.parametrize("inputs_require_grad", [True, False])
def test_full_backward_hooks_match_torch(inputs_require_grad):
    ours = _run_hooks(ember, inputs_require_grad)
    theirs = _run_hooks(torch, inputs_require_grad)
    assert ours[0] == theirs[0]
    if inputs_require_grad:
        check_same(ours[1], theirs[1])
    check_same(ours[2], theirs[2])
    assert ours[3] == theirs[3] == 1      # after remove, only the pre-hook runs


def test_full_backward_hook_without_input_grads_warns_like_torch():
    for lib in (ember, torch):
        lin = lib.nn.Linear(2, 1)
        lin.register_full_backward_hook(lambda module, grad_input, grad_output: None)
        with pytest.warns(UserWarning, match="Full backward hook is firing when gradients "
                                             "are computed with respect to module outputs"):
            lin(lib.ones(1, 2)).sum().backward()
