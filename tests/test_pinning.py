"""Pin frames (Note [Pinned arguments] in c/python/THP.h): an entry point owns
the tensors it was called with, sees them as they were when the call began,
and its list arguments cannot be cleared under it.

The generated suites (test_reentrancy.py, test_threads.py, test_api_fuzz.py)
sweep every entry point; these tests pin down the rule itself, each against
PyTorch's behaviour where it has one.
"""

import gc
import threading

import numpy as np
import pytest

import ember
from ember import _C


class SwapsOnIndex:
    """An int whose __index__ first rebinds `victim.data`."""

    def __init__(self, value, victim):
        self.value, self.victim = value, victim

    def __index__(self):
        self.victim.data = ember.zeros(1)
        return self.value


class ClearsOnIndex:
    """An int whose __index__ first empties `the_list`."""

    def __init__(self, value, the_list):
        self.value, self.the_list = value, the_list

    def __index__(self):
        self.the_list.clear()
        gc.collect()
        return self.value


def test_no_frame_is_left_open():
    x = ember.arange(6.).view(2, 3)
    assert _C._pin_depth() == 0
    x.sum(SwapsOnIndex(0, x))
    ember.arange(2.).split([1, 1])
    with pytest.raises(RuntimeError):
        ember.ones(2) + ember.ones(3)
    assert _C._pin_depth() == 0


def test_python_code_inside_an_operator_runs_inside_its_frame():
    depths = []

    class Records:
        def __index__(self):
            depths.append(_C._pin_depth())
            return 0

    ember.arange(6.).view(2, 3).sum(Records())
    assert depths == [1]


def test_the_call_sees_its_arguments_as_they_were_when_it_began():
    # PyTorch unpacks `self` before it parses `dim`, so the sum is over the
    # old tensor: 0 + 1 + ... + 11.
    x = ember.arange(12.).view(3, 4)
    result = x.sum([SwapsOnIndex(0, x), 1])
    assert result.item() == 66.0
    assert x.shape == (1,)  # the rebinding itself did happen


def test_an_in_place_write_goes_to_the_pinned_tensor_and_returns_self():
    x = ember.arange(4.)
    old = x.data  # shares x's memory
    result = x.add_(ember.ones(4), alpha=SwapsOnIndex(2, x))
    assert result is x
    np.testing.assert_array_equal(old.numpy(), [2., 3., 4., 5.])
    np.testing.assert_array_equal(x.numpy(), [0.])


def test_a_list_argument_cleared_by_an_item_is_a_private_copy():
    pieces = [ember.ones(2), ember.zeros(2)]
    sizes = [ClearsOnIndex(1, pieces), 1]
    pieces.append(ember.full((2,), 3.0))
    # split_with_sizes reads `sizes` while `pieces` is cleared under it.
    out = ember.arange(2.).split(sizes)
    assert [p.tolist() for p in out] == [[0.0], [1.0]]
    tensors = [ember.ones(2), ember.zeros(2)]
    joined = ember.cat(tensors, dim=ClearsOnIndex(0, tensors))
    assert joined.tolist() == [1.0, 1.0, 0.0, 0.0]
    assert tensors == []


def test_the_slot_reads_its_left_operand_before_the_right_one_runs_python():
    class NumpyIntThatSwaps(np.int64):
        victim = None

        def __index__(self):
            type(self).victim.data = ember.zeros(1, dtype=ember.int64)
            return int(self)

    a = ember.arange(4)
    NumpyIntThatSwaps.victim = a
    result = a + NumpyIntThatSwaps(10)
    assert result.tolist() == [10, 11, 12, 13]


def test_iadd_of_an_unknown_object_is_a_type_error():
    class OnlyFloat:
        def __float__(self):
            return 2.5

    t = ember.ones(2)
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError) as theirs:
        u = torch.ones(2)
        u += OnlyFloat()
    with pytest.raises(TypeError) as ours:
        t += OnlyFloat()
    assert str(ours.value) == str(theirs.value)
    assert isinstance(t, ember.Tensor) and t.tolist() == [1.0, 1.0]


def test_a_kernel_without_the_gil_owns_its_operands():
    # Another thread rebinds the operands while large kernels run.
    n = 1 << 20
    a, b, out = ember.ones(n), ember.ones(n), ember.empty(n)
    stop = threading.Event()

    def rebinds():
        while not stop.is_set():
            a.data = ember.ones(n)
            out.data = ember.empty(n)

    worker = threading.Thread(target=rebinds)
    worker.start()
    try:
        for _ in range(20):
            assert (a + b).sum().item() == 2 * n
            ember.add(a, b, out=out)
    finally:
        stop.set()
        worker.join()


def test_a_tracer_hook_that_sets_the_tracer_keeps_that_choice():
    # Note [The tracer hook]: the hook is off while it runs; a _set_tracer
    # made inside it must stand (it used to be overwritten, and the new
    # hook's reference leaked).
    import sys
    seen = []

    def second(what, args, kwnames):
        seen.append("second")
        return None

    def first(what, args, kwnames):
        seen.append("first")
        _C._set_tracer(second)
        return None

    _C._set_tracer(first)
    try:
        ember.ones(2).exp()
        ember.ones(2).exp()
    finally:
        _C._set_tracer(None)
    assert seen == ["first", "second"]
    before = sys.getrefcount(second)
    _C._set_tracer(first)
    try:
        ember.ones(2).exp()
    finally:
        _C._set_tracer(None)
    assert sys.getrefcount(second) == before


# ---- Note [Plain indexes need no pin frame], Note [Factories with nothing to pin]


def test_a_slice_bound_that_runs_python_still_gets_a_frame():
    # t[a:b] with plain ints skips the frame; a bound with __index__ must
    # not: it rebinds x.data, and the slice is of the tensor x held when
    # the call began (PyTorch: unpacked before the bounds are read).
    x = ember.arange(6.)
    depths = []

    class RecordsAndSwaps(SwapsOnIndex):
        def __index__(self):
            depths.append(_C._pin_depth())
            return super().__index__()

    view = x[RecordsAndSwaps(1, x):3]
    assert depths == [1]
    np.testing.assert_array_equal(view.numpy(), [1., 2.])
    assert x.shape == (1,)


def test_plain_int_indexing_still_sees_autograd_and_devices():
    x = ember.arange(6., requires_grad=True)
    y = x[1:4:2]
    assert y.grad_fn is not None
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0, 1, 0, 1, 0, 0])
    with ember.no_grad():
        assert x[2].grad_fn is None and x[2].item() == 2.0
    with pytest.raises(IndexError, match="out of bounds"):
        x[6]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
    assert _C._pin_depth() == 0


def test_a_factory_with_only_numbers_runs_without_a_frame():
    depths = []

    class Records:
        def __index__(self):
            depths.append(_C._pin_depth())
            return 2

    # an object that is not a plain number takes the pinned path ...
    assert ember.empty(Records(), 3).shape == (2, 3)
    assert depths == [1]
    # ... plain numbers and keywords give the same results either way
    assert ember.zeros(2, 3).sum().item() == 0.0
    assert ember.full((2,), 7.0).tolist() == [7.0, 7.0]
    assert ember.ones(2, dtype=ember.int64).dtype == ember.int64
    assert _C._pin_depth() == 0
