"""index_copy(_) and put(_): the C kernels of c/th/THIndex.c
(THTensor_indexCopy, THTensor_put) through their bindings in
c/python/IndexOps.c, and their derivatives (autograd/formulas/indexing.py).

NumPy is the value oracle over random shapes, dims, dtypes and layouts
(transposed, stepped, offset); PyTorch, where installed, the oracle for
error types and messages, values and gradients.  With repeated positions
index_copy_ and put_ (without accumulate) keep one of the values, which
one being open in PyTorch too, so those tests draw distinct positions.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from autograd_utils import check_against_torch, check_gradcheck, leaf, noncontiguous
from test_index_ops import DTYPES, assert_same, inputs, raised, values_of

HYP = settings(max_examples=min(60, settings.default.max_examples), deadline=None)


def _source(shape, dtype, layout, seed):
    """(NumPy array, ember tensor) of `shape`: contiguous or transposed."""
    s = values_of(shape, dtype, seed=seed)
    if layout == "transposed" and s.ndim >= 2:
        return s, ember.tensor(np.ascontiguousarray(s.T)).t() if s.ndim == 2 else \
            ember.tensor(np.ascontiguousarray(s.transpose(2, 1, 0))).permute(2, 1, 0)
    return s, ember.tensor(s)


# ---- index_copy -------------------------------------------------------------------------


@HYP
@given(inputs(min_ndim=0, writable=True), st.data())
def test_index_copy_matches_numpy(ae, data):
    a, e = ae
    ndim = max(a.ndim, 1)
    dim = data.draw(st.integers(-ndim, ndim - 1))
    size = a.shape[dim] if a.ndim else 1
    count = data.draw(st.integers(0, size))
    positions = data.draw(st.permutations(range(size)))[:count]  # distinct
    as_0d = count == 1 and data.draw(st.booleans())
    index = ember.tensor(positions[0] if as_0d else np.array(positions, dtype=np.int64))
    sshape = list(a.shape)
    if a.ndim:
        sshape[dim] = count
    else:  # a 0-d source stands for one slice
        sshape = [0] if count == 0 else data.draw(st.sampled_from([[], [1]]))
    s, source = _source(tuple(sshape), a.dtype, data.draw(st.sampled_from(["contiguous",
                                                                          "transposed"])),
                        data.draw(st.integers(0, 100)))
    expected = a.copy()
    if a.ndim:
        expected[(slice(None),) * (dim % a.ndim) + (np.array(positions, dtype=np.int64),)] = s
    elif count:
        expected[()] = s.reshape(())
    before = e._version
    result = ember.index_copy(e, dim, index, source)
    assert_same(result, expected)
    assert result._version == 0 and e._version == before
    assert_same(e.index_copy(dim, index, source), expected)
    assert e.index_copy_(dim, index, source) is e
    assert_same(e, expected)
    assert e._version == before + 1


def test_index_copy_of_0_d_tensors_and_empty_slices():
    scalar = ember.tensor(1.0)
    assert scalar.index_copy(0, ember.tensor([0]), ember.tensor([3.0])).item() == 3.0
    assert scalar.index_copy(-1, ember.tensor(0), ember.tensor(4.0)).item() == 4.0
    row = ember.zeros(3)
    assert row.index_copy(0, ember.tensor(1), ember.tensor(5.0)).tolist() == [0, 5, 0]
    assert row.index_copy(0, ember.tensor([], dtype=ember.int64), ember.zeros(0)).tolist() \
        == [0, 0, 0]
    # no slice element to copy, so no position is read (as in PyTorch)
    assert ember.zeros(4, 0).index_copy(0, ember.tensor([7]), ember.zeros(1, 0)).shape == (4, 0)
    version = row._version
    row.index_copy_(0, ember.tensor([], dtype=ember.int64), ember.zeros(0))
    assert row._version == version + 1


# ---- put --------------------------------------------------------------------------------


@HYP
@given(inputs(min_ndim=0, writable=True, min_size=1, dtypes=DTYPES + [np.float16]),
       st.booleans(), st.data())
def test_put_matches_numpy(ae, accumulate, data):
    a, e = ae
    n = a.size
    count = data.draw(st.integers(0, 6 if accumulate else n))
    if accumulate:  # repeated positions add up
        flat_positions = data.draw(st.lists(st.integers(-n, n - 1), min_size=count,
                                            max_size=count))
    else:
        flat_positions = [p - n * data.draw(st.booleans())  # some counted from the end
                          for p in data.draw(st.permutations(range(n)))[:count]]
    positions = np.array(flat_positions, dtype=np.int64)
    index_shape = data.draw(st.sampled_from([(count,), (1, count)] + ([(2, count // 2)]
                                                                    if count % 2 == 0 else [])))
    index = ember.tensor(positions.reshape(index_shape))
    if data.draw(st.booleans()) and len(index_shape) == 2:
        index = ember.tensor(np.ascontiguousarray(positions.reshape(index_shape).T)).t()
    # source: as many elements as index, in a shape of its own
    s, source = _source((count,) if data.draw(st.booleans()) else (1, count), a.dtype,
                        "contiguous", data.draw(st.integers(0, 100)))
    flat = a.ravel().copy()
    if accumulate:
        with np.errstate(over="ignore"):
            np.add.at(flat, positions, s.ravel())
    else:
        flat[positions] = s.ravel()
    expected = flat.reshape(a.shape)
    before = e._version
    assert_same(ember.put(e, index, source, accumulate), expected)
    assert_same(e.put(index, source, accumulate=accumulate), expected)
    assert e._version == before
    assert e.put_(index, source, accumulate=accumulate) is e
    assert_same(e, expected)
    assert e._version == before + 1


def test_put_into_strided_and_0_d_tensors():
    t = ember.zeros(3, 4).t()  # (4, 3), strides (1, 4)
    t.put_(ember.tensor([0, 1, 2, 5, -1]), ember.tensor([1.0, 2, 3, 4, 5]))
    assert t.tolist() == [[1, 2, 3], [0, 0, 4], [0, 0, 0], [0, 0, 5]]
    scalar = ember.tensor(2.0)
    assert scalar.put(ember.tensor([0, -1]), ember.tensor([1.0, 3.0]), True).item() == 6.0
    assert scalar.put(ember.tensor(0), ember.tensor(7.0)).item() == 7.0
    b = ember.zeros(4, dtype=ember.bool)
    assert b.put_(ember.tensor([1, 1]), ember.tensor([True, True]), True).tolist() == \
        [False, True, False, False]
    assert ember.zeros(0).put(ember.tensor([], dtype=ember.int64), ember.zeros(0)).shape == (0,)


# ---- errors: PyTorch's types and messages; a failed call changes nothing -----------------


def error_cases(lib):
    x = lib.zeros(5, 3)
    s = lib.ones(2, 3)
    a = lib.zeros(4, dtype=lib.int64)
    long = lambda v: lib.tensor(v)  # noqa: E731
    return {
        "copy_range": lambda: x.index_copy(0, long([5, 1]), s),
        "copy_range_later": lambda: x.clone().index_copy_(1, long([0, 3]), lib.ones(5, 2)),
        "copy_negative": lambda: x.index_copy(0, long([-1, 1]), s),
        "copy_int32": lambda: x.index_copy(0, lib.tensor([0, 1], dtype=lib.int32), s),
        "copy_float": lambda: x.index_copy(0, lib.tensor([0.0, 1.0]), s),
        "copy_2d_index": lambda: x.index_copy(0, long([[0, 1]]), s),
        "copy_count": lambda: x.index_copy(0, long([0, 1, 2]), s),
        "copy_slices": lambda: x.index_copy(0, long([0, 1]), lib.zeros(2, 4)),
        "copy_slices_3d": lambda: lib.zeros(2, 3, 4).index_copy(1, long([0]), lib.zeros(3, 1, 5)),
        "copy_slices_scalar": lambda: x.index_copy(0, long([1]), lib.tensor(1.0)),
        "copy_slices_into_scalar": lambda: lib.tensor(0.0).index_copy(0, long([0]),
                                                                      lib.zeros(2, 2)),
        "copy_ndim": lambda: x.index_copy(0, long([0, 1]), lib.zeros(2, 3, 1)),
        "copy_scalar_count": lambda: lib.zeros(3).index_copy(0, long([0, 1]), lib.tensor(1.0)),
        "copy_dtype": lambda: x.index_copy(0, long([0, 1]), s.double()),
        "copy_dim": lambda: x.index_copy(2, long([0, 1]), s),
        "copy_expanded": lambda: lib.zeros(4).expand(2, 4).index_copy_(1, long([1]),
                                                                       lib.ones(2, 1)),
        "copy_overlap": lambda: x.index_copy_(0, long([0, 1]), x[3:]),
        "copy_index_overlap": lambda: a.index_copy_(0, a[:2], lib.ones(2, dtype=lib.int64)),
        "put_range": lambda: x.put(long([15]), lib.ones(1)),
        "put_negative": lambda: x.put(long([0, -16]), lib.ones(2)),
        "put_int32": lambda: x.put(lib.tensor([1], dtype=lib.int32), lib.ones(1)),
        "put_dtype": lambda: x.put(long([1]), lib.ones(1, dtype=lib.float64)),
        "put_count": lambda: x.put(long([1, 2]), lib.ones(1)),
        "put_empty": lambda: lib.zeros(0).put_(long([0]), lib.ones(1)),
        "put_accumulate_int": lambda: x.put_(long([1]), lib.ones(1), accumulate=1),
        "put_expanded": lambda: lib.zeros(4).expand(2, 4).put_(long([1]), lib.ones(1),
                                                               accumulate=True),
        "put_overlap": lambda: x.put_(long([1, 2]), x[0, :2]),
        "put_index_overlap": lambda: a.put_(a[:2], lib.ones(2, dtype=lib.int64)),
        "put_scalar_range": lambda: lib.tensor(0.0).put_(long(1), lib.tensor(1.0)),
    }


CASES = sorted(error_cases(ember))


@pytest.mark.parametrize("name", CASES)
def test_errors_match_torch(name):
    torch = pytest.importorskip("torch")
    assert raised(error_cases(ember)[name]) == raised(error_cases(torch)[name])


def test_error_messages_without_torch():
    cases = error_cases(ember)
    for name, kind, message in [
            ("copy_range", IndexError,
             "index_copy_(): index 5 is out of bounds for dimension 0 with size 5"),
            ("copy_int32", RuntimeError,
             "index_copy_(): Expected a long tensor for index, but got Int"),
            ("copy_slices_3d", RuntimeError,
             "index_copy_(): Source/destination tensor must have same slice shapes. "
             "Destination slice shape: 2 4 at dimension 1 and source slice shape: 3 5 at "
             "dimension 0."),
            ("copy_count", IndexError,
             "index_copy_(): Number of indices (3) should be equal to source.size(dim) (2)"),
            ("put_range", IndexError,
             "out of range: tried to access index 15 on a tensor of 15 elements."),
            ("put_count", IndexError,
             "put_(): Expected source and index to have the same number of elements, but got "
             "source.numel() = 1, index.numel() = 2"),
            ("put_overlap", RuntimeError,
             "unsupported operation: some elements of the input tensor and the written-to "
             "tensor refer to a single memory location. Please clone() the tensor before "
             "performing the operation.")]:
        assert raised(cases[name]) == (kind, message), name


def test_failed_in_place_calls_change_nothing():
    t = ember.arange(12.0).view(3, 4)
    snapshot, version = t.tolist(), t._version
    failing = [
        lambda: t.index_copy_(0, ember.tensor([0, 3]), ember.ones(2, 4)),  # second out of range
        lambda: t.index_copy_(1, ember.tensor([1, 0]), ember.ones(3, 3)),
        lambda: t.index_copy_(1, ember.tensor([1, 0]), ember.ones(3, 2, dtype=ember.float64)),
        lambda: t.index_copy_(1, [1, 0], ember.ones(3, 2)),
        lambda: t.put_(ember.tensor([0, 1, 12]), ember.ones(3)),  # last out of range
        lambda: t.put_(ember.tensor([0, -13]), ember.ones(2), accumulate=True),
        lambda: t.put_(ember.tensor([0]), ember.ones(1), accumulate="yes"),
        lambda: t.put_(ember.tensor([0]), 1.0),
    ]
    for fail in failing:
        with pytest.raises((IndexError, RuntimeError, TypeError)):
            fail()
        assert t.tolist() == snapshot
        assert t._version == version


def test_in_place_forms_refuse_read_only_memory():
    frozen = np.arange(4.0)
    frozen.flags.writeable = False
    r = ember.from_numpy(frozen)
    for op in (lambda x: x.index_copy_(0, ember.tensor([0]), ember.ones(1, dtype=ember.float64)),
               lambda x: x.put_(ember.tensor([0]), ember.ones(1, dtype=ember.float64))):
        with pytest.raises(RuntimeError, match="read-only"):
            op(r)
    assert frozen.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_sources_sharing_memory_in_too_hard_layouts_are_read_first():
    # neither view is dense, so PyTorch's overlap check passes ("too hard");
    # ember copies the source aside and reads it as it was
    t = ember.arange(12.0).view(3, 4)
    expected = t.clone()
    expected[:, :2] = t[:, 1:3].clone().flip(1)
    t[:, :2].index_copy_(1, ember.tensor([1, 0]), t[:, 1:3])
    assert t.tolist() == expected.tolist()
    u = ember.arange(12.0).view(3, 4)
    u[:, ::2].put_(ember.tensor([0, 1]), u[0, 1::2])
    assert u.tolist() == [[1, 1, 3, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


def test_signatures_and_keywords():
    t = ember.zeros(2, 3)
    assert ember.index_copy(t, dim=1, index=ember.tensor([2]), source=ember.ones(2, 1)).tolist() \
        == [[0, 0, 1], [0, 0, 1]]
    assert ember.put(t, index=ember.tensor([4]), source=ember.ones(1), accumulate=True).tolist() \
        == [[0, 0, 0], [0, 1, 0]]
    with pytest.raises(TypeError, match="missing required argument 'source'"):
        t.index_copy(0, ember.tensor([0]))
    with pytest.raises(TypeError, match="unexpected keyword argument 'out'"):
        t.put(ember.tensor([0]), ember.ones(1), out=t)
    torch = pytest.importorskip("torch")
    for name in ("index_copy", "put"):
        assert hasattr(torch, name) and hasattr(ember, name)
    for name in ("index_copy_", "put_"):
        assert not hasattr(torch, name) and not hasattr(ember, name)
    assert t._version == 0


@pytest.mark.noleakcheck
def test_large_inputs_match_numpy():
    # past the parallel grain and the GIL-free threshold
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 400))
    rows = rng.permutation(300)[:200]
    source = rng.standard_normal((200, 400))
    expected = a.copy()
    expected[rows] = source
    assert_same(ember.tensor(a).index_copy(0, ember.tensor(rows), ember.tensor(source)), expected)
    positions = rng.integers(-a.size, a.size, size=50000)
    values = rng.standard_normal(50000)
    flat = a.T.ravel().copy()
    np.add.at(flat, positions, values)
    got = ember.tensor(a).t().put(ember.tensor(positions), ember.tensor(values), accumulate=True)
    np.testing.assert_allclose(np.asarray(got), flat.reshape(a.T.shape), rtol=1e-12, atol=1e-12)


# ---- autograd ---------------------------------------------------------------------------

PROGRAMS = [
    ("index_copy", lambda lib, x, s: x.index_copy(0, lib.tensor([2, 0]), s), [(3, 2), (2, 2)]),
    ("index_copy_dim", lambda lib, x, s: lib.index_copy(x, -1, lib.tensor([1]), s),
     [(3, 2), (3, 1)]),
    ("index_copy_0d_index", lambda lib, x, s: x.index_copy(1, lib.tensor(0), s),
     [(3, 2), (3, 1)]),
    ("index_copy_scalar", lambda lib, x, s: x.index_copy(0, lib.tensor([1]), s), [(3,), ()]),
    ("index_copy_into_scalar", lambda lib, x, s: x.index_copy(0, lib.tensor([0]), s),
     [(), (1,)]),
    ("index_copy_", lambda lib, x, s: (x * 1).index_copy_(1, lib.tensor([1, 0]), s * 2),
     [(2, 3), (2, 2)]),
    ("put", lambda lib, x, s: x.put(lib.tensor([[4, -1], [0, 2]]), s), [(2, 3), (4,)]),
    ("put_accumulate", lambda lib, x, s: lib.put(x, lib.tensor([1, 1, -5]), s, True),
     [(2, 3), (3,)]),
    ("put_strided", lambda lib, x, s: x.t().put(lib.tensor([1, 4]), s), [(2, 3), (1, 2)]),
    ("put_", lambda lib, x, s: (x * 1).put_(lib.tensor([0, 3]), s, accumulate=False),
     [(2, 3), (2,)]),
    ("put_accumulate_", lambda lib, x, s: (x * 1).put_(lib.tensor([3, 3]), s,
                                                       accumulate=True), [(2, 3), (2,)]),
]


def _arrays(shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, size=shape) for shape in shapes]


@pytest.mark.parametrize("name, program, shapes", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_gradcheck_and_gradgradcheck(name, program, shapes):
    check_gradcheck(program, *_arrays(shapes, 0), gradgrad=True)


@pytest.mark.parametrize("name, program, shapes", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_values_and_gradients_match_torch(name, program, shapes):
    check_against_torch(program, *_arrays(shapes, 1))
    check_against_torch(program, *[noncontiguous(a) if a.ndim >= 2 else a
                                   for a in _arrays(shapes, 2)])


def test_gradients_of_one_input_only():
    x, s = leaf(np.arange(6.0).reshape(2, 3)), leaf(np.ones((2, 1)), requires_grad=False)
    x.index_copy(1, ember.tensor([2]), s).sum().backward()
    assert x.grad.tolist() == [[1, 1, 0], [1, 1, 0]]
    x, s = leaf(np.zeros(4), requires_grad=False), leaf(np.arange(2.0))
    (x.put(ember.tensor([3, 0]), s) * ember.tensor([1.0, 2, 3, 4])).sum().backward()
    assert s.grad.tolist() == [4, 1]


def test_in_place_forms_under_autograd():
    x = leaf(np.zeros(3, dtype=np.float32))
    for write in (lambda t: t.index_copy_(0, ember.tensor([0]), ember.ones(1)),
                  lambda t: t.put_(ember.tensor([0]), ember.ones(1))):
        with pytest.raises(RuntimeError, match="^a leaf Variable that requires grad is being "
                                               "used in an in-place operation.$"):
            write(x)
    assert x._version == 0
    y = x * 1
    version = y._version
    assert y.put_(ember.tensor([1]), ember.ones(1), accumulate=True) is y
    assert y._version == version + 1 and type(y.grad_fn).__name__ == "PutBackward0"
    assert y.index_copy_(0, ember.tensor([2]), ember.ones(1)) is y
    assert y._version == version + 2 and type(y.grad_fn).__name__ == "IndexCopyBackward0"
    # a tensor saved for backward and then rewritten in place is refused
    w = leaf(np.ones(3, dtype=np.float32))
    z = w * 1
    product = z * z
    z.put_(ember.tensor([0]), ember.zeros(1))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        product.sum().backward()


def test_saved_index_modified_in_place_is_detected():
    x = leaf(np.arange(3.0, dtype=np.float32))
    index = ember.tensor([0, 2])
    y = x.index_copy(0, index, ember.ones(2))
    index.add_(0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
