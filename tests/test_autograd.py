"""The autograd core: engine, grad modes, custom Function, hooks, saved
tensors, errors, and memory (graph freed after backward, no leaks).

Formulas of individual operators are tested in test_autograd_pointwise.py,
test_autograd_reduce_linalg.py and test_autograd_shape.py.
"""

import gc
import sys
import threading
import weakref

import numpy as np
import pytest

import ember
from ember.autograd import Function, gradcheck, gradgradcheck


def leaf(values, dtype=ember.float64):
    return ember.tensor(values, dtype=dtype, requires_grad=True)


def ones_like(t):
    return ember.ones(*t.shape, dtype=t.dtype)


# ---- leaves, grad_fn, flags ------------------------------------------------------

def test_recorded_result_has_grad_fn_and_next_functions():
    x = leaf([1.0, 2.0])
    y = x * 3 + x
    assert y.requires_grad and not y.is_leaf and x.is_leaf
    assert type(y.grad_fn).__name__ == "AddBackward0"
    assert y.grad_fn.name() == "AddBackward0"
    (mul_fn, nr0), (acc, nr1) = y.grad_fn.next_functions
    assert type(mul_fn).__name__ == "MulBackward0" and nr0 == 0
    assert type(acc).__name__ == "AccumulateGrad" and acc.variable is x
    assert mul_fn.next_functions[1] == (None, 0)  # the number 3
    assert "grad_fn=<AddBackward0>" in repr(y)


def test_no_input_requiring_grad_records_nothing():
    x = ember.tensor([1.0, 2.0])
    y = x * 3 + x
    assert y.grad_fn is None and not y.requires_grad


def test_requires_grad_rules_match_torch():
    x = ember.tensor([1, 2])
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        x.requires_grad_()
    y = leaf([1.0]) * 2
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf"):
        y.requires_grad = False
    assert y.requires_grad_() is y


def test_detach_shares_memory_and_cuts_history():
    x = leaf([1.0, 2.0])
    y = x * 2
    d = y.detach()
    assert d.grad_fn is None and not d.requires_grad
    d.add_(1)  # the same memory and version counter
    assert y.tolist() == [3.0, 5.0] and y._version == d._version == 1
    y.detach_()
    assert y.grad_fn is None and y.is_leaf and not y.requires_grad


# ---- backward and grad -------------------------------------------------------------

def test_backward_accumulates_into_leaves():
    x = leaf([1.0, 2.0, 3.0])
    w = leaf([0.5, -1.0, 2.0])
    y = x * w + x
    y.backward(ones_like(y))
    assert x.grad.tolist() == [1.5, 0.0, 3.0]
    assert w.grad.tolist() == [1.0, 2.0, 3.0]
    (x * w).backward(ones_like(y))  # accumulates
    assert x.grad.tolist() == [2.0, -1.0, 5.0]


def test_gradient_of_a_reused_value_sums_every_path():
    x = leaf([2.0])
    y = x * x * x  # d/dx = 3 x^2
    y.backward(ones_like(y))
    assert x.grad.tolist() == [12.0]


def test_non_scalar_backward_needs_a_gradient():
    y = leaf([1.0, 2.0]) * 2
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        y.backward()


def test_gradient_of_the_wrong_shape():
    y = leaf([1.0, 2.0, 3.0]) * 2
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\] has a shape of "
                                           r"ember.Size\(\[2\]\) and output\[0\] has a shape of "
                                           r"ember.Size\(\[3\]\)"):
        y.backward(ember.ones(2, dtype=ember.float64))


def test_backward_on_a_tensor_without_grad():
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad"):
        ember.ones(1).backward()


def test_second_backward_through_freed_graph_raises():
    x = leaf([1.0, 2.0])
    y = x * x
    y.backward(ones_like(y))
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward(ones_like(y))


def test_retain_graph_allows_a_second_backward():
    x = leaf([1.0, 2.0])
    y = x * x
    y.backward(ones_like(y), retain_graph=True)
    y.backward(ones_like(y))
    assert x.grad.tolist() == [4.0, 8.0]


def test_autograd_grad_returns_without_touching_grad():
    x, w = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    y = x * w
    gx, gw = ember.autograd.grad(y, (x, w), ones_like(y))
    assert gx.tolist() == [3.0, 4.0] and gw.tolist() == [1.0, 2.0]
    assert x.grad is None and w.grad is None


def test_autograd_grad_unused_input():
    x, unused = leaf([1.0]), leaf([1.0])
    y = x * 2
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        ember.autograd.grad(y, (x, unused), ones_like(y), retain_graph=True)
    gx, gu = ember.autograd.grad(y, (x, unused), ones_like(y), allow_unused=True)
    assert gx.tolist() == [2.0] and gu is None


def test_autograd_grad_of_an_intermediate():
    x = leaf([1.0, 2.0])
    h = x * 3
    y = h * h
    (gh,) = ember.autograd.grad(y, h, ones_like(y))
    assert gh.tolist() == [6.0, 12.0]


def test_backward_inputs_limits_accumulation():
    x, w = leaf([1.0]), leaf([2.0])
    y = x * w
    y.backward(ones_like(y), inputs=[w])
    assert x.grad is None and w.grad.tolist() == [1.0]


def test_long_chain_does_not_recurse():
    x = leaf([1.0])
    y = x
    for _ in range(100_000):
        y = y + 0.0
    y.backward(ones_like(y))
    assert x.grad.tolist() == [1.0]


def test_diamond_and_multiple_roots():
    x = leaf([1.0, 2.0])
    a = x * 2
    b = x * 3
    ember.autograd.backward([a, b], [ones_like(a), ones_like(b)])
    assert x.grad.tolist() == [5.0, 5.0]


# ---- higher order ----------------------------------------------------------------------

def test_create_graph_second_derivative_is_analytic():
    x = leaf([0.5, 2.0, -1.5])
    y = x * x * x  # y' = 3x^2, y'' = 6x
    (g,) = ember.autograd.grad(y, x, ones_like(y), create_graph=True)
    assert g.requires_grad
    np.testing.assert_allclose(np.asarray(g.detach()), 3 * np.array([0.5, 2.0, -1.5]) ** 2)
    (gg,) = ember.autograd.grad(g, x, ones_like(g))
    np.testing.assert_allclose(np.asarray(gg), 6 * np.array([0.5, 2.0, -1.5]))


def test_gradcheck_and_gradgradcheck_on_a_composite():
    rng = np.random.default_rng(0)
    a = ember.from_numpy(rng.uniform(0.5, 1.5, (3, 2))).requires_grad_()
    b = ember.from_numpy(rng.uniform(0.5, 1.5, (1, 2))).requires_grad_()

    def f(a, b):
        return a * b / (a + b) - 2 / b

    assert gradcheck(f, (a, b))
    assert gradgradcheck(f, (a, b))


def test_gradcheck_catches_a_wrong_formula():
    class WrongSquare(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * x  # should be 2 * x

    x = leaf([1.0, 2.0])
    assert not gradcheck(WrongSquare.apply, (x,), raise_exception=False)
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        gradcheck(WrongSquare.apply, (x,))


# ---- grad modes ------------------------------------------------------------------------

def test_no_grad_and_enable_grad_nest():
    x = leaf([1.0])
    assert ember.is_grad_enabled()
    with ember.no_grad():
        assert not ember.is_grad_enabled()
        assert (x * 2).grad_fn is None
        with ember.enable_grad():
            assert (x * 2).grad_fn is not None
        assert not ember.is_grad_enabled()
    assert ember.is_grad_enabled()


def test_grad_modes_as_decorators():
    x = leaf([1.0])

    @ember.no_grad()
    def f():
        return x * 2

    @ember.inference_mode()
    def g():
        return x * 2

    assert f().grad_fn is None and g().grad_fn is None
    assert ember.is_grad_enabled()


def test_set_grad_enabled_as_call_and_context():
    ember.set_grad_enabled(False)
    try:
        assert not ember.is_grad_enabled()
    finally:
        ember.set_grad_enabled(True)
    with ember.set_grad_enabled(False):
        assert not ember.is_grad_enabled()
    assert ember.is_grad_enabled()


def test_no_grad_restores_after_an_exception():
    with pytest.raises(ValueError):
        with ember.no_grad():
            raise ValueError
    assert ember.is_grad_enabled()


def test_grad_mode_is_thread_local():
    seen = []
    with ember.no_grad():
        thread = threading.Thread(target=lambda: seen.append(ember.is_grad_enabled()))
        thread.start()
        thread.join()
    assert seen == [True]


# ---- saved tensors and in-place ---------------------------------------------------------

def test_modified_saved_tensor_raises_torch_message():
    x = leaf([1.0, 2.0])
    h = x * 1
    y = h * h
    h.add_(1)
    with pytest.raises(RuntimeError) as info:
        y.backward(ones_like(y))
    assert str(info.value).startswith(
        "one of the variables needed for gradient computation has been modified by an "
        "inplace operation: [ember.DoubleTensor [2]], which is output 0 of Add, "
        "is at version 1; expected version 0 instead.")


def test_inplace_on_a_leaf_requiring_grad_is_refused():
    x = leaf([1.0])
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an "
                                           "in-place operation."):
        x.mul_(2)
    assert x.tolist() == [1.0] and x._version == 0
    with ember.no_grad():
        x.mul_(2)  # allowed without recording
    assert x.tolist() == [2.0]


def test_inplace_on_a_non_leaf_rebases_history():
    x = leaf([1.0, 2.0])
    y = x * 3
    y.mul_(x)      # y = 3x^2, dy/dx = 6x
    y.add_(x)      # + x
    assert type(y.grad_fn).__name__ == "AddBackward0"
    y.backward(ones_like(y))
    assert x.grad.tolist() == [7.0, 13.0]


def test_inplace_reading_itself_refuses_backward_like_torch():
    x = leaf([1.0, 2.0])
    y = x * 3
    y.mul_(y)  # saves y, then overwrites it: torch refuses backward too
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0"):
        y.backward(ones_like(y))


def test_inplace_with_a_grad_requiring_argument_on_a_plain_tensor():
    w = leaf([2.0])
    buffer = ember.ones(1, dtype=ember.float64)
    buffer.mul_(w)
    assert buffer.requires_grad
    buffer.backward(ones_like(buffer))
    assert w.grad.tolist() == [1.0]


# ---- custom Function ---------------------------------------------------------------------

class Cube(Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        ctx.save_for_backward(x)
        return x * x * x * scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x * x * ctx.scale, None


def test_custom_function_forward_backward_and_name():
    x = leaf([1.0, 2.0])
    y = Cube.apply(x, 2.0)
    assert type(y.grad_fn).__name__ == "CubeBackward"
    assert y.grad_fn.needs_input_grad == (True, False)
    y.backward(ones_like(y))
    assert x.grad.tolist() == [6.0, 24.0]
    assert gradcheck(lambda t: Cube.apply(t, 0.5), (leaf([0.3, -0.7]),))
    assert gradgradcheck(lambda t: Cube.apply(t, 0.5), (leaf([0.3, -0.7]),))


def test_custom_function_without_grad_inputs_records_nothing():
    y = Cube.apply(ember.ones(2, dtype=ember.float64), 1.0)
    assert y.grad_fn is None and not y.requires_grad


def test_custom_function_mark_non_differentiable_and_multiple_outputs():
    class SplitSign(Function):
        @staticmethod
        def forward(ctx, x):
            positive = x > 0
            ctx.mark_non_differentiable(positive)
            return x * 2, positive

        @staticmethod
        def backward(ctx, grad, grad_positive):
            assert grad_positive is not None  # materialized zeros
            return grad * 2

    x = leaf([-1.0, 1.0])
    doubled, positive = SplitSign.apply(x)
    assert doubled.requires_grad and not positive.requires_grad
    doubled.backward(ones_like(doubled))
    assert x.grad.tolist() == [2.0, 2.0]


def test_custom_function_mark_dirty():
    class AddOneInPlace(Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad

    x = leaf([1.0])
    h = x * 1
    out = AddOneInPlace.apply(h)
    assert out is h and h.tolist() == [2.0]
    assert type(h.grad_fn).__name__ == "AddOneInPlaceBackward"
    h.backward(ones_like(h))
    assert x.grad.tolist() == [1.0]
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad has been used in an "
                                           "in-place operation"):
        AddOneInPlace.apply(x)


def test_custom_function_wrong_number_of_gradients():
    class Bad(Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, grad):
            return grad

    z = Bad.apply(leaf([1.0]), leaf([2.0]))
    with pytest.raises(RuntimeError, match=r"returned an incorrect number of gradients \(expected 2, "
                                           r"got 1\)"):
        z.backward(ones_like(z))


def test_custom_function_saved_output_has_no_cycle():
    class Exp(Function):
        @staticmethod
        def forward(ctx, x):
            result = ember.exp(x)
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad):
            (result,) = ctx.saved_tensors
            return grad * result

    x = leaf([0.0, 1.0])
    y = Exp.apply(x)
    node = weakref.ref(y.grad_fn)
    y.backward(ones_like(y))
    np.testing.assert_allclose(np.asarray(x.grad), np.exp([0.0, 1.0]))
    del y
    assert node() is None  # freed by refcounting alone, no cycle


# ---- hooks --------------------------------------------------------------------------------

def test_tensor_hooks_on_leaf_and_intermediate():
    x = leaf([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(("x", g.tolist())))
    h = x * 2
    handle = h.register_hook(lambda g: g * 10)  # replaces the gradient
    y = h * 1
    y.backward(ones_like(y))
    assert x.grad.tolist() == [20.0, 20.0]
    assert seen == [("x", [20.0, 20.0])]
    handle.remove()
    x.grad = None
    y = x * 2 * 1
    y.backward(ones_like(y))
    assert x.grad.tolist() == [2.0, 2.0]


def test_hook_on_tensor_not_requiring_grad():
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require"):
        ember.ones(1).register_hook(lambda g: g)


def test_retain_grad():
    x = leaf([1.0, 2.0])
    h = x * 3
    h.retain_grad()
    assert h.retains_grad
    y = h * h
    y.backward(ones_like(y))
    assert h.grad.tolist() == [6.0, 12.0]
    assert x.grad.tolist() == [18.0, 36.0]


def test_node_pre_and_post_hooks():
    x = leaf([1.0])
    y = x * 2
    calls = []
    y.grad_fn.register_prehook(lambda grads: calls.append("pre"))
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: calls.append("post"))
    y.backward(ones_like(y))
    assert calls == ["pre", "post"]


# ---- memory --------------------------------------------------------------------------------

def test_graph_and_saved_tensors_freed_after_backward():
    x = leaf([1.0, 2.0])
    h = x * 3
    y = h * h
    node = weakref.ref(y.grad_fn)
    saved = weakref.ref(h)
    del h
    assert saved() is not None  # kept by the node for backward
    y.backward(ones_like(y))
    assert saved() is None      # released by backward
    del y
    assert node() is None


def test_grads_are_never_aliased_between_leaves():
    a, b = leaf([1.0]), leaf([1.0])
    y = a + b  # AddBackward0 hands the same gradient to both
    y.backward(ones_like(y))
    a.grad.add_(5)
    assert b.grad.tolist() == [1.0]


def test_user_gradient_is_not_adopted_as_grad():
    x = leaf([1.0, 2.0])
    g = ember.ones(2, dtype=ember.float64)
    (x * 1).backward(g)
    x.grad.add_(1)
    assert g.tolist() == [1.0, 1.0]


def _train_steps(steps):
    w = leaf([0.5, -0.5])
    x = ember.tensor([1.0, 2.0], dtype=ember.float64)
    for _ in range(steps):
        loss = (w * x - 1) * (w * x - 1)
        loss.backward(ones_like(loss))
        with ember.no_grad():
            w.sub_(w.grad * 0.01)
        w.grad = None
    return w


def test_training_steps_leave_refcounts_and_memory_flat():
    _train_steps(20)
    gc.collect()
    live_before = ember.memory.stats()["live_blocks"]
    total_before = getattr(sys, "gettotalrefcount", lambda: 0)()
    _train_steps(1000)
    gc.collect()
    assert ember.memory.stats()["live_blocks"] == live_before
    if hasattr(sys, "gettotalrefcount"):
        assert sys.gettotalrefcount() - total_before < 50


def test_unused_graph_is_freed_without_gc():
    gc.disable()
    try:
        x = leaf([1.0])
        y = (x * 2) * (x * 3)
        node = weakref.ref(y.grad_fn)
        del y
        assert node() is None
    finally:
        gc.enable()


# ---- the boundary ---------------------------------------------------------------------------

def test_every_operator_has_an_autograd_entry():
    handlers = ember._C._autograd_handlers
    public = {n for n in ember._C._op_names() if not n.startswith("_") or n.startswith("__")}
    slots = {"__add__", "__iadd__", "__sub__", "__isub__", "__mul__", "__imul__",
             "__truediv__", "__itruediv__", "__floordiv__", "__ifloordiv__", "__mod__",
             "__imod__", "__pow__", "__ipow__", "__matmul__", "__neg__", "__abs__",
             "__getitem__", "__setitem__", "__iter__", "T"}
    missing = sorted((public | slots) - set(handlers))
    assert missing == []


def test_out_argument_is_refused_under_autograd():
    x = leaf([1.0])
    out = ember.empty(1, dtype=ember.float64)
    with pytest.raises(RuntimeError, match=r"mul\(\): functions with out=\.\.\. arguments don't "
                                           r"support automatic differentiation"):
        ember.mul(x, 2, out=out)
