"""bfloat16 products on both of their paths (Note [Half-precision matmul]).

With the avx512 GEMM family on a CPU with AVX512-BF16 a bfloat16 product
runs vdpbf16ps on packed pairs of k (c/th/THBlasBF16.c); with any other
family it runs the float32 GEMM on widened copies.  Both accumulate in
float32 and round each result once, so on either path the result must be
within float32 summation error of the exact product, then one rounding to
bfloat16.  NumPy (float64) is the oracle; the module needs no torch, so the
leak gates run it.
"""

import numpy as np
import pytest

import ember
from ember import _C


def gemm_families():
    families = []
    saved = _C._gemm_kernel()
    for name in ("avx512", "avx2", "generic"):
        try:
            _C._gemm_kernel(name)
        except RuntimeError:
            continue
        families.append(name)
    _C._gemm_kernel(saved)
    return families


@pytest.fixture(params=gemm_families())
def gemm_family(request):
    saved = _C._gemm_kernel()
    _C._gemm_kernel(request.param)
    yield request.param
    _C._gemm_kernel(saved)


def cpu_has_avx512_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            return "avx512_bf16" in f.read()
    except OSError:
        return False


def test_the_dot_path_is_taken_exactly_with_avx512_bf16(gemm_family):
    expected = gemm_family == "avx512" and cpu_has_avx512_bf16()
    assert _C._gemm_blocking()["bfloat16_dot"] == expected


def operand(shape, transposed, seed):
    """A bfloat16 operand of `shape` and its values as float64: row-major, or
    the transpose of a row-major tensor (so k runs along memory or across)."""
    rng = np.random.default_rng(seed)
    stored = shape[:-2] + (shape[-1], shape[-2]) if transposed else shape
    t = ember.from_numpy(rng.standard_normal(stored).astype(np.float32)).bfloat16()
    if transposed:
        t = t.transpose(-1, -2)
    return t, t.double().numpy()


def assert_within_float32_sums(got, a, b, c=None, alpha=1.0, beta=0.0):
    """got (bfloat16) is alpha * a @ b + beta * c, up to float32 sums over k
    (k + 2 units of 2^-24 of the |a| @ |b| scale) and one rounding."""
    exact = alpha * (a @ b)
    if c is not None:
        exact = exact + beta * c
    scale = abs(alpha) * (np.abs(a) @ np.abs(b))
    bound = scale * (a.shape[-1] + 2) * 2.0 ** -24 + np.abs(exact) * 2.0 ** -8 + 1e-30
    assert got.dtype == ember.bfloat16
    diff = np.abs(got.double().numpy() - exact)
    assert (diff <= bound).all(), float((diff - bound).max())


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (2, 3, 2), (14, 32, 32), (15, 33, 31),
                                   (29, 255, 65), (64, 513, 96), (300, 200, 7)])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)],
                         ids=["nn", "tn", "nt", "tt"])
def test_every_layout_and_tile_edge(gemm_family, m, k, n, ta, tb):
    (ea, a), (eb, b) = operand((m, k), ta, m + k), operand((k, n), tb, k + n)
    assert_within_float32_sums(ea @ eb, a, b)


def test_split_over_threads_and_blocks(gemm_family):
    # k past one KC block, m and n past one thread's band
    (ea, a), (eb, b) = operand((200, 1100), False, 1), operand((1100, 180), True, 2)
    assert_within_float32_sums(ea @ eb, a, b)


@pytest.mark.parametrize("batch_a,batch_b", [((3,), (3,)), ((2, 3), (3,)), ((4,), ())])
def test_batched_and_broadcast(gemm_family, batch_a, batch_b):
    (ea, a), (eb, b) = operand(batch_a + (20, 31), False, 3), operand(batch_b + (31, 40), True, 4)
    got = ea @ eb
    batch = np.broadcast_shapes(batch_a, batch_b)
    assert tuple(got.shape) == batch + (20, 40)
    assert_within_float32_sums(got, np.broadcast_to(a, batch + (20, 31)),
                               np.broadcast_to(b, batch + (31, 40)))


def test_addmm_baddbmm_and_out(gemm_family):
    (ea, a), (eb, b), (ec, c) = (operand((33, 45), False, 5), operand((45, 50), True, 6),
                                 operand((33, 50), False, 7))
    assert_within_float32_sums(ember.addmm(ec, ea, eb, beta=0.5, alpha=-2), a, b, c,
                               alpha=-2, beta=0.5)
    out = ember.empty(50, 33, dtype=ember.bfloat16).t()  # column-major
    ember.matmul(ea, eb, out=out)
    assert_within_float32_sums(out, a, b)
    (e1, b1), (e2, b2), (ebias, bias) = (operand((2, 9, 17), True, 8),
                                         operand((2, 17, 5), False, 9),
                                         operand((2, 9, 5), False, 10))
    assert_within_float32_sums(ember.baddbmm(ebias, e1, e2, beta=2, alpha=0.25),
                               b1, b2, bias, alpha=0.25, beta=2)


def test_degenerate_products(gemm_family):
    bf16 = ember.bfloat16
    assert (ember.ones(4, 0, dtype=bf16) @ ember.ones(0, 3, dtype=bf16)).tolist() == [[0.0] * 3] * 4
    # beta == 0 never reads c; alpha == 0 never reads a and b (BLAS's rules)
    nan = float("nan")
    got = ember.addmm(ember.full((4, 3), nan, dtype=bf16), ember.ones(4, 5, dtype=bf16),
                      ember.ones(5, 3, dtype=bf16), beta=0)
    assert got.tolist() == [[5.0] * 3] * 4
    got = ember.addmm(ember.ones(4, 3, dtype=bf16), ember.full((4, 5), nan, dtype=bf16),
                      ember.ones(5, 3, dtype=bf16), alpha=0, beta=3)
    assert got.tolist() == [[3.0] * 3] * 4


def test_agrees_with_torch_on_every_path(gemm_family):
    torch = pytest.importorskip("torch")
    (ea, _), (eb, _) = operand((70, 130), False, 11), operand((130, 90), True, 12)
    ta, tb = torch.from_dlpack(ea.contiguous()), torch.from_dlpack(eb.contiguous())
    got = torch.from_dlpack((ea @ eb).contiguous())
    torch.testing.assert_close(got.float(), (ta @ tb).float(), rtol=6.4e-2, atol=1e-5)
