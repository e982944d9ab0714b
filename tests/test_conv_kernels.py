"""The C convolution kernels (c/th/THConv.c through _C._conv2d, _C._conv3d
and their backward products) checked against NumPy, with the bad arguments
and the re-entrant ones a direct caller can pass.  Small, for the leak
gates."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember import _C


def _windows(x_shape, w_shape, stride, pad, dilation):
    """Each output position's (y, x, padded-input slices): the definition."""
    _, _, h, wd = x_shape
    _, _, kh, kw = w_shape
    oh = (h + 2 * pad[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    for y in range(oh):
        for xx in range(ow):
            ys, xs = y * stride[0], xx * stride[1]
            yield y, xx, (slice(ys, ys + dilation[0] * (kh - 1) + 1, dilation[0]),
                          slice(xs, xs + dilation[1] * (kw - 1) + 1, dilation[1]))


def reference_conv2d(x, w, stride, pad, dilation, groups, grad=None):
    """The definition in NumPy loops over output positions: the output, or
    with `grad` (an output-shaped array) the input and weight gradients."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    padding = ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1]))
    x = np.pad(x, padding)
    windows = list(_windows((n, c, h, wd), w.shape, stride, pad, dilation))
    oh, ow = windows[-1][0] + 1, windows[-1][1] + 1
    out = np.zeros((n, o, oh, ow))
    grad_x, grad_w = np.zeros_like(x), np.zeros_like(w)
    per_group = o // groups
    for oc in range(o):
        channels = slice(oc // per_group * cg, (oc // per_group + 1) * cg)
        for y, xx, (rows, cols) in windows:
            patch = x[:, channels, rows, cols]
            if grad is None:
                out[:, oc, y, xx] = (patch * w[oc]).sum(axis=(1, 2, 3))
                continue
            g = grad[:, oc, y, xx].reshape(-1, 1, 1, 1)
            grad_x[:, channels, rows, cols] += g * w[oc]
            grad_w[oc] += (g * patch).sum(axis=0)
    if grad is None:
        return out
    return grad_x[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + wd], grad_w


# (batch, in_channels, out_channels, image, kernel, stride, padding, dilation, groups):
# the input gradient as a convolution (stride 1, Note [Input gradient as a
# convolution]) and by col2im (stride 2, padding beyond the kernel), several
# samples side by side with a remainder (Note [Samples side by side]: a 40x40
# output takes three), more rows of (c, i, j) than one KC block of the GEMM
# (32 * 3 * 3), 1x1 images, a kernel the size of the input, stride larger
# than the kernel, dilation, groups and depthwise.
GEOMETRIES = [
    (2, 4, 4, (6, 5), (3, 2), (1, 1), (0, 0), (1, 1), 1),
    (2, 4, 4, (6, 5), (3, 2), (2, 1), (1, 0), (1, 2), 2),
    (4, 2, 3, (40, 40), (3, 3), (1, 1), (1, 1), (1, 1), 1),
    (2, 32, 3, (5, 4), (3, 3), (1, 1), (1, 1), (1, 1), 1),
    (3, 3, 2, (1, 1), (1, 1), (1, 1), (0, 0), (1, 1), 1),
    (3, 3, 2, (1, 1), (3, 3), (1, 1), (1, 1), (1, 1), 1),
    (2, 2, 3, (5, 4), (5, 4), (1, 1), (0, 0), (1, 1), 1),
    (2, 2, 3, (7, 8), (2, 2), (3, 4), (0, 1), (1, 1), 1),
    (2, 2, 2, (7, 7), (3, 3), (1, 1), (2, 1), (2, 3), 1),
    (2, 2, 2, (4, 4), (1, 1), (1, 1), (1, 2), (1, 1), 1),
    (3, 4, 4, (6, 6), (3, 3), (1, 1), (1, 1), (1, 1), 4),
    (2, 6, 4, (5, 6), (3, 3), (1, 2), (2, 1), (1, 1), 2),
]


def _operands(dtype, geometry):
    batch, cin, cout, image, kernel, stride, pad, dilation, groups = geometry
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, cin, *image)).astype(dtype)
    w = rng.standard_normal((cout, cin // groups, *kernel)).astype(dtype)
    b = rng.standard_normal(cout).astype(dtype)
    return x, w, b, rng


def _ember_products(x, w, b, g, geometry):
    """ember's output, input gradient and weight gradient."""
    _, _, _, image, kernel, stride, pad, dilation, groups = geometry
    ints = (*stride, *pad, *dilation, groups)
    out = _C._conv2d(ember.tensor(x), ember.tensor(w), ember.tensor(b), *ints).numpy()
    grad_x = _C._conv2d_backward_input(ember.tensor(g), ember.tensor(w), *image, *ints)
    grad_w = _C._conv2d_backward_weight(ember.tensor(g), ember.tensor(x), *kernel, *ints)
    return out, grad_x.numpy(), grad_w.numpy()


def _expected_products(x, w, b, g, geometry):
    _, _, _, _, _, stride, pad, dilation, groups = geometry
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    out = reference_conv2d(x64, w64, stride, pad, dilation, groups)
    grads = reference_conv2d(x64, w64, stride, pad, dilation, groups,
                             grad=g.astype(np.float64))
    return (out + b.reshape(1, -1, 1, 1), *grads)


def _assert_products_close(got, expected, dtype):
    tolerance = 1e-4 if dtype == np.float32 else 1e-12
    for have, want in zip(got, expected):
        np.testing.assert_allclose(have, want, rtol=tolerance, atol=tolerance)


def _each_gemm_kernel_and_thread_count():
    """Runs the loop body on every GEMM family this CPU runs, on one thread
    and two, then restores the family and the thread count."""
    saved_kernel, saved_threads = _C._gemm_kernel(), ember.get_num_threads()
    try:
        for family in ("generic", "avx2", "avx512"):
            try:
                _C._gemm_kernel(family)
            except RuntimeError:
                continue  # not on this CPU
            for threads in (1, 2):
                ember.set_num_threads(threads)
                yield family, threads
    finally:
        _C._gemm_kernel(saved_kernel)
        ember.set_num_threads(saved_threads)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_forward_and_backward_products_match_numpy(dtype, geometry):
    x, w, b, rng = _operands(dtype, geometry)
    out = _C._conv2d(ember.tensor(x), ember.tensor(w), ember.tensor(b),
                     *geometry[5], *geometry[6], *geometry[7], geometry[8]).numpy()
    g = rng.standard_normal(out.shape).astype(dtype)
    _assert_products_close(_ember_products(x, w, b, g, geometry),
                           _expected_products(x, w, b, g, geometry), dtype)


@pytest.mark.noleakcheck
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("geometry", [
    (3, 3, 7, (9, 11), (3, 3), (1, 1), (1, 1), (1, 1), 1),
    (5, 2, 3, (4, 3), (3, 3), (1, 1), (1, 1), (1, 1), 1),
])
def test_every_gemm_kernel_and_thread_count(dtype, geometry):
    """The implicit GEMM (Note [Convolution as an implicit GEMM]) packs
    micro-panels of each family's own width: every family this CPU runs,
    on one thread and two, with 7 output channels (a partial MR tile) and
    297 columns (a partial last panel); and with 3-wide output lines,
    several of which meet in one 32-byte chunk of a panel row (Note
    [Gathering a panel row by selects])."""
    x, w, b, rng = _operands(dtype, geometry)
    g = rng.standard_normal((geometry[0], geometry[2], *geometry[3])).astype(dtype)
    expected = _expected_products(x, w, b, g, geometry)
    for _ in _each_gemm_kernel_and_thread_count():
        _assert_products_close(_ember_products(x, w, b, g, geometry), expected, dtype)


@pytest.mark.noleakcheck
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("geometry", [
    (2, 3, 5, (28, 28), (5, 5), (1, 1), (2, 2), (1, 1), 1),
    (3, 4, 40, (6, 13), (3, 3), (1, 1), (1, 1), (1, 1), 2),
    (2, 2, 3, (5, 12), (3, 2), (2, 1), (1, 0), (1, 2), 1),
])
def test_direct_products_every_gemm_kernel(dtype, geometry):
    """The forward and the stride-1 input gradient run directly by taps
    (Note [Direct convolution by taps]) where MR-position blocks cover the
    output lines with little waste: 28-wide lines (two blocks of AVX-512's
    14, five of AVX2's 6 with a short last one), 13 (one short AVX-512
    block) and 12 (two AVX2 blocks, a stride-2 height and a dilated width);
    40 output channels fill part of B's second panel, two groups and the
    bias go through tile_out.  Every family, one thread and two."""
    x, w, b, rng = _operands(dtype, geometry)
    out_shape = _C._conv2d(ember.tensor(x), ember.tensor(w), None, *geometry[5],
                           *geometry[6], *geometry[7], geometry[8]).shape
    g = rng.standard_normal(tuple(out_shape)).astype(dtype)
    expected = _expected_products(x, w, b, g, geometry)
    for _ in _each_gemm_kernel_and_thread_count():
        _assert_products_close(_ember_products(x, w, b, g, geometry), expected, dtype)


# Direct products (Note [Direct convolution by taps]) whose output lines
# reach some kernel rows only in the padding, skipped (Note [Skipping zero
# taps] in THBlas.c): a height padding beyond the kernel's reach (the
# first and last lines read nothing but padding: the bias alone), a
# stride-2 dilated height (lines cut at the top and at the bottom), two
# groups of 18 -> 17 channels (the weight arranged in 16 x 16 tiles with
# short edges, Note [Arranging the weight]), and 3-D volumes cut in depth
# and height at once (the run of k steps between the first and the last
# kernel row reached holds rows that read padding).  12-wide lines are
# AVX2's and the portable family's blocks, 14 AVX-512's.
SKIPPED_ROW_GEOMETRIES = [
    (2, 3, 4, (5, 14), (3, 3), (1, 1), (3, 1), (1, 1), 1),
    (2, 4, 6, (7, 12), (5, 3), (2, 1), (2, 1), (2, 1), 2),
    (2, 36, 34, (5, 14), (3, 3), (1, 1), (1, 1), (1, 1), 2),
    (2, 3, 4, (3, 4, 14), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), 1),
    (1, 2, 3, (4, 3, 12), (3, 3, 3), (2, 1, 1), (2, 1, 1), (1, 2, 1), 1),
]


@pytest.mark.noleakcheck
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("geometry", SKIPPED_ROW_GEOMETRIES)
def test_direct_products_skip_padding_rows(dtype, geometry):
    """All three products, every family, one thread and two: the same
    values, bit for bit, on both (each block sums in one order)."""
    _check_every_family_and_thread_count(dtype, geometry)


# Direct products whose blocks hold the same line of two samples (Note
# [Two lines in one block] in THBlas.c), where half a block's rows cut the
# output lines with less waste than all of them, and whose 3-wide kernels
# with a width padding of 1 leave out the taps that read the padding at
# the lines' ends (Note [Skipping a line's edges]): 7-wide lines under
# AVX-512's 14 rows (ResNet's 7 x 7 layers: both ends of both halves) with
# an odd batch, whose last sample has no partner, and 40 output channels;
# 21-wide lines (three pieces of 7, or seven of AVX2's and the portable
# family's 3: a first, middle and last piece) over 13 samples, which go
# in chunks of 10 and 3 (Note [Samples side by side]); 3-wide lines (AVX2's
# and the portable family's half tile) under a height padding that
# leaves the first and last lines a single kernel row (Note [Skipping
# zero taps]); two groups on 20-wide lines, whose last piece is short (no
# last edge); a 5x5 kernel (no edges skipped); and a 3-D volume.
PAIRED_LINE_GEOMETRIES = [
    (3, 5, 40, (7, 7), (3, 3), (1, 1), (1, 1), (1, 1), 1),
    (13, 2, 3, (20, 21), (3, 3), (1, 1), (1, 1), (1, 1), 1),
    (4, 3, 4, (6, 3), (3, 3), (1, 1), (2, 1), (1, 1), 1),
    (3, 4, 6, (5, 20), (3, 3), (1, 1), (1, 1), (1, 1), 2),
    (3, 2, 3, (7, 7), (5, 5), (1, 1), (2, 2), (1, 1), 1),
    (3, 2, 3, (3, 4, 7), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), 1),
]


@pytest.mark.noleakcheck
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("geometry", PAIRED_LINE_GEOMETRIES)
def test_direct_products_pair_short_lines(dtype, geometry):
    """All three products, every family, one thread and two, bit for bit
    the same on both."""
    _check_every_family_and_thread_count(dtype, geometry)


def _check_every_family_and_thread_count(dtype, geometry):
    """The three products against reference_conv on every GEMM family,
    one thread and two, and bit for bit the same on both."""
    x, w, b, rng = _operands(dtype, geometry)
    stride, pad, dilation, groups = geometry[5:]
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    out = reference_conv(x64, w64, stride, pad, dilation, groups)
    g = rng.standard_normal(out.shape).astype(dtype)
    bias_shape = (1, -1) + (1,) * (x.ndim - 2)
    expected = (out + b.reshape(bias_shape),
                *reference_conv(x64, w64, stride, pad, dilation, groups,
                                grad=g.astype(np.float64)))
    products = _ember_products if x.ndim == 4 else _conv3d_products
    one_thread = {}
    for family, threads in _each_gemm_kernel_and_thread_count():
        got = products(x, w, b, g, geometry)
        _assert_products_close(got, expected, dtype)
        if threads == 1:
            one_thread[family] = got
        for ours, theirs in zip(got, one_thread[family]):
            assert np.array_equal(ours, theirs)


def _windowed_products(x, w, g, pad):
    """Stride-1 products by sliding windows and einsum (fast enough for
    wide layers, where the loops of reference_conv2d are not): the output,
    the input gradient (the full correlation of g with the flipped weight)
    and the weight gradient."""
    kh, kw = w.shape[2:]
    windows = np.lib.stride_tricks.sliding_window_view
    x_windows = windows(np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))), (kh, kw),
                        axis=(2, 3))
    g_padded = np.pad(g, ((0, 0), (0, 0), (kh - 1 - pad,) * 2, (kw - 1 - pad,) * 2))
    g_windows = windows(g_padded, (kh, kw), axis=(2, 3))
    out = np.einsum("ncyxij,ocij->noyx", x_windows, w, optimize=True)
    grad_x = np.einsum("noyxij,ocij->ncyx", g_windows, w[:, :, ::-1, ::-1], optimize=True)
    grad_w = np.einsum("ncyxij,noyx->ocij", x_windows, g, optimize=True)
    return out, grad_x, grad_w


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("size", [20, 14])
def test_wide_layer_products(dtype, size):
    """A 256-channel 3x3 layer: its weight (256 x 2304) outgrows L2, so at
    20 x 20 the forward and input-gradient GEMMs go B's micro-panels in
    groups, 20 x 20 outputs making a short last group (Note [GEMM with a
    gathered B]), and 256 rows take the narrow tile (Note [The narrow
    tile]); at 14 x 14 (AVX-512's 14-position blocks) both run directly by
    taps, the packed weight streaming from beyond L2 and the input
    gradient's weight flipped and arranged in 16 x 16 tiles (Note
    [Arranging the weight]).  The weight gradient runs by taps at both
    sizes, its sums (2304 x 256) beyond L2 (Note [Weight gradient by taps]
    in THConv.c)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 256, size, size)).astype(dtype)
    w = (rng.standard_normal((256, 256, 3, 3)) / 48).astype(dtype)
    g = rng.standard_normal((1, 256, size, size)).astype(dtype)
    ints = (1, 1, 1, 1, 1, 1, 1)
    got = (_C._conv2d(ember.tensor(x), ember.tensor(w), None, *ints).numpy(),
           _C._conv2d_backward_input(ember.tensor(g), ember.tensor(w), size, size,
                                     *ints).numpy(),
           _C._conv2d_backward_weight(ember.tensor(g), ember.tensor(x), 3, 3, *ints).numpy())
    expected = _windowed_products(x.astype(np.float64), w.astype(np.float64),
                                  g.astype(np.float64), 1)
    _assert_products_close(got, expected, dtype)


# Weight gradients that run by taps (Note [Weight gradient by taps] in
# THConv.c: enough channels per group for the tapped tile's rows, at least
# 128 output positions a sample): 16 channels (two AVX-512 narrow blocks),
# 30 (a last block of 6 rows under AVX-512's 8, whole blocks of AVX2's 6;
# 11-wide lines end each channels-last transpose early), two groups with a
# stride-2 height and a dilated width, and a 3-D volume; then padding
# beyond the kernel's reach, so each tap's first and last lines of
# positions read only padding and are skipped (Note [Skipping zero taps]
# in THBlas.c), and 1-wide outputs under a width padding of 2, whose
# taps j = 0 and 1 read nothing but padding (their gradient is zero);
# last, 256 channels into 128, whose sums (2304 x 128) outgrow a 1 MiB L2
# in both dtypes (weight_taps_fit in THConv.c) and so stream from beyond
# it, each row block's rows asked for ahead (add_tile).
# reference_conv is the definition for 2 or 3 spatial dims.
TAPPED_WEIGHT_GEOMETRIES = [
    (2, 16, 24, (12, 12), (3, 3), (1, 1), (1, 1), (1, 1), 1),
    (2, 30, 8, (16, 11), (3, 3), (1, 1), (1, 1), (1, 1), 1),
    (2, 32, 16, (20, 20), (3, 3), (2, 1), (1, 2), (1, 2), 2),
    (2, 8, 8, (4, 6, 7), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), 1),
    (2, 16, 8, (12, 12), (3, 3), (1, 1), (3, 2), (1, 1), 1),
    (2, 16, 4, (140, 1), (3, 3), (1, 3), (1, 2), (1, 1), 1),
    (2, 256, 128, (12, 12), (3, 3), (1, 1), (1, 1), (1, 1), 1),
]


@pytest.mark.noleakcheck
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("geometry", TAPPED_WEIGHT_GEOMETRIES)
def test_weight_gradient_by_taps_every_gemm_kernel(dtype, geometry):
    """The weight gradient read in place, channels last, through the
    tapped GEMM: every family this CPU runs (its tapped tiles, usual and
    narrow), one thread and two (row blocks split over threads, each
    adding its own rows of the sums)."""
    _, _, _, image, kernel, stride, pad, dilation, groups = geometry
    rng = np.random.default_rng(3)
    x = rng.standard_normal((geometry[0], geometry[1], *image)).astype(dtype)
    w = rng.standard_normal((geometry[2], geometry[1] // groups, *kernel)).astype(dtype)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    out_shape = reference_conv(x64, w64, stride, pad, dilation, groups).shape
    g = rng.standard_normal(out_shape).astype(dtype)
    _, expected = reference_conv(x64, w64, stride, pad, dilation, groups,
                                 grad=g.astype(np.float64))
    product = _C._conv2d_backward_weight if len(image) == 2 else _C._conv3d_backward_weight
    ints = (*stride, *pad, *dilation, groups)
    tolerance = 1e-4 if dtype == np.float32 else 1e-12
    for _ in _each_gemm_kernel_and_thread_count():
        got = product(ember.tensor(g), ember.tensor(x), *kernel, *ints).numpy()
        np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)


@st.composite
def stride_one_geometries(draw):
    """Stride-1 2-D geometries whose panels hit the gathers' edges: output
    lines of any width (not a multiple of the 8 or 4 values a transposed
    block or a 32-byte chunk holds, or narrower than one), 1 to 3 input
    channels (depth = channels * kh * kw short of a panel's columns) and,
    with a few samples side by side, line runs cut by the GEMM's KC
    blocks."""
    kh, kw, pad = draw(st.integers(1, 3)), draw(st.integers(1, 5)), draw(st.integers(0, 2))
    height = max(1, kh - 2 * pad) + draw(st.integers(0, 5))
    width = max(1, kw - 2 * pad) + draw(st.integers(0, 18))
    return (draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 9)),
            (height, width), (kh, kw), (1, 1), (pad, pad), (1, 1), 1)


@pytest.mark.noleakcheck
@settings(max_examples=30, deadline=None)
@given(geometry=stride_one_geometries(), dtype=st.sampled_from([np.float64, np.float32]),
       family=st.sampled_from(["generic", "avx2", "avx512"]), seed=st.integers(0, 2**16))
def test_gathers_at_block_edges(geometry, dtype, family, seed):
    """All three products under each GEMM family this CPU runs (its own
    panel width): the forward's and the input gradient's gather_b (a panel
    row's chunks from one line run, two, or more: Note [Gathering a panel
    row by selects]) and the weight gradient's gather_bt (transposed blocks
    cut short at a run's end, columns past the last tap: Note [Transposing
    the weight gradient's panel])."""
    x, w, b, _ = _operands(dtype, geometry)
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(x.shape).astype(dtype), rng.standard_normal(w.shape).astype(dtype)
    pad = geometry[6]
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    out = reference_conv2d(x64, w64, (1, 1), pad, (1, 1), 1)
    g = rng.standard_normal(out.shape).astype(dtype)
    expected = (out + b.reshape(1, -1, 1, 1),
                *reference_conv2d(x64, w64, (1, 1), pad, (1, 1), 1, grad=g.astype(np.float64)))
    saved = _C._gemm_kernel()
    try:
        _C._gemm_kernel(family)
    except RuntimeError:
        return  # not on this CPU
    try:
        _assert_products_close(_ember_products(x, w, b, g, geometry), expected, dtype)
    finally:
        _C._gemm_kernel(saved)


def test_empty_batch_gradients():
    """No samples: an empty input gradient and a zero weight gradient, on
    both input-gradient routes (stride 1 and 2)."""
    g = ember.ones(0, 3, 4, 4)
    w = ember.ones(3, 2, 3, 3)
    for stride, image in ((1, 4), (2, 7)):
        grad_x = _C._conv2d_backward_input(ember.ones(0, 3, 4, 4), w, image, image, stride,
                                           stride, 1, 1, 1, 1, 1)
        assert grad_x.shape == (0, 2, image, image)
    grad_w = _C._conv2d_backward_weight(g, ember.ones(0, 2, 4, 4), 3, 3, 1, 1, 1, 1, 1, 1, 1)
    assert grad_w.tolist() == np.zeros((3, 2, 3, 3)).tolist()


def test_direct_path_and_empty_batch():
    x = ember.ones(0, 2, 3, 3)
    w = ember.ones(3, 2, 1, 1)
    assert _C._conv2d(x, w, None, 1, 1, 0, 0, 1, 1, 1).shape == (0, 3, 3, 3)
    grad_w = _C._conv2d_backward_weight(ember.ones(0, 3, 3, 3), x, 1, 1, 1, 1, 0, 0, 1, 1, 1)
    assert grad_w.tolist() == np.zeros((3, 2, 1, 1)).tolist()
    ones = _C._conv2d(ember.ones(1, 2, 2, 2), w, None, 1, 1, 0, 0, 1, 1, 1)
    assert ones.tolist() == np.full((1, 3, 2, 2), 2.0).tolist()


@pytest.mark.parametrize("call, error, match", [
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3), ember.ones(1, 2, 1, 1), None), TypeError,
     "takes 10 arguments"),
    (lambda: _C._conv2d([1], ember.ones(1, 2, 1, 1), None, 1, 1, 0, 0, 1, 1, 1), TypeError,
     "must be Tensor"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3), ember.ones(1, 2, 1, 1), 3, 1, 1, 0, 0, 1, 1, 1),
     TypeError, "must be Tensor"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3).transpose(2, 3).contiguous().transpose(2, 3),
                        ember.ones(1, 2, 1, 1), None, 1, 1, 0, 0, 1, 1, 1),
     RuntimeError, "contiguous"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3, dtype=ember.int64),
                        ember.ones(1, 2, 1, 1, dtype=ember.int64), None, 1, 1, 0, 0, 1, 1, 1),
     RuntimeError, "float32 or float64"),
    (lambda: _C._conv2d(ember.ones(1, 3, 3, 3), ember.ones(1, 2, 1, 1), None, 1, 1, 0, 0, 1, 1, 1),
     RuntimeError, "channels and groups"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3), ember.ones(1, 2, 5, 1), None, 1, 1, 0, 0, 1, 1, 1),
     RuntimeError, "larger than the padded input"),
    # a dilated kernel overshooting the input by less than the stride: C's
    # division toward zero counted one output row, whose taps read past it
    (lambda: _C._conv2d(ember.ones(1, 1, 2, 100), ember.ones(1, 1, 2, 1), None, 2, 1, 0, 0, 2, 1,
                        1), RuntimeError, "larger than the padded input"),
    (lambda: _C._conv2d_backward_weight(ember.ones(1, 1, 1, 100), ember.ones(1, 1, 2, 100), 2, 1,
                                        2, 1, 0, 0, 2, 1, 1),
     RuntimeError, "larger than the padded input"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3), ember.ones(1, 2, 1, 1), ember.ones(2), 1, 1, 0, 0,
                        1, 1, 1), RuntimeError, "bad bias"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3), ember.ones(1, 2, 1, 1), None, 0, 1, 0, 0, 1, 1, 1),
     RuntimeError, "stride and dilation must be positive"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3), ember.ones(1, 2, 1, 1), None, 1, 1, 0, 0, 1, 1, 0),
     RuntimeError, "groups must be positive"),
    (lambda: _C._conv2d_backward_input(ember.ones(1, 1, 2, 2), ember.ones(1, 2, 1, 1), 3, 3, 1, 1,
                                       0, 0, 1, 1, 1), RuntimeError, "wrong shape"),
    (lambda: _C._conv2d_backward_weight(ember.ones(1, 1, 2, 2), ember.ones(1, 3, 3, 3), 1, 1, 1, 1,
                                        0, 0, 1, 1, 2), RuntimeError, "groups must divide"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3), ember.ones(1, 2, 1, 1), None, 1, 1, 0, 0, 1, 1,
                        2**70), RuntimeError, "Overflow when unpacking long"),
    # padded extents whose product wraps to 0 (the buffer would be sized 0)
    (lambda: _C._conv2d(ember.ones(1, 1, 2, 2), ember.ones(1, 1, 1, 1), None, 2**33, 2**33,
                        2**31 - 1, 2**31 - 1, 1, 1, 1), MemoryError, "padded input is too large"),
    # in + 2 * pad and dilation * (kernel - 1) past int64
    (lambda: _C._conv2d(ember.ones(1, 1, 2, 2), ember.ones(1, 1, 1, 1), None, 1, 1,
                        2**62, 0, 1, 1, 1), RuntimeError, "padding or dilation is too large"),
    (lambda: _C._conv2d(ember.ones(1, 1, 2, 2), ember.ones(1, 1, 3, 3), None, 1, 1, 0, 0,
                        2**62, 1, 1), RuntimeError, "padding or dilation is too large"),
])
def test_bad_arguments_raise(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_input_gradient_of_a_layer_without_output_channels_is_zero():
    """Arranging a weight with no rows once divided by their count (SIGFPE)."""
    grad_input = _C._conv2d_backward_input(ember.ones(1, 0, 8, 8), ember.ones(0, 4, 3, 3),
                                           8, 8, 1, 1, 1, 1, 1, 1, 1)
    assert grad_input.shape == (1, 4, 8, 8)
    assert not grad_input.numpy().any()


def test_an_index_that_rebinds_the_input_sees_the_pinned_tensor():
    """An int argument's __index__ runs Python after the tensors were passed:
    the kernel must read the tensors the call was made with."""
    x = ember.ones(1, 1, 3, 3)
    w = ember.ones(1, 1, 2, 2)

    class Rebinding:
        def __index__(self):
            x.data = ember.zeros(1, 1, 1, 1)   # frees the old THTensor unless pinned
            return 1

    out = _C._conv2d(x, w, None, Rebinding(), 1, 0, 0, 1, 1, 1)
    assert out.tolist() == np.full((1, 1, 2, 2), 4.0).tolist()


# ---- 3-D (Note [Three spatial dims, one code path]) ---------------------------------

def reference_conv(x, w, stride, pad, dilation, groups, grad=None):
    """The definition for any number of spatial dims, one kernel tap and one
    group at a time: tap t reads the padded input at position * stride +
    t * dilation.  The output, or with `grad` (output-shaped) the input and
    weight gradients."""
    o, cg = w.shape[:2]
    og = o // groups
    padded = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out_size = [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, p, d, k, s in
                zip(x.shape[2:], pad, dilation, w.shape[2:], stride)]
    out = np.zeros((x.shape[0], o, *out_size))
    grad_x, grad_w = np.zeros_like(padded), np.zeros_like(w)
    for tap in np.ndindex(*w.shape[2:]):
        window = (Ellipsis, *(slice(t * d, t * d + s * (m - 1) + 1, s)
                              for t, d, s, m in zip(tap, dilation, stride, out_size)))
        for g in range(groups):
            ins, outs = slice(g * cg, (g + 1) * cg), slice(g * og, (g + 1) * og)
            taps = w[(outs, slice(None), *tap)]             # og x cg
            if grad is None:
                out[:, outs] += np.einsum("nc...,oc->no...", padded[:, ins][window], taps)
                continue
            grad_x[:, ins][window] += np.einsum("no...,oc->nc...", grad[:, outs], taps)
            reads, grads = padded[:, ins][window], grad[:, outs]
            grad_w[(outs, slice(None), *tap)] += np.einsum(
                "ncp,nop->oc", reads.reshape(*reads.shape[:2], np.prod(out_size)),
                grads.reshape(*grads.shape[:2], np.prod(out_size)))
    if grad is None:
        return out
    inside = (Ellipsis, *(slice(p, p + n) for p, n in zip(pad, x.shape[2:])))
    return grad_x[inside], grad_w


@st.composite
def conv3d_geometries(draw):
    """(batch, in, out, volume, kernel, stride, pad, dilation, groups) whose
    kernel fits the padded volume; each dim drawn on its own."""
    groups = draw(st.integers(1, 2))
    cin, cout = groups * draw(st.integers(1, 3)), groups * draw(st.integers(1, 3))
    kernel, stride, pad, dilation, volume = [], [], [], [], []
    for _ in range(3):
        k, d, p = draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.integers(0, 2))
        kernel.append(k), dilation.append(d), pad.append(p), stride.append(
            draw(st.integers(1, 3)))
        volume.append(max(1, d * (k - 1) + 1 - 2 * p) + draw(st.integers(0, 4)))
    return (draw(st.integers(0, 2)), cin, cout, tuple(volume), tuple(kernel), tuple(stride),
            tuple(pad), tuple(dilation), groups)


def _conv3d_products(x, w, b, g, geometry):
    """ember's output, input gradient and weight gradient through _C._conv3d*."""
    _, _, _, volume, kernel, stride, pad, dilation, groups = geometry
    ints = (*stride, *pad, *dilation, groups)
    out = _C._conv3d(ember.tensor(x), ember.tensor(w), ember.tensor(b), *ints).numpy()
    grad_x = _C._conv3d_backward_input(ember.tensor(g), ember.tensor(w), *volume, *ints)
    grad_w = _C._conv3d_backward_weight(ember.tensor(g), ember.tensor(x), *kernel, *ints)
    return out, grad_x.numpy(), grad_w.numpy()


@settings(max_examples=40, deadline=None)
@given(geometry=conv3d_geometries(), dtype=st.sampled_from([np.float64, np.float32]),
       seed=st.integers(0, 2**16))
def test_conv3d_products_match_numpy(geometry, dtype, seed):
    """All three products on NCDHW volumes: strides, padding, dilation and
    groups per dim, both input-gradient routes (stride 1 or not), empty
    batches, 1x1x1 kernels (the direct path when unpadded)."""
    _, _, _, _, _, stride, pad, dilation, groups = geometry
    x, w, b, _ = _operands(dtype, geometry)
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal(x.shape).astype(dtype), rng.standard_normal(w.shape).astype(dtype)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    out = reference_conv(x64, w64, stride, pad, dilation, groups)
    g = rng.standard_normal(out.shape).astype(dtype)
    expected = (out + b.reshape(1, -1, 1, 1, 1),
                *reference_conv(x64, w64, stride, pad, dilation, groups, grad=g.astype(np.float64)))
    _assert_products_close(_conv3d_products(x, w, b, g, geometry), expected, dtype)


def test_reference_conv_agrees_with_the_2d_loops():
    """The tap-at-a-time definition above is the one the 2-D tests use."""
    geometry = GEOMETRIES[1]
    x, w, _, rng = _operands(np.float64, geometry)
    stride, pad, dilation, groups = geometry[5:]
    out = reference_conv2d(x, w, stride, pad, dilation, groups)
    g = rng.standard_normal(out.shape)
    np.testing.assert_allclose(reference_conv(x, w, stride, pad, dilation, groups), out)
    for ours, theirs in zip(reference_conv(x, w, stride, pad, dilation, groups, grad=g),
                            reference_conv2d(x, w, stride, pad, dilation, groups, grad=g)):
        np.testing.assert_allclose(ours, theirs)


@pytest.mark.parametrize("geometry", GEOMETRIES[:4])
def test_depth_one_volumes_are_the_2d_products(geometry):
    """A 2-D convolution is a 3-D one of depth 1: the 3-D entry points on
    the same data give the 2-D ones' results, bit for bit."""
    x, w, b, rng = _operands(np.float64, geometry)
    _, _, _, image, kernel, stride, pad, dilation, groups = geometry
    ints2 = (*stride, *pad, *dilation, groups)
    ints3 = (1, *stride, 0, *pad, 1, *dilation, groups)
    out = _C._conv2d(ember.tensor(x), ember.tensor(w), ember.tensor(b), *ints2).numpy()
    g = rng.standard_normal(out.shape)
    x3, w3, g3 = x[:, :, None], w[:, :, None], g[:, :, None]
    pairs = [
        (out, _C._conv3d(ember.tensor(x3), ember.tensor(w3), ember.tensor(b), *ints3)),
        (_C._conv2d_backward_input(ember.tensor(g), ember.tensor(w), *image, *ints2),
         _C._conv3d_backward_input(ember.tensor(g3), ember.tensor(w3), 1, *image, *ints3)),
        (_C._conv2d_backward_weight(ember.tensor(g), ember.tensor(x), *kernel, *ints2),
         _C._conv3d_backward_weight(ember.tensor(g3), ember.tensor(x3), 1, *kernel, *ints3)),
    ]
    for flat, volume in pairs:
        assert np.array_equal(np.asarray(flat)[:, :, None], volume.numpy())


@pytest.mark.noleakcheck
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("geometry", [
    (2, 3, 5, (4, 6, 7), (3, 2, 3), (1, 1, 1), (1, 0, 1), (1, 1, 1), 1),
    (2, 2, 3, (3, 2, 12), (2, 1, 3), (1, 1, 1), (1, 0, 1), (1, 1, 1), 1),
    (2, 2, 3, (3, 2, 13), (2, 1, 3), (1, 1, 1), (1, 0, 1), (1, 1, 1), 1),
])
def test_conv3d_every_gemm_kernel_and_thread_count(dtype, geometry):
    """The 3-D products on each GEMM family this CPU runs, one thread and
    two: 5 output channels (a partial MR tile), 4 x 6 x 7 outputs of 2
    samples side by side (a partial last panel); and directly by taps
    (Note [Direct convolution by taps]) along 12-wide lines (AVX2's and
    the portable family's 6-position blocks) and 13-wide ones (one short
    block of AVX-512's 14), lines running on across depth and samples."""
    x, w, b, rng = _operands(dtype, geometry)
    stride, pad, dilation, groups = geometry[5:]
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    out_shape = reference_conv(x64, w64, stride, pad, dilation, groups).shape
    g = rng.standard_normal(out_shape).astype(dtype)
    expected = (reference_conv(x64, w64, stride, pad, dilation, groups) + b.reshape(1, -1, 1, 1, 1),
                *reference_conv(x64, w64, stride, pad, dilation, groups, grad=g.astype(np.float64)))
    for _ in _each_gemm_kernel_and_thread_count():
        _assert_products_close(_conv3d_products(x, w, b, g, geometry), expected, dtype)


_ONES5 = (1, 1, 1, 0, 0, 0, 1, 1, 1, 1)   # stride, padding, dilation, groups


@pytest.mark.parametrize("call, error, match", [
    (lambda: _C._conv3d(ember.ones(1, 2, 3, 3, 3), ember.ones(1, 2, 1, 1, 1), None,
                        1, 1, 0, 0, 1, 1, 1), TypeError, "takes 13 arguments"),
    (lambda: _C._conv3d(ember.ones(1, 2, 3, 3), ember.ones(1, 2, 1, 1), None, *_ONES5),
     RuntimeError, "contiguous 5-D"),
    (lambda: _C._conv2d(ember.ones(1, 2, 3, 3, 3), ember.ones(1, 2, 1, 1, 1), None,
                        1, 1, 0, 0, 1, 1, 1), RuntimeError, "contiguous 4-D"),
    (lambda: _C._conv3d(ember.ones(1, 2, 3, 3, 3), ember.ones(1, 2, 4, 1, 1), None, *_ONES5),
     RuntimeError, "larger than the padded input"),
    (lambda: _C._conv3d(ember.ones(1, 1, 2, 3, 3), ember.ones(1, 1, 2, 1, 1), None,
                        2, 1, 1, 0, 0, 0, 2, 1, 1, 1), RuntimeError, "larger than the padded input"),
    (lambda: _C._conv3d(ember.ones(1, 2, 3, 3, 3), ember.ones(1, 2, 1, 1, 1), None,
                        1, 1, 1, -1, 0, 0, 1, 1, 1, 1), RuntimeError, "padding non-negative"),
    (lambda: _C._conv3d(ember.ones(1, 2, 3, 3, 3), ember.ones(1, 2, 1, 1, 1), None,
                        1, 1, 1, 0, 0, 0, 0, 1, 1, 1), RuntimeError, "dilation must be positive"),
    (lambda: _C._conv3d_backward_input(ember.ones(1, 1, 2, 3, 3), ember.ones(1, 2, 1, 1, 1),
                                       3, 3, 3, *_ONES5), RuntimeError, "wrong shape"),
    (lambda: _C._conv3d_backward_weight(ember.ones(1, 1, 3, 3, 2), ember.ones(1, 2, 3, 3, 3),
                                        1, 1, 1, *_ONES5), RuntimeError, "wrong shape"),
    (lambda: _C._conv3d_backward_weight(ember.ones(1, 1, 3, 3, 3), ember.ones(1, 3, 3, 3, 3),
                                        1, 1, 1, *_ONES5[:-1], 2), RuntimeError,
     "groups must divide"),
])
def test_conv3d_bad_arguments_raise(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_conv3d_index_that_rebinds_the_input_sees_the_pinned_tensor():
    """As the 2-D test above, through the 3-D entry point's last int."""
    x = ember.ones(1, 1, 2, 3, 3)
    w = ember.ones(1, 1, 2, 2, 2)

    class Rebinding:
        def __index__(self):
            x.data = ember.zeros(1, 1, 1, 1, 1)   # frees the old THTensor unless pinned
            return 1

    out = _C._conv3d(x, w, None, 1, 1, 1, 0, 0, 0, 1, 1, 1, Rebinding())
    assert out.tolist() == np.full((1, 1, 1, 2, 2), 8.0).tolist()
