"""ember.amp.autocast and the C boundary's autocast hook (Note [The autocast
hook] in c/python/Autograd.c).  The hook tests drive the C slot directly;
the autocast tests compare with PyTorch's CPU autocast where installed."""

import sys

import numpy as np
import pytest

import ember
from ember import _C

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs PyTorch")
needs_bfloat16 = pytest.mark.skipif(not hasattr(ember, "bfloat16"),
                                    reason="needs ember.bfloat16")


@pytest.fixture
def hook_slot():
    """Clears this thread's autocast hook after the test, whatever happens."""
    yield
    _C._set_autocast_hook(None)


class Recorder:
    """A hook that records its calls and runs the op unchanged."""

    def __init__(self):
        self.calls = []

    def __call__(self, what, policy, args, kwnames):
        name = what if isinstance(what, str) else what.__name__
        self.calls.append((name, policy, len(args), kwnames))
        n_kw = 0 if kwnames is None else len(kwnames)
        positional, keywords = args[:len(args) - n_kw], dict(zip(kwnames or (), args[len(args) - n_kw:]))
        if isinstance(what, str):
            return getattr(type(positional[0]), what)(*positional, **keywords)
        return what(*positional, **keywords)


def test_hook_sees_ops_with_a_policy_and_only_those(hook_slot):
    recorder = Recorder()
    a, b = ember.ones(2, 2), ember.ones(2, 2)
    _C._set_autocast_hook(recorder)
    product = ember.matmul(a, b)
    slot_product = a @ b
    total = a + b                     # no policy: one dict lookup, no call
    joined = ember.cat([a, b], dim=0)
    _C._set_autocast_hook(None)
    assert recorder.calls == [("matmul", "lower", 2, None),
                              ("__matmul__", "lower", 2, None),
                              ("cat", "promote", 2, ("dim",))]
    assert product.tolist() == slot_product.tolist() == [[2.0, 2.0], [2.0, 2.0]]
    assert total.tolist() == [[2.0, 2.0], [2.0, 2.0]] and joined.shape == (4, 2)


def test_hook_is_off_while_it_runs_and_back_after(hook_slot):
    depth = []

    def hook(what, policy, args, kwnames):
        depth.append(len(depth))
        return what(*args)            # the inner call takes the ordinary path

    _C._set_autocast_hook(hook)
    ember.mm(ember.ones(1, 1), ember.ones(1, 1))
    ember.mm(ember.ones(1, 1), ember.ones(1, 1))
    assert depth == [0, 1]


def test_hook_replaced_from_inside_stands_and_references_balance(hook_slot):
    class Replacer:
        def __call__(self, what, policy, args, kwnames):
            result = what(*args)
            _C._set_autocast_hook(second)   # takes effect at once, and stands
            return result

    first, second = Replacer(), Recorder()
    first_refs, second_refs = sys.getrefcount(first), sys.getrefcount(second)
    _C._set_autocast_hook(first)
    ember.mm(ember.ones(1, 1), ember.ones(1, 1))     # first runs, installs second
    ember.mm(ember.ones(1, 1), ember.ones(1, 1))     # second runs
    assert [call[0] for call in second.calls] == ["mm"]
    _C._set_autocast_hook(None)
    assert sys.getrefcount(first) == first_refs
    assert sys.getrefcount(second) == second_refs


def test_hook_errors_propagate_and_bad_hooks_are_refused(hook_slot):
    def failing(what, policy, args, kwnames):
        raise ValueError("from the hook")

    _C._set_autocast_hook(failing)
    with pytest.raises(ValueError, match="from the hook"):
        ember.bmm(ember.ones(1, 1, 1), ember.ones(1, 1, 1))
    with pytest.raises(ValueError, match="from the hook"):
        ember.ones(1, 1) @ ember.ones(1, 1)
    _C._set_autocast_hook(None)
    with pytest.raises(TypeError, match="_set_autocast_hook: expected a callable or None"):
        _C._set_autocast_hook(3)
    with pytest.raises(TypeError, match="_set_autocast_policies: expected a dict"):
        _C._set_autocast_policies([])


def test_tracer_comes_before_autocast(hook_slot):
    seen = []

    def tracer(what, args, kwnames):
        seen.append("tracer")
        return what(*args)

    def autocaster(what, policy, args, kwnames):
        seen.append("autocast")
        return what(*args)

    _C._set_autocast_hook(autocaster)
    _C._set_tracer(tracer)
    try:
        ember.mm(ember.ones(1, 1), ember.ones(1, 1))
    finally:
        _C._set_tracer(None)
    assert seen == ["tracer", "autocast"]


# ------------------------------------------------------------ autocast

@needs_bfloat16
def test_autocast_arguments_and_state():
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'tpu'"):
        ember.autocast("tpu")
    with pytest.raises(ValueError, match="Expected `device_type` of type `str`"):
        ember.autocast(ember.device("cpu"))
    with pytest.warns(UserWarning, match="CUDA is not available"):
        with ember.autocast("cuda"):
            assert not ember.is_autocast_enabled("cuda")
    with pytest.warns(UserWarning, match="target dtype is not supported"):
        with ember.autocast("cpu", dtype=ember.float64):
            assert not ember.is_autocast_enabled("cpu")
    assert not ember.is_autocast_enabled("cpu")


@needs_bfloat16
@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
def test_autocast_runs_products_low_and_losses_in_float32(dtype_name):
    low = getattr(ember, dtype_name)
    ember.manual_seed(0)
    model = ember.nn.Linear(8, 4)
    x, target = ember.randn(16, 8), ember.randn(16, 4)
    with ember.autocast("cpu", dtype=low):
        assert ember.is_autocast_enabled("cpu") and ember.get_autocast_dtype("cpu") == low
        out = model(x)
        product = x @ model.weight.t()
        wide = ember.randn(2, 2, dtype=ember.float64) @ ember.randn(2, 2, dtype=ember.float64)
        loss = ember.nn.functional.mse_loss(out, target)
        with ember.autocast("cpu", enabled=False):
            plain = x @ model.weight.t()
    assert out.dtype == low and product.dtype == low
    assert wide.dtype == ember.float64          # float64 is never cast
    assert loss.dtype == ember.float32 and plain.dtype == ember.float32
    loss.backward()
    assert model.weight.grad.dtype == ember.float32


@needs_bfloat16
@needs_torch
@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
def test_autocast_matches_torch(dtype_name):
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((4, 8), np.float32), rng.standard_normal(4, np.float32)
    x, target = rng.standard_normal((16, 8), np.float32), rng.standard_normal((16, 4), np.float32)
    ours, theirs = {}, {}
    for lib, result in ((ember, ours), (torch, theirs)):
        weight = lib.tensor(w, requires_grad=True)
        bias = lib.tensor(b, requires_grad=True)
        with lib.autocast("cpu", dtype=getattr(lib, dtype_name)):
            out = lib.nn.functional.linear(lib.tensor(x), weight, bias)
            loss = lib.nn.functional.mse_loss(out, lib.tensor(target))
            joined = lib.cat([out, lib.tensor(target)])
        loss.backward()
        result.update(out=out, loss=loss, joined=joined, grad=weight.grad)
    for key in ours:
        assert str(ours[key].dtype).split(".")[-1] == str(theirs[key].dtype).split(".")[-1], key
        np.testing.assert_allclose(ours[key].float().detach().numpy(),
                                   theirs[key].float().detach().numpy(),
                                   rtol=2e-2, atol=2e-2, err_msg=key)


@needs_bfloat16
def test_autocast_runs_convolutions_in_bfloat16():
    ember.manual_seed(2)
    conv = ember.nn.Conv2d(2, 3, 3, padding=1)
    x = ember.randn(1, 2, 5, 5)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        out = conv(x)
    assert out.dtype == ember.bfloat16
    reference = conv(x)
    assert float((out.float() - reference).abs().max()) < 0.1
    out.float().sum().backward()
    assert conv.weight.grad.dtype == ember.float32
