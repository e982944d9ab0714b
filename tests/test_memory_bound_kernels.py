"""The memory-bound kernels' fast paths (ember issue 15): streaming stores
for large pointwise results (Note [Streaming stores], c/th/THStream.h) and
the order of the pairwise sum's cascaded blocks and side-by-side blocks
(Notes [Block cascade] and [Two streams], c/th/THReduce.c).

The streaming threshold is lowered for these tests so that small arrays take
the same path as a 64 MiB result; ember._C._streamed_runs() counts the
executions that streamed, so each test also checks which path a call took.
"""

import numpy as np
import pytest

import ember

N = 70_001  # more than 2 x the parallel grain (32768): two threads split it
SMALL_THRESHOLD = 1024  # bytes


@pytest.fixture
def low_threshold():
    saved = ember._C._stream_threshold()
    ember._C._stream_threshold(SMALL_THRESHOLD)
    yield
    ember._C._stream_threshold(0)  # the default again
    assert ember._C._stream_threshold() == saved


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    saved = ember.get_num_threads()
    ember.set_num_threads(request.param)
    yield request.param
    ember.set_num_threads(saved)


def streamed():
    return ember._C._streamed_runs()[0]


def fused():
    """Threads' ranges that took a fused streaming loop (Note [Fused
    streaming loops], c/th/THPointwise.c) rather than blocks and a copy."""
    return ember._C._streamed_runs()[2]


def data(dtype, n=N, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(n).astype(dtype)
    return rng.integers(-100, 100, n).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int8])
def test_large_out_streams_and_matches_numpy(low_threshold, threads, dtype):
    a, b = data(dtype), data(dtype, seed=1)
    out = ember.empty(N, dtype=getattr(ember, np.dtype(dtype).name))
    before = streamed()
    r = ember.add(ember.from_numpy(a), ember.from_numpy(b), out=out)
    assert r is out and streamed() == before + 1
    np.testing.assert_array_equal(out.numpy(), a + b)
    # a bool result (1-byte elements) and an allocated result stream too
    eq = ember.from_numpy(a) == ember.from_numpy(b)
    prod = ember.from_numpy(a) * 3
    assert streamed() == before + 3
    np.testing.assert_array_equal(eq.numpy(), a == b)
    np.testing.assert_array_equal(prod.numpy(), a * dtype(3))


@pytest.mark.parametrize("offset", [1, 3, 7])
def test_misaligned_out_streams_inside_its_bounds(low_threshold, threads,
                                                  offset):
    a, b = data(np.float32), data(np.float32, seed=1)
    base = ember.full((N + 16,), -7.0)
    out = base[offset:offset + N]  # 4 * offset bytes past a vector boundary
    before = streamed()
    ember.add(ember.from_numpy(a), ember.from_numpy(b), out=out)
    assert streamed() == before + 1
    got = base.numpy()
    np.testing.assert_array_equal(got[offset:offset + N], a + b)
    assert (got[:offset] == -7).all() and (got[offset + N:] == -7).all()


def test_out_sharing_memory_with_an_input_does_not_stream(low_threshold,
                                                          threads):
    a, b = data(np.float32), data(np.float32, seed=1)
    x, y = ember.from_numpy(a.copy()), ember.from_numpy(b)
    before = streamed()
    x.add_(y)  # in place: the output is an input
    ember.mul(x, 2, out=x)  # out= aliasing the input
    assert streamed() == before
    np.testing.assert_array_equal(x.numpy(), (a + b) * np.float32(2))
    # out= a view of the same memory as an input, not the input object
    ember.sub(x, y, out=x.view(N))
    assert streamed() == before
    np.testing.assert_array_equal(x.numpy(), (a + b) * np.float32(2) - b)


def test_small_or_strided_results_do_not_stream(threads):
    a = data(np.float32)
    before = streamed()
    r = ember.from_numpy(a) + 1  # far below the default threshold
    s = ember.from_numpy(a)[::2] + 1  # not one flat run
    assert streamed() == before
    np.testing.assert_array_equal(r.numpy(), a + np.float32(1))
    np.testing.assert_array_equal(s.numpy(), a[::2] + np.float32(1))


@pytest.mark.parametrize("n, streams", [(1023, False), (1024, True),
                                        (1025, True)])
def test_results_stream_from_the_threshold_on(n, streams):
    """A result of at least the threshold's bytes streams (4096 here: 1024
    float32), a smaller one is written with plain stores."""
    saved = ember._C._stream_threshold()
    ember._C._stream_threshold(4096)
    try:
        a, b = data(np.float32, n), data(np.float32, n, seed=1)
        before = streamed()
        r = ember.from_numpy(a) * ember.from_numpy(b)
        assert streamed() == before + streams
        np.testing.assert_array_equal(r.numpy(), a * b)
    finally:
        ember._C._stream_threshold(0)
    assert ember._C._stream_threshold() == saved


def test_stream_threshold_argument_checks():
    with pytest.raises(ValueError, match=">= 0"):
        ember._C._stream_threshold(-1)
    count, family, fused_ranges = ember._C._streamed_runs()
    assert count >= 0 and family in ("avx512", "avx2", "sse2", "generic")
    assert 0 <= fused_ranges


# ---- the fused streaming loops (Note [Fused streaming loops]) ---------------

CHUNK = 128  # TH_STREAM_CHUNK bytes


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int8,
                                   np.uint8, np.int16])
def test_binary_and_unary_operators_take_the_fused_loop(low_threshold,
                                                        threads, dtype):
    """Each thread's range runs the fused loop: both inputs contiguous, one
    a scalar (either side), a bool result, and a unary operator."""
    a, b = data(dtype), data(dtype, seed=1)
    x, y = ember.from_numpy(a), ember.from_numpy(b)
    before_runs, before = streamed(), fused()
    out = ember.empty(N, dtype=x.dtype)
    ember.sub(x, y, out=out)
    np.testing.assert_array_equal(out.numpy(), a - b)
    np.testing.assert_array_equal((x * 3).numpy(), a * dtype(3))
    np.testing.assert_array_equal((2 - x).numpy(), dtype(2) - a)
    np.testing.assert_array_equal((x < y).numpy(), a < b)
    np.testing.assert_array_equal((-x).numpy(), -a)
    assert streamed() == before_runs + 5
    assert fused() == before + 5 * threads


def test_fused_loop_matches_the_ordinary_loop_bit_for_bit(low_threshold):
    """Floating formulas with rounding to get wrong (true division, pow,
    atan2, logaddexp) give the unstreamed results exactly."""
    a = data(np.float32)
    b = np.abs(data(np.float32, seed=1)) + np.float32(0.5)
    x, y = ember.from_numpy(a), ember.from_numpy(b)
    ops = [lambda p, q: p / q, lambda p, q: q ** p, ember.atan2,
           ember.logaddexp, ember.hypot]
    before = fused()
    streamed_results = [op(x, y).numpy() for op in ops]
    assert fused() > before
    ember._C._stream_threshold(1 << 62)  # nothing streams
    before = fused()
    for op, got in zip(ops, streamed_results):
        np.testing.assert_array_equal(got, op(x, y).numpy())
    assert fused() == before


# results from below one chunk to a few, at every element offset from a
# 64-byte boundary: head, whole chunks and tail each written exactly once
@pytest.mark.parametrize("n", [1, 31, 32, 33, 63, 64, 65, 95, 96, 97, 255,
                               256, 257, 1000])
@pytest.mark.parametrize("offset", [0, 1, 5, 15, 16])
def test_fused_loop_writes_head_chunks_and_tail(n, offset):
    saved = ember._C._stream_threshold()
    ember._C._stream_threshold(1)  # every result streams
    try:
        a, b = data(np.float32, n), data(np.float32, n, seed=2)
        base = ember.full((n + 48,), -7.0)
        start = offset + 16  # base's data is 64-byte aligned
        out = base[start:start + n]
        before_runs, before = streamed(), fused()
        ember.add(ember.from_numpy(a), ember.from_numpy(b), out=out)
        assert streamed() == before_runs + 1
        # a whole chunk after the head at `offset` takes the fused loop
        head = (16 - offset % 16) % 16
        assert fused() == before + (n - head >= CHUNK // 4)
        got = base.numpy()
        np.testing.assert_array_equal(got[start:start + n], a + b)
        assert (got[:start] == -7).all() and (got[start + n:] == -7).all()
    finally:
        ember._C._stream_threshold(0)


def test_ternary_operators_stream_by_blocks(low_threshold, threads):
    """The ternary operators have no fused loop: they stream by blocks (the
    ordinary loop into L1, then a streaming copy), with the same values."""
    a, b = data(np.float32), data(np.float32, seed=1)
    x, y = ember.from_numpy(a), ember.from_numpy(b)
    before_runs, before = streamed(), fused()
    np.testing.assert_array_equal(
        ember.clamp(y, -0.5, 0.5).numpy(),
        np.clip(b, np.float32(-0.5), np.float32(0.5)))
    np.testing.assert_array_equal(ember.where(x < y, x, y).numpy(),
                                  np.where(a < b, a, b))
    assert streamed() == before_runs + 3  # x < y streams too, fused
    assert fused() == before + threads


# ---- the pairwise sum's order of additions ----------------------------------

LEAF, LANES, BLOCKS = 4096, 64, 8  # TH_PAIRWISE_LEAF, _LANES, _BLOCKS


def block_lanes(x):
    """A block's 64 lane sums: element i is added to lane i % 64."""
    n = x.size
    full = n // LANES * LANES
    lanes = np.zeros(LANES, dtype=x.dtype)
    for row in x[:full].reshape(-1, LANES):  # one addition per lane a row
        lanes = lanes + row
    lanes[:n - full] += x[full:]
    return lanes


def reference_lanes(x):
    """The 64 lane sums of Note [Accurate sums], in x's dtype: a leaf adds
    its blocks' lanes front to back (Note [Block cascade])."""
    n = x.size
    if n > LEAF * BLOCKS:
        half = (n // 2) & ~(LANES - 1)
        return reference_lanes(x[:half]) + reference_lanes(x[half:])
    lanes = np.zeros(LANES, dtype=x.dtype)
    for start in range(0, n, LEAF):
        lanes = lanes + block_lanes(x[start:start + LEAF])
    return lanes


def reference_sum(x):
    lanes = reference_lanes(x)
    width = LANES // 2
    while width >= 1:
        lanes = lanes[:width] + lanes[width:2 * width]
        width //= 2
    return lanes[0]


@pytest.mark.parametrize("n", [4097, 2 * LEAF + 130, 3 * LEAF + 77,
                               BLOCKS * LEAF + 1, 100_003, 300_007])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_adds_in_the_pairwise_order(n, dtype):
    """Bit for bit the modelled order, whichever build runs (AVX-512VL one
    block at a time, AVX2 with side-by-side blocks), contiguous or
    strided."""
    saved = ember.get_num_threads()
    ember.set_num_threads(1)  # the split driver would cut the run
    try:
        x = data(dtype, 2 * n, seed=n)
        want = reference_sum(x[:n])
        assert ember.from_numpy(x[:n]).sum().item() == want
        assert ember.from_numpy(x)[::2].sum().item() == reference_sum(x[::2])
        assert ember.from_numpy(x[:n]).norm(p=1).item() == reference_sum(
            np.abs(x[:n]))
        # the squares' and squared deviations' sums (norm, var) too
        y = x[1:n + 1]
        assert ember.from_numpy(x)[1:n + 1].norm().item() == dtype(
            np.sqrt(np.float64(reference_sum(y * y))))
        mean = dtype(reference_sum(y) / dtype(n))
        m2 = reference_sum((y - mean) * (y - mean))
        assert ember.from_numpy(x)[1:n + 1].var().item() == dtype(np.float64(m2) / (n - 1))
    finally:
        ember.set_num_threads(saved)
    np.testing.assert_allclose(want, x[:n].sum(dtype=np.float64), rtol=1e-5)


# ---- the column sums' order of additions (Note [Column tiles]) -------------

COLUMN_LEAF, COLUMN_TILE = 16, 1024  # TH_COLUMN_LEAF, TH_COLUMN_TILE


def reference_columns(m):
    """Column sums of m halving the rows down to leaves of 16 rows, each
    leaf adding its rows one after another, in m's dtype."""
    rows = m.shape[0]
    if rows <= COLUMN_LEAF:
        acc = np.zeros(m.shape[1:], dtype=m.dtype)
        for row in m:
            acc = acc + row
        return acc
    half = rows // 2
    return reference_columns(m[:half]) + reference_columns(m[half:])


# widths below one vector, around the smallest tile, and over one tile
@pytest.mark.parametrize("shape", [(5, 3), (67, 130), (37, 1040),
                                   (100, 2 * COLUMN_TILE + 17)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_column_sum_adds_in_the_pairwise_order(threads, shape, dtype):
    """Bit for bit the same for any tiling and thread count, and within
    float rounding of NumPy's float64 sums."""
    m = data(dtype, shape[0] * shape[1], seed=shape[1]).reshape(shape)
    got = ember.from_numpy(m).sum(0).numpy()
    np.testing.assert_array_equal(got, reference_columns(m))
    np.testing.assert_allclose(got, m.sum(0, dtype=np.float64), rtol=1e-4,
                               atol=1e-3)
    # kept dims outside the tiled one: every outer position its own tiles
    cube = m.reshape(shape[0], 1, shape[1]).repeat(2, 1) * np.array(
        [[1], [-2]], dtype=dtype)
    np.testing.assert_array_equal(ember.from_numpy(cube).sum(0).numpy(),
                                  reference_columns(cube))


def test_column_var_matches_numpy(threads):
    """var(dim=0) folds squared deviations through the same column leaves."""
    m = data(np.float64, 41 * 1100, seed=3).reshape(41, 1100)
    np.testing.assert_allclose(ember.from_numpy(m).var(0).numpy(),
                               m.var(0, ddof=1), rtol=1e-12)


# ---- reductions over groups of slices (Note [Reduction groups]) ------------

GROUP_MIN_FOLD = 1024  # TH_GROUP_MIN_FOLD


def merge_tree(parts, merge):
    """The slices' partials merged as a tree: halves [0, n // 2) and
    [n // 2, n), the later merged into the earlier."""
    if len(parts) == 1:
        return parts[0]
    half = len(parts) // 2
    return merge(merge_tree(parts[:half], merge), merge_tree(parts[half:], merge))


def trailing_run(shape, axes):
    """The elements in the run of a contiguous input: the trailing reduced
    dims that merge (consecutive, ending at the last reduced dim)."""
    length, d = 1, max(axes)
    if d != len(shape) - 1:
        return 1
    while d in axes:
        length *= shape[d]
        d -= 1
    return length


def reference_reduce(x, axes, slice_sum, merge):
    """Per output (kept dims row-major), the order a contiguous input is
    reduced in: slices of a run of GROUP_MIN_FOLD or more folded on their
    own and merged as a tree; shorter runs copied kept-first and summed as
    one run."""
    kept = [d for d in range(x.ndim) if d not in axes]
    rows = np.moveaxis(x, kept, list(range(len(kept)))).reshape(
        int(np.prod([x.shape[d] for d in kept])), -1)
    run = trailing_run(x.shape, axes)
    if run < GROUP_MIN_FOLD or run == rows.shape[1]:
        return [slice_sum(row) for row in rows]
    return [merge_tree([slice_sum(s) for s in row.reshape(-1, run)], merge)
            for row in rows]


# (shape, reduced dims): BatchNorm's (0, 2, 3); two group dims and two kept
# dims (15 slices); 37 slices; more outputs than one pass folds (16); a run
# one short of the threshold, which takes the copy
GROUP_CASES = [((4, 3, 30, 40), (0, 2, 3)), ((3, 2, 5, 2, 1100), (0, 2, 4)),
               ((37, 2, 1024), (0, 2)), ((3, 20, 1100), (0, 2)),
               ((5, 3, 1023), (0, 2))]


@pytest.mark.parametrize("shape,axes", GROUP_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_group_sums_add_in_the_documented_order(threads, shape, axes, dtype):
    """Bit for bit the modelled order for any thread count (each output's
    slices are merged in its own tree), and within rounding of NumPy's."""
    x = data(dtype, int(np.prod(shape)), seed=len(shape)).reshape(shape)
    add = lambda a, b: dtype(a + b)  # noqa: E731
    want = np.array(reference_reduce(x, axes, reference_sum, add), dtype=dtype)
    kept_shape = [n for d, n in enumerate(shape) if d not in axes]
    got = ember.from_numpy(x).sum(axes)
    np.testing.assert_array_equal(got.numpy().reshape(-1), want)
    assert list(got.shape) == kept_shape
    count = x.size // want.size
    np.testing.assert_array_equal(ember.from_numpy(x).mean(axes).numpy().reshape(-1),
                                  want / dtype(count))
    np.testing.assert_allclose(want, x.sum(axes, dtype=np.float64).reshape(-1),
                               rtol=1e-4, atol=1e-3)
    if trailing_run(shape, axes) >= GROUP_MIN_FOLD and dtype == np.float32:
        # the test tells the orders apart: the copy's would round otherwise
        copied = [reference_sum(row) for row in np.moveaxis(
            x, [d for d in range(x.ndim) if d not in axes], list(range(len(kept_shape)))
        ).reshape(want.size, -1)]
        assert not np.array_equal(want, np.array(copied, dtype=dtype))


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int8", "int16", "int32",
                                   "int64", "float16", "bfloat16"])
def test_group_sums_of_every_dtype(threads, dtype):
    """Integer sums wrap to int64 whatever the order; float16 and bfloat16
    sum their float32 values in the float32 order, rounded once."""
    shape, axes = (3, 4, 2, 1100), (0, 2, 3)
    raw = data(np.float32, int(np.prod(shape)), seed=5).reshape(shape)
    if dtype in ("float16", "bfloat16"):
        x = ember.from_numpy(raw).to(getattr(ember, dtype))
        wide = x.float().numpy()  # the values, exactly
        add = lambda a, b: np.float32(a + b)  # noqa: E731
        want = np.array(reference_reduce(wide, axes, reference_sum, add),
                        dtype=np.float32)
        expected = ember.from_numpy(want).to(getattr(ember, dtype))
        got = x.sum(axes)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got.float().numpy(), expected.float().numpy())
        return
    values = (raw * 50).astype(np.int64) if dtype != "bool" else raw > 0
    x = values.astype(dtype)
    got = ember.from_numpy(x).sum(axes)
    assert got.dtype == ember.int64
    np.testing.assert_array_equal(got.numpy(), x.sum(axes, dtype=np.int64))


def test_group_plans_of_the_other_reductions(threads):
    """Every kernel folds slices and merges their partials: max/min,
    var/std (Chan's merge), the norms, logsumexp, all/any, count_nonzero."""
    shape, axes = (5, 3, 2, 1100), (0, 2, 3)
    x = data(np.float64, int(np.prod(shape)), seed=7).reshape(shape)
    e = ember.from_numpy(x)
    np.testing.assert_array_equal(e.amax(axes).numpy(), x.max(axes))
    np.testing.assert_array_equal(e.amin(axes).numpy(), x.min(axes))
    np.testing.assert_allclose(e.var(axes).numpy(), x.var(axes, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(e.std(axes, correction=0).numpy(), x.std(axes), rtol=1e-12)
    np.testing.assert_allclose(e.norm(dim=axes).numpy(),
                               np.sqrt((x * x).sum(axes)), rtol=1e-12)
    np.testing.assert_allclose(e.norm(p=1, dim=axes).numpy(), np.abs(x).sum(axes),
                               rtol=1e-12)
    np.testing.assert_allclose(e.norm(p=3, dim=axes).numpy(),
                               (np.abs(x) ** 3).sum(axes) ** (1 / 3), rtol=1e-12)
    np.testing.assert_allclose(e.logsumexp(axes).numpy(),
                               np.log(np.exp(x).sum(axes)), rtol=1e-12)
    ints = (x * 3).astype(np.int32)
    ei = ember.from_numpy(ints)
    np.testing.assert_array_equal(ei.all(axes).numpy(), ints.all(axes))
    np.testing.assert_array_equal(ei.any(axes).numpy(), ints.any(axes))
    np.testing.assert_array_equal(ember.count_nonzero(ei, axes).numpy(),
                                  np.count_nonzero(ints, axes))
    np.testing.assert_array_equal(ei.amax(axes).numpy(), ints.max(axes))
    # the arg-reductions take one dim: a run, never groups
    np.testing.assert_array_equal(e.argmax(3).numpy(), x.argmax(3))
