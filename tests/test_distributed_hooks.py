"""The autograd hooks DistributedDataParallel stands on, in one process:
Tensor.register_post_accumulate_grad_hook and the engine's queue_callback."""
import numpy as np
import pytest

import ember
from ember.autograd import engine


def test_post_accumulate_grad_hook_sees_the_accumulated_grad():
    w = ember.ones(3, requires_grad=True)
    seen = []
    handle = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.tolist()))
    (w * 2).sum().backward()
    (w * 3).sum().backward()
    assert seen == [[2.0] * 3, [5.0] * 3]
    handle.remove()
    (w * 1).sum().backward()
    assert len(seen) == 2


def test_post_accumulate_grad_hook_torch_errors():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        ember.ones(2).register_post_accumulate_grad_hook(print)
    w = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="cannot be registered on non-leaf tensors"):
        (w * 2).register_post_accumulate_grad_hook(print)


def test_post_accumulate_grad_hook_not_run_by_autograd_grad():
    w = ember.ones(2, requires_grad=True)
    seen = []
    w.register_post_accumulate_grad_hook(seen.append)
    ember.autograd.grad((w * w).sum(), w)
    assert seen == []


def test_queue_callback_runs_after_every_gradient():
    a = ember.ones(2, requires_grad=True)
    b = ember.ones(2, requires_grad=True)
    events = []

    def hook(p):
        events.append("hook")
        if len(events) == 1:
            engine.queue_callback(lambda: events.append(
                ("callback", a.grad.tolist(), b.grad.tolist())))

    a.register_post_accumulate_grad_hook(hook)
    b.register_post_accumulate_grad_hook(hook)
    (a * 2 + b * 3).sum().backward()
    assert events == ["hook", "hook", ("callback", [2.0, 2.0], [3.0, 3.0])]


def test_queue_callback_outside_backward():
    with pytest.raises(RuntimeError, match="Final callbacks can only be installed during backward pass."):
        engine.queue_callback(print)


def test_a_failing_callback_leaves_the_engine_usable():
    w = ember.ones(2, requires_grad=True)

    def hook(p):
        engine.queue_callback(lambda: 1 / 0)

    handle = w.register_post_accumulate_grad_hook(hook)
    with pytest.raises(ZeroDivisionError):
        (w * 2).sum().backward()
    handle.remove()
    w.grad = None
    (w * 2).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0])
    assert engine._running_tasks == []


def _double_grad(p):
    p.grad.mul_(2)


def test_post_accumulate_grad_hook_writes_only_its_own_grad():
    # AddBackward hands one gradient to both leaves; the engine gives `a`
    # its own copy before a's hook writes to it (PyTorch 2.13: 8 and 4).
    a = ember.ones(3, requires_grad=True)
    b = ember.ones(3, requires_grad=True)
    a.register_post_accumulate_grad_hook(_double_grad)
    ((a + b) ** 2).sum().backward()
    assert a.grad.tolist() == [8.0] * 3
    assert b.grad.tolist() == [4.0] * 3
    # The caller's gradient, handed to a leaf root, is not written either.
    gradient = ember.ones(3)
    a.grad = None
    a.backward(gradient)
    assert a.grad.tolist() == [2.0] * 3 and gradient.tolist() == [1.0] * 3


class _Fresh(ember.autograd.Function):
    """Identity whose backward makes a new gradient, and notes its address."""
    made = []

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        fresh = grad * 3
        _Fresh.made.append(fresh.data_ptr())
        return fresh


def test_post_accumulate_grad_hook_gets_an_unshared_grad_without_a_copy():
    # A gradient nothing else holds is adopted as it is, hook or not
    # (DistributedDataParallel all-reduces such a .grad in place).
    w = ember.ones(4, requires_grad=True)
    seen = []
    w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.data_ptr()))
    _Fresh.made.clear()
    _Fresh.apply(w).sum().backward()
    assert seen == _Fresh.made and w.grad.data_ptr() == seen[0]
    assert w.grad.tolist() == [3.0] * 4


class _Twice(ember.autograd.Function):
    """(x, y) -> x + y whose backward hands one new gradient to both inputs,
    and notes its address."""
    made = []

    @staticmethod
    def forward(ctx, x, y):
        return x + y

    @staticmethod
    def backward(ctx, grad):
        fresh = grad * 1
        _Twice.made.append(fresh.data_ptr())
        return fresh, fresh


def test_a_gradient_two_leaves_adopt_is_copied_once():
    # PyTorch steals the gradient for one leaf and copies it for the other.
    a = ember.ones(3, requires_grad=True)
    b = ember.ones(3, requires_grad=True)
    _Twice.made.clear()
    _Twice.apply(a, b).sum().backward()
    addresses = [a.grad.data_ptr(), b.grad.data_ptr()]
    assert sorted(address == _Twice.made[0] for address in addresses) == [False, True]
    a.grad.mul_(2)
    assert (a.grad.tolist(), b.grad.tolist()) == ([2.0] * 3, [1.0] * 3)


def test_a_hook_keeps_the_grad_it_was_given():
    # What a post-accumulate-grad hook holds of .grad stays the .grad: a
    # write through it after backward (a deferred all-reduce, say) lands
    # in w.grad (PyTorch 2.13: 9).
    w = ember.full((3,), 3.0, requires_grad=True)
    kept = []
    w.register_post_accumulate_grad_hook(lambda p: kept.append(p.grad))
    (w ** 2 * 3).sum().backward()
    assert w.grad is kept[0]
    kept[0].mul_(0.5)
    assert w.grad.tolist() == [9.0] * 3


def test_create_graph_gives_each_leaf_a_grad_of_its_own():
    # With create_graph PyTorch copies every adopted gradient (recorded as
    # CopyBackwards), so no two leaves, nor the caller's gradient, share one.
    a = ember.ones(2, requires_grad=True)
    b = ember.ones(2, requires_grad=True)
    a.register_post_accumulate_grad_hook(_double_grad)
    ((a + b) ** 2).sum().backward(create_graph=True)
    assert (a.grad.tolist(), b.grad.tolist()) == ([8.0] * 2, [4.0] * 2)
    assert a.grad.stride() == (1,) and a.grad.data_ptr() != b.grad.data_ptr()
    (a + b).sum().backward()  # a's hook doubles again: (8 + 1) * 2
    assert (a.grad.tolist(), b.grad.tolist()) == ([18.0] * 2, [5.0] * 2)  # PyTorch's too
    gradient = ember.ones(2)
    w = ember.ones(2, requires_grad=True)
    w.backward(gradient, create_graph=True)
    assert w.grad is not gradient and w.grad.data_ptr() != gradient.data_ptr()
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    (x ** 3).sum().backward(create_graph=True)
    first = x.grad
    assert type(first.grad_fn).__name__ == "CopyBackwards" and first.tolist() == [3.0, 12.0]
    x.grad = None
    first.sum().backward()
    assert x.grad.tolist() == [6.0, 12.0]
