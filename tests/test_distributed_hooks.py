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
