"""ember's CUDA operators end to end, without a GPU.

ember.cuda's launcher plans each call on CUDA tensors down to a generated
kernel and its arguments, and a runtime loads and launches it
(ember.cuda._runtime).  Here the runtime is tests/cuda_emulation.py's
EmulatedRuntime: the same kernel sources, compiled by g++ with a header
that emulates blockIdx/threadIdx, run on host memory that a host allocator
lends to the 'cuda' device.  So everything but the last step (CuPy's
cuModuleLoadData and cuLaunchKernel) runs: the C dispatch, the operator
table, type promotion, broadcasting and strides, out= and in-place forms,
the copies and the kernels' stores.  Values are compared with ember's CPU
operators, exactly (the reductions of floats to rounding, as their
accumulation order differs; see ember/cuda/_reduce.py).
"""

import ctypes
import gc
import os
import re

import numpy as np
import pytest

import ember
from ember.cuda import _fused, _launch, _launcher, _nvrtc, _random, _runtime

import cuda_emulation

pytestmark = pytest.mark.skipif(cuda_emulation.compiler() is None, reason="no g++")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]


class HostAllocator:
    """'cuda' memory that the host can read: what the emulated kernels use."""

    def __init__(self):
        self.blocks = set()

    def malloc(self, nbytes):
        address = _libc.malloc(max(nbytes, 1))
        if not address:
            raise MemoryError("malloc failed")
        self.blocks.add(address)
        return address

    def free(self, address):
        self.blocks.remove(address)
        _libc.free(address)


@pytest.fixture(autouse=True)
def seeded():
    """Every test draws the same numbers on every run, in any order (the
    CPU's inputs and the CUDA generator's masks alike)."""
    ember.manual_seed(0)


@pytest.fixture(scope="module")
def runtime():
    directory = os.path.join(ROOT, "build", "cuda_emulation")
    os.makedirs(directory, exist_ok=True)
    return cuda_emulation.EmulatedRuntime(directory)


@pytest.fixture(params=["emulated", "gpu"])
def device(request, runtime):
    """The emulated device (host allocator, ember's launcher, the emulated
    runtime; everything put back and no block left afterwards), or a real
    GPU through CuPy where there is one: the same tests check both."""
    if request.param == "gpu":
        if not ember.cuda.is_available():
            pytest.skip("needs CuPy and a GPU")
        ember.cuda.init()
        allocator = ember.memory.get_allocator("cuda")
        live = len(allocator.blocks)
        yield _runtime.current()
        ember.cuda.synchronize()
        assert len(allocator.blocks) == live
        return
    allocator = HostAllocator()
    previous_allocator = ember.memory.set_allocator(allocator, "cuda")
    previous_launcher = ember._C._register_device_backend("cuda", _launcher.launch)
    previous_runtime = _runtime.use(runtime)
    runtime.launches.clear()
    try:
        yield runtime
    finally:
        _runtime.use(previous_runtime)
        ember._C._register_device_backend("cuda", previous_launcher)
        ember.memory.set_allocator(previous_allocator, "cuda")
    assert allocator.blocks == set()


def _as_numpy(tensor):
    """A CPU tensor's values as an ndarray (NumPy has no bfloat16: its
    widening to float32 is exact)."""
    return (tensor.float() if tensor.dtype == ember.bfloat16 else tensor).numpy()


def same(got, expected):
    assert got.is_cuda and got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(_as_numpy(got.cpu()), _as_numpy(expected))


def test_copies_round_trip_through_the_runtime(device):
    host = ember.arange(12.0).view(3, 4)
    on_device = host.to("cuda")
    assert on_device.is_cuda and on_device.data_ptr() != host.data_ptr()
    same(on_device, host)
    assert on_device.t().contiguous().stride() == (3, 1)  # a copy kernel
    same(on_device.t().contiguous(), host.t().contiguous())
    if isinstance(device, cuda_emulation.EmulatedRuntime):
        assert "ember_where_bool_float32_float32_to_float32_strided" in device.launches
    same(on_device.clone(), host)


def test_binary_operators_with_broadcasting_numbers_and_promotion(device):
    a = ember.randn(4, 5)
    b = ember.randn(5)
    i = ember.arange(20, dtype=ember.int32).view(4, 5)
    da, db, di = a.cuda(), b.cuda(), i.cuda()
    same(da + db, a + b)
    same(da - 2.5, a - 2.5)
    same(3 - da, 3 - a)
    same(da * di, a * i)
    same(di / 3, i / 3)
    same(di // 3, i // 3)
    same(di % 7, i % 7)
    same(da ** 2, a ** 2)
    same(ember.add(da, db, alpha=2), ember.add(a, b, alpha=2))
    same(da.sub(db, alpha=0.5), a.sub(b, alpha=0.5))
    same(da.div(db, rounding_mode="floor"), a.div(b, rounding_mode="floor"))
    same(ember.maximum(da, db), ember.maximum(a, b))
    same(da.t() * 2, a.t() * 2)  # a strided operand
    same(da + ember.tensor(1.5, dtype=ember.float64), a + ember.tensor(1.5, dtype=ember.float64))
    same(di + ember.tensor(1.5, dtype=ember.float64), i + ember.tensor(1.5, dtype=ember.float64))


def test_comparisons_logic_and_ternary_operators(device):
    a, b = ember.randn(3, 4), ember.randn(3, 4)
    da, db = a.cuda(), b.cuda()
    same(da < db, a < b)
    same(da == 0, a == 0)
    same((da > 0) & (db > 0), (a > 0) & (b > 0))
    same(ember.where(da > db, da, db), ember.where(a > b, a, b))
    same(da.clamp(min=0), a.clamp(min=0))
    same(ember.clamp(da, -0.5, 0.5), ember.clamp(a, -0.5, 0.5))
    same(ember.addcmul(da, da, db, value=0.5), ember.addcmul(a, a, b, value=0.5))
    same(ember.lerp(da, db, 0.25), ember.lerp(a, b, 0.25))
    same(-da, -a)
    same(abs(da), abs(a))
    i = ember.tensor([-3, 0, 7], dtype=ember.int64)
    same(i.cuda().clamp(max=2), i.clamp(max=2))
    same(~(i.cuda() > 0), ~(i > 0))


def test_unary_float_operators(device):
    a = ember.randn(6, 7)
    da = a.cuda()
    for op in ("exp", "log1p", "sigmoid", "tanh", "relu", "sqrt", "gelu", "floor"):
        same(getattr(ember, op)(da), getattr(ember, op)(a))
    same(da.t().exp(), a.t().exp())
    with pytest.raises(NotImplementedError, match="float32, float64, float16 and bfloat16"):
        ember.exp(ember.arange(3).cuda())


def test_in_place_and_out_forms(device):
    a, b = ember.randn(3, 4), ember.randn(4)
    da, db = a.cuda(), b.cuda()
    pointer = da.data_ptr()
    da += db
    a += b
    same(da, a)
    da.mul_(2)
    a.mul_(2)
    same(da, a)
    da.exp_()
    a.exp_()
    same(da, a)
    assert da.data_ptr() == pointer
    out = ember.empty(3, 4, device="cuda")
    assert ember.add(da, 1, out=out) is out
    same(out, a + 1)
    i = ember.arange(4).cuda()
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        i.add_(0.5)
    # an out= of a dtype the result casts to: a cast kernel after the add
    wide = ember.empty(4, dtype=ember.float64, device="cuda")
    assert ember.add(i, 1, out=wide) is wide
    same(wide, ember.add(ember.arange(4), 1, out=ember.empty(4, dtype=ember.float64)))


def test_reductions(device):
    a = ember.randn(4, 5, 6, dtype=ember.float64)
    i = ember.randint(-50, 50, (4, 5, 6))
    da, di = a.cuda(), i.cuda()
    same(di.sum(), i.sum())
    same(di.sum(dim=1), i.sum(dim=1))
    same(di.amax(dim=(0, 2), keepdim=True), i.amax(dim=(0, 2), keepdim=True))
    same(di.argmax(dim=2), i.argmax(dim=2))
    values, indices = da.max(dim=1)
    same(values, a.max(dim=1).values)
    same(indices, a.max(dim=1).indices)
    assert type(da.min(dim=0)).__name__ == "min"
    same(da.permute(2, 0, 1).amin(dim=1), a.permute(2, 0, 1).amin(dim=1))
    for got, expected in [(da.mean(dim=0), a.mean(dim=0)), (da.sum(), a.sum()),
                          (da.prod(dim=2), a.prod(dim=2))]:
        assert got.shape == expected.shape
        np.testing.assert_allclose(got.cpu().numpy(), expected.numpy(), rtol=1e-12)
    assert float(da.max()) == float(a.max())


def test_statistics_softmax_and_scans(device):
    a = ember.randn(4, 7, dtype=ember.float64)
    da = a.cuda()
    close = lambda got, expected: np.testing.assert_allclose(  # noqa: E731
        got.cpu().numpy(), expected.numpy(), rtol=1e-12, atol=1e-12)
    close(da.var(dim=1), a.var(dim=1))
    close(da.std(dim=0, unbiased=False, keepdim=True), a.std(dim=0, unbiased=False, keepdim=True))
    close(ember.logsumexp(da, 1), ember.logsumexp(a, 1))
    close(da.softmax(-1), a.softmax(-1))
    close(ember.log_softmax(da.t(), 1), ember.log_softmax(a.t(), 1))
    close(da.cumsum(1), a.cumsum(1))
    close(da.norm(), a.norm())
    close(ember.linalg.vector_norm(da, 1, dim=0), ember.linalg.vector_norm(a, 1, dim=0))
    x = a.cuda().requires_grad_()
    (x.softmax(1) * da).sum().backward()  # softmax's backward, on the device
    expected = a.clone().requires_grad_()
    (expected.softmax(1) * a).sum().backward()
    assert x.grad.is_cuda
    close(x.grad, expected.grad)


def test_a_norms_dtype_is_checked_before_the_input_is_converted(device):
    """THTensor_newNorm's errors, on the device as on the host: the input
    must be floating and dtype= may widen it, never narrow it."""
    for values, dtype in ((ember.arange(6), ember.float32), (ember.ones(3), ember.float16),
                          (ember.ones(3, dtype=ember.float16), ember.bfloat16),
                          (ember.ones(3), ember.int32)):
        with pytest.raises(RuntimeError) as on_host:
            values.norm(dtype=dtype)
        with pytest.raises(RuntimeError, match=f"^{re.escape(str(on_host.value))}$"):
            values.cuda().norm(dtype=dtype)
    widened = ember.ones(3, dtype=ember.float16).cuda().norm(dtype=ember.float32)
    assert widened.dtype == ember.float32 and abs(widened.item() - 3 ** 0.5) < 1e-6
    # the errors' tracebacks hold device tensors in a reference cycle (the
    # test leaks no block when the collector runs): collect it before the
    # fixture counts the blocks
    del widened
    gc.collect()


def test_autograd_runs_through_the_launcher(device):
    x = ember.randn(5, 3, dtype=ember.float64)
    w = ember.randn(3, dtype=ember.float64)
    dx = x.cuda().requires_grad_()
    dw = w.cuda().requires_grad_()
    ((dx * dw).sigmoid() * 2 + dx).sum().backward()
    hx, hw = x.clone().requires_grad_(), w.clone().requires_grad_()
    ((hx * hw).sigmoid() * 2 + hx).sum().backward()
    assert dx.grad.is_cuda
    np.testing.assert_allclose(dx.grad.cpu().numpy(), hx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(dw.grad.cpu().numpy(), hw.grad.numpy(), rtol=1e-12)


def test_what_has_no_kernel_still_says_so(device):
    t = ember.randn(3).cuda()
    with pytest.raises(NotImplementedError, match="'Tensor.cummax' has no CUDA kernel yet"):
        t.cummax(0)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        t + ember.ones(3)


def test_factories_fill_on_the_device(device):
    same(ember.zeros(2, 3, device="cuda"), ember.zeros(2, 3))
    same(ember.ones((4,), dtype=ember.int16, device="cuda"), ember.ones(4, dtype=ember.int16))
    same(ember.full((2, 2), 7, device="cuda"), ember.full((2, 2), 7))
    t = ember.randn(3, 2).cuda()
    same(ember.ones_like(t), ember.ones(3, 2))
    same(ember.full_like(t, -1.5), ember.full((3, 2), -1.5))
    same(ember.zeros_like(t, dtype=ember.bool), ember.zeros(3, 2, dtype=ember.bool))
    assert not ember.zeros_like(t, device="cpu").is_cuda
    same(t.fill_(2.5), ember.full((3, 2), 2.5))
    same(t.t().zero_(), ember.zeros(2, 3))
    assert ember.ones(2, device="cuda", requires_grad=True).requires_grad


def test_methods_that_differ_from_their_functions(device):
    a, b = ember.randn(2, 3), ember.randn(2, 3)
    da, db = a.cuda(), b.cuda()
    same(da.where(da > 0, db), a.where(a > 0, b))
    same(da.double(), a.double())
    same((da > 0).long(), (a > 0).long())
    same(da.max(db), a.max(b))


def test_matrix_products_and_a_linear_layer(device):
    a, b = ember.randn(4, 3, dtype=ember.float64), ember.randn(3, 5, dtype=ember.float64)
    da, db = a.cuda(), b.cuda()
    close = lambda got, expected: np.testing.assert_allclose(  # noqa: E731
        got.detach().cpu().numpy(), expected.detach().numpy(), rtol=1e-12, atol=1e-12)
    close(da @ db, a @ b)
    close(ember.mm(da, db), ember.mm(a, b))
    close(da.t() @ da, a.t() @ a)  # transposed operands: no copy
    close(ember.matmul(da, db[:, 0]), ember.matmul(a, b[:, 0]))
    batch = ember.randn(2, 4, 3, dtype=ember.float64)
    close(ember.bmm(batch.cuda(), db.expand(2, 3, 5)), ember.bmm(batch, b.expand(2, 3, 5)))
    close(ember.addmm(db[0], da, db, beta=0.5, alpha=2), ember.addmm(b[0], a, b, beta=0.5, alpha=2))
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
        da @ da
    with pytest.raises(RuntimeError, match="\"addmm_cuda\" not implemented for 'Long'"):
        ember.arange(4).view(2, 2).cuda() @ ember.arange(4).view(2, 2).cuda()
    layer = ember.nn.Linear(3, 2).double()
    x = ember.randn(5, 3, dtype=ember.float64)
    expected = layer(x)
    expected.sum().backward()
    grads = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    layer.cuda()
    got = layer(x.cuda())
    got.sum().backward()
    close(got, expected)
    for p, g in zip(layer.parameters(), grads):
        assert p.is_cuda and p.grad.is_cuda
        close(p.grad, g)


def test_basic_indexing_is_a_view_and_setitem_writes_through(device):
    a = ember.arange(24.0).view(2, 3, 4)
    da = a.cuda()
    for index in [0, -1, (1, 2), (slice(None), 1), (Ellipsis, 2), (None, 0, slice(1, None, 2)),
                  (slice(None, None, 2), Ellipsis, None), (1, slice(3, 1))]:
        view = da[index]
        assert view.data_ptr() >= da.data_ptr()
        same(view, a[index])
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"):
        da[0, 3]
    with pytest.raises(IndexError, match="too many indices"):
        da[0, 0, 0, 0]
    da[0, :, 1] = 5.0
    a[0, :, 1] = 5.0
    da[1] = ember.ones(4)
    a[1] = ember.ones(4)
    same(da, a)


def test_cat_and_stack(device):
    a, b = ember.randn(2, 3), ember.randn(2, 5)
    i = ember.arange(6, dtype=ember.int32).view(2, 3)
    same(ember.cat([a.cuda(), b.cuda()], dim=1), ember.cat([a, b], dim=1))
    same(ember.cat([a.cuda(), a.cuda().t().t()]), ember.cat([a, a]))
    same(ember.cat([a.cuda(), i.cuda()], dim=-1), ember.cat([a, i], dim=-1))  # promoted
    same(ember.stack([a.cuda(), a.cuda() * 2], dim=1), ember.stack([a, a * 2], dim=1))
    with pytest.raises(RuntimeError, match="Sizes of tensors must match except in dimension 0"):
        ember.cat([a.cuda(), b.cuda()])
    wider = ember.empty(4, 3, dtype=ember.float64, device="cuda")
    same(ember.cat([a.cuda(), a.cuda()], out=wider), ember.cat([a, a]).double())
    for join in (ember.cat, ember.stack):  # the CPU's (PyTorch's) TypeError
        with pytest.raises(TypeError, match="^torch.cat\\(\\): input types can't be cast to the "
                                            "desired output type Long$"):
            join([a.cuda(), a.cuda()], out=ember.empty(2, 2, 3, dtype=ember.int64,
                                                        device="cuda"))


@pytest.mark.skipif(not ember.cuda.is_available(), reason="needs CuPy and a GPU")
def test_work_on_a_stream_of_its_own_and_events_time_it():
    x = ember.randn(1000, 1000).cuda()
    side = ember.cuda.Stream()
    assert side != ember.cuda.default_stream() and ember.cuda.default_stream().cuda_stream == 0
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    side.wait_stream(ember.cuda.current_stream())  # x was written on the default stream
    with ember.cuda.stream(side):
        assert ember.cuda.current_stream() == side
        start.record()
        y = (x @ x).sum(dim=1)
        end.record()
        assert y.__cuda_array_interface__["stream"] == side.cuda_stream
    end.synchronize()
    assert start.elapsed_time(end) > 0 and side.query()
    np.testing.assert_allclose(y.cpu().numpy(), (x.cpu() @ x.cpu()).sum(dim=1).numpy(),
                               rtol=1e-3, atol=1e-2)


# ---- random numbers ----------------------------------------------------------------

def test_philox_reference_matches_random123s_known_answers():
    known = [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
             ((0xffffffff,) * 4, (0xffffffff,) * 2,
              (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
             ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
              (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
    for counter, key, expected in known:
        got = _random.philox([[c] for c in counter], [[k] for k in key])[:, 0]
        assert tuple(int(w) for w in got) == expected


def _words(seed, offset, groups):
    counters = np.arange(offset, offset + groups, dtype=np.uint64)
    return _random.philox([counters & 0xFFFFFFFF, counters >> 32, np.zeros(groups), np.zeros(groups)],
                  [np.full(groups, seed & 0xFFFFFFFF), np.full(groups, seed >> 32)])


def test_the_kernels_draw_philoxs_words(device):
    ember.cuda.manual_seed(1234)
    u = ember.rand(10, device="cuda").cpu().numpy()
    words = _words(1234, 0, 3)  # 10 float32 values: 3 groups of 4
    expected = ((words.T.reshape(-1)[:10] >> 8).astype(np.float64) / 2 ** 24).astype(np.float32)
    if isinstance(device, cuda_emulation.EmulatedRuntime):
        np.testing.assert_array_equal(u, expected)
    v = ember.rand(3, dtype=ember.float64, device="cuda").cpu().numpy()
    # the offset moved past the first call's 3 groups; a float64 takes two words
    words = _words(1234, 3, 2).T.reshape(-1, 2).astype(np.uint64)
    bits = ((words[:, 0] >> np.uint64(6)) << np.uint64(27)) | (words[:, 1] >> np.uint64(5))
    if isinstance(device, cuda_emulation.EmulatedRuntime):
        np.testing.assert_array_equal(v, bits[:3] / 2.0 ** 53)
    ember.cuda.manual_seed(1234)
    assert ember.rand(10, device="cuda").cpu().numpy().tolist() == u.tolist()


def test_distributions_and_the_generator_state(device):
    ember.manual_seed(7)  # seeds the CUDA generator too, as torch.manual_seed
    state = ember.cuda.get_rng_state() if ember.cuda.is_available() else None
    n = 20000
    normal = ember.randn(n, device="cuda").cpu().numpy()
    assert abs(normal.mean()) < 0.05 and abs(normal.std() - 1) < 0.05
    normal64 = ember.randn(n, dtype=ember.float64, device="cuda").cpu().numpy()
    assert abs(normal64.mean()) < 0.05 and abs(normal64.std() - 1) < 0.05
    uniform = ember.empty(100, 200, device="cuda").t().uniform_(-2, 3).cpu().numpy()
    assert uniform.min() >= -2 and uniform.max() < 3 and abs(uniform.mean() - 0.5) < 0.05
    ints = ember.randint(3, 9, (n,), device="cuda").cpu().numpy()
    assert ints.dtype == np.int64 and set(np.unique(ints)) == set(range(3, 9))
    shifted = ember.empty(n, device="cuda").normal_(5.0, 0.5).cpu().numpy()
    assert abs(shifted.mean() - 5) < 0.02
    like = ember.rand_like(ember.empty(2, 3, dtype=ember.float64, device="cuda"))
    assert like.dtype == ember.float64 and like.is_cuda
    if state is not None:
        ember.cuda.set_rng_state(state)
        np.testing.assert_array_equal(ember.randn(n, device="cuda").cpu().numpy(), normal)
    with pytest.raises(RuntimeError, match="'from' to be less than 'to'"):
        ember.randint(5, 5, (2,), device="cuda")
    with pytest.raises(RuntimeError, match=r"found from=2.5 > to=1 *$"):
        ember.empty(2, device="cuda").uniform_(2.5, 1)


def test_dropout_on_the_device(device):
    x = ember.ones(1000, 10).cuda()
    y = ember.nn.functional.dropout(x, p=0.25)
    kept = y.cpu().numpy()
    assert set(np.unique(kept)) <= {0.0, np.float32(1.0 / 0.75)}
    assert abs((kept == 0).mean() - 0.25) < 0.02


@pytest.mark.parametrize("dtype, digits", [(ember.float16, 11), (ember.bfloat16, 8)])
def test_16_bit_random_numbers_fill_their_own_format(device, dtype, digits):
    """As the CPU's samplers (tests/test_random_generators.py): each draw
    computed in float32 and rounded once to the format; uniform's u has
    the format's significant bits, and a draw that rounds up to `to` steps
    down one step of the format."""
    ember.cuda.manual_seed(3)
    n = 20000
    u = ember.rand(n, dtype=dtype, device="cuda")
    assert u.is_cuda and u.dtype == dtype and u.shape == (n,)
    values = u.cpu().float().numpy()
    assert values.min() >= 0 and values.max() < 1 and abs(values.mean() - 0.5) < 0.02
    assert np.all(values * 2**digits == np.floor(values * 2**digits))
    if isinstance(device, cuda_emulation.EmulatedRuntime):  # u is the words' top bits
        words = _words(3, 0, n // 4).T.reshape(-1)
        np.testing.assert_array_equal(values, (words >> (32 - digits)) / 2.0**digits)
    # 1 + u rounds to 2 for the largest u (a tie, to even): one draw in 2**digits
    wide = ember.empty(n, dtype=dtype, device="cuda").uniform_(1, 2).cpu().float().numpy()
    assert wide.min() >= 1 and wide.max() == 2 - 2.0**(1 - digits)
    normal = ember.randn(n, dtype=dtype, device="cuda").cpu().float().numpy()
    assert np.all(np.isfinite(normal))
    assert abs(normal.mean()) < 0.05 and abs(normal.std() - 1) < 0.05
    like = ember.randn_like(ember.empty(2, 3, dtype=dtype, device="cuda")).cpu()
    assert like.dtype == dtype
    base = ember.zeros(4, 6, dtype=dtype, device="cuda")
    base[:, ::2].normal_(5.0, 0.1)  # a strided view: drawn densely, copied in
    assert np.all(base[:, 1::2].cpu().float().numpy() == 0)
    assert np.all(np.abs(base[:, ::2].cpu().float().numpy() - 5) < 1)


def test_a_float32_uniform_draw_never_rounds_up_to_to(device):
    """Note [A uniform draw stays below high]: Philox word 2 of counter
    2330056 under seed 0 has its top 24 bits set, so u = 1 - 2**-24 and
    1 + u rounds to 2 in float32; the kernel stores 2's predecessor."""
    ember.cuda.manual_seed(0)
    _random.default_generator.offset = 2330056
    x = ember.empty(4, device="cuda").uniform_(1, 2).cpu().numpy()
    if isinstance(device, cuda_emulation.EmulatedRuntime):
        assert (_words(0, 2330056, 1)[2, 0] >> 8) == 2**24 - 1
        assert x[2] == np.nextafter(np.float32(2), np.float32(1))
    assert x.min() >= 1 and x.max() < 2


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16])
def test_dropout_of_a_16_bit_tensor_on_the_device(device, dtype):
    x = ember.ones(1000, 10, dtype=dtype).cuda()
    y = ember.nn.functional.dropout(x, p=0.25)
    assert y.is_cuda and y.dtype == dtype
    kept = y.cpu().float().numpy()
    scale = ember.tensor(1.0 / 0.75, dtype=dtype).float().item()
    assert set(np.unique(kept)) <= {0.0, scale}
    assert abs((kept == 0).mean() - 0.25) < 0.02


@pytest.mark.skipif(not _nvrtc.available(),
                    reason="NVRTC is not installed (pip install ember[cuda])")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_random_kernels_compile_without_spills(arch):
    cache = os.path.join(ROOT, "build", "cuda_kernels")
    for distribution, dtype in _random.kernel_keys():
        name = _random.kernel_name(distribution, dtype)
        compiled = _launch.compile_cached(_random.kernel_source(distribution, dtype), arch,
                                          _random.headers(), name=f"{name}.cu", directory=cache)
        assert compiled.spill_bytes[name] == 0 and compiled.registers[name] <= 64, \
            (name, compiled.registers[name], compiled.spill_bytes[name])


def test_load_with_map_location_cuda(device, tmp_path, monkeypatch):
    if isinstance(device, cuda_emulation.EmulatedRuntime):  # the emulated device stands in
        monkeypatch.setattr(ember.cuda, "is_available", lambda: True)
    layer = ember.nn.Linear(3, 2)
    path = tmp_path / "layer.pt"
    ember.save(layer.state_dict(), path)
    state = ember.load(path, map_location="cuda")
    assert all(t.is_cuda and t.grad_fn is None for t in state.values())
    moved = ember.nn.Linear(3, 2).cuda()
    moved.load_state_dict(state)
    same(moved.weight.detach(), layer.weight.detach())
    del state, moved
    gc.collect()  # a Module's bound forward makes a cycle


# ---- the jit: a fusion group is one generated kernel ---------------------------------

@ember.jit.script
def _chain(a, b):
    return 2 * a * a + 3 * b - a / (b + 1)


def test_a_fused_chain_is_one_kernel(device):
    a, b = ember.rand(1000), ember.rand(1000)
    expected = _chain(a, b)
    if isinstance(device, cuda_emulation.EmulatedRuntime):
        device.launches.clear()
    got = _chain(a.cuda(), b.cuda())
    np.testing.assert_allclose(got.cpu().numpy(), expected.numpy(), rtol=1e-6)
    if isinstance(device, cuda_emulation.EmulatedRuntime):
        assert len(device.launches) == 1 and device.launches[0].startswith("ember_fused_float32")
        device.launches.clear()
    # broadcasting is not fused on the GPU: the group runs op by op, as correct
    broadcast = _chain(a.cuda().view(10, 100), b.cuda()[:100])
    np.testing.assert_allclose(broadcast.cpu().numpy(),
                               _chain(a.view(10, 100), b[:100]).numpy(), rtol=1e-6)
    if isinstance(device, cuda_emulation.EmulatedRuntime):
        assert len(device.launches) > 1 and not any("fused" in k for k in device.launches)


@pytest.mark.skipif(not _nvrtc.available(),
                    reason="NVRTC is not installed (pip install ember[cuda])")
def test_the_fused_source_compiles_and_prints():
    a = ember.rand(4, dtype=ember.float64)
    source = _chain.cuda_source_for(a, a)
    assert source.count("__global__") == 1 and "fused_div::formula" in source
    name = source.split("__global__ void\n")[1].split("(")[0]
    compiled = _launch.compile_cached(source, "sm_90", _fused.headers(), name=f"{name}.cu",
                                      directory=os.path.join(ROOT, "build", "cuda_kernels"))
    assert compiled.spill_bytes[name] == 0 and compiled.registers[name] <= 64


# ---- indexing along a dim -------------------------------------------------------------

def test_gather_index_select_and_their_scatters(device):
    a = ember.randn(4, 6, dtype=ember.float64)
    da = a.cuda()
    index = ember.tensor([[0, 5, 5], [1, 2, 3], [5, 0, 4], [2, 2, 2]])
    same(da.gather(1, index.cuda()), a.gather(1, index))
    same(da.t().gather(0, index.t().cuda()), a.t().gather(0, index.t()))
    rows = ember.tensor([3, 0, 3], dtype=ember.int32)
    same(da.index_select(0, rows.cuda()), a.index_select(0, rows))
    same(ember.index_select(da, 1, rows.long().cuda()), ember.index_select(a, 1, rows.long()))
    close = lambda got, expected: np.testing.assert_allclose(  # noqa: E731
        got.cpu().numpy(), expected.numpy(), rtol=1e-12, atol=1e-12)
    src = ember.randn(4, 3, dtype=ember.float64)
    close(ember.zeros(4, 6, dtype=ember.float64).cuda().scatter_add(1, index.cuda(), src.cuda()),
          ember.zeros(4, 6, dtype=ember.float64).scatter_add(1, index, src))
    close(da.index_add(0, ember.tensor([1, 1, 0]).cuda(), da[:3], alpha=2),
          a.index_add(0, ember.tensor([1, 1, 0]), a[:3], alpha=2))
    same(da.masked_fill(da > 0, 7), a.masked_fill(a > 0, 7))
    i = ember.arange(6).view(2, 3)
    same(i.cuda().masked_fill(i.cuda() > 2, 0.5), i.masked_fill(i > 2, 0.5))  # stays int64
    same((da > 3).any(), (a > 3).any())
    same(da.all(dim=1), a.all(dim=1))
    with pytest.raises(RuntimeError, match="index 6 is out of bounds for dimension 1 with size 6"):
        da.gather(1, ember.tensor([[6]]).cuda())
    for bad in (4, -1):  # no negative indices, as on the CPU
        with pytest.raises(IndexError, match="index out of range in self"):
            da.index_select(0, ember.tensor([bad]).cuda())


def test_an_embedding_and_cross_entropy_train_on_the_device(device):
    embedding = ember.nn.Embedding(10, 4).double()
    tokens = ember.tensor([[1, 2, 9], [9, 0, 1]])
    targets = ember.tensor([3, 0, 1, 2, 2, 1])
    expected_loss = ember.nn.functional.cross_entropy(embedding(tokens).view(6, 4), targets)
    expected_loss.backward()
    expected_grad = embedding.weight.grad.clone()
    embedding.zero_grad()
    embedding.cuda()
    loss = ember.nn.functional.cross_entropy(embedding(tokens.cuda()).view(6, 4), targets.cuda())
    loss.backward()
    assert embedding.weight.grad.is_cuda
    np.testing.assert_allclose(float(loss), float(expected_loss), rtol=1e-12)
    np.testing.assert_allclose(embedding.weight.grad.cpu().numpy(), expected_grad.numpy(),
                               rtol=1e-12, atol=1e-15)


@pytest.mark.skipif(not _nvrtc.available(),
                    reason="NVRTC is not installed (pip install ember[cuda])")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_index_kernels_compile_without_spills(arch):
    from ember.cuda import _index
    cache = os.path.join(ROOT, "build", "cuda_kernels")
    programs = {}  # one NVRTC program per kind (the prelude's guard allows it)
    for key in _index.kernel_keys():
        programs.setdefault(key[0], []).append(
            (_index.kernel_name(*key), _index.kernel_source(*key)))
    programs["nonzero"] = [(_index.nonzero_kernel_name(dtype), _index.nonzero_source(dtype))
                           for dtype in _index.DTYPES]
    for kind, sources in programs.items():
        compiled = _launch.compile_cached("\n".join(source for _, source in sources), arch,
                                          _index.headers(), name=f"index_{kind}.cu",
                                          directory=cache)
        for name, _ in sources:
            assert compiled.spill_bytes[name] == 0 and compiled.registers[name] <= 64, \
                (name, compiled.registers[name])
    # gather and the five scatters of every dtype with both index dtypes,
    # take, put and put_add with int64 ones, offsets (int64) with both, nonzero
    assert sum(map(len, programs.values())) == 6 * 2 * len(_index.DTYPES) \
        + 3 * len(_index.DTYPES) + 2 + len(_index.DTYPES)


def test_normalisation_layers_take_their_composites_on_the_device(device):
    x = ember.randn(3, 4, 8, dtype=ember.float64)
    for layer in (ember.nn.LayerNorm(8), ember.nn.GroupNorm(2, 4), ember.nn.BatchNorm1d(4)):
        layer = layer.double()
        expected = layer(x.clone().requires_grad_())
        (expected * x).sum().backward()
        grads = [p.grad.clone() for p in layer.parameters()]
        layer.zero_grad()
        layer.cuda()
        got = layer(x.cuda())
        (got * x.cuda()).sum().backward()
        np.testing.assert_allclose(got.detach().cpu().numpy(), expected.detach().numpy(),
                                   rtol=1e-10, atol=1e-12)
        for p, g in zip(layer.parameters(), grads):
            np.testing.assert_allclose(p.grad.cpu().numpy(), g.numpy(), rtol=1e-10, atol=1e-12)
        layer.cpu()
    gc.collect()


def test_attention_and_a_transformer_layer_on_the_device(device):
    ember.manual_seed(0)
    q, k, v = (ember.randn(2, 3, 5, 4, dtype=ember.float64) for _ in range(3))
    expected = ember.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    got = ember.nn.functional.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(),
                                                           is_causal=True)
    np.testing.assert_allclose(got.cpu().numpy(), expected.numpy(), rtol=1e-10, atol=1e-12)
    layer = ember.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                             batch_first=True).double()
    x = ember.randn(2, 5, 8, dtype=ember.float64)
    mask = ember.nn.Transformer.generate_square_subsequent_mask(5, dtype=ember.float64)
    expected = layer(x, src_mask=mask)
    expected.sum().backward()
    grads = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    layer.cuda()
    got = layer(x.cuda(), src_mask=mask.cuda())
    got.sum().backward()
    np.testing.assert_allclose(got.detach().cpu().numpy(), expected.detach().numpy(),
                               rtol=1e-9, atol=1e-11)
    for p, g in zip(layer.parameters(), grads):
        np.testing.assert_allclose(p.grad.cpu().numpy(), g.numpy(), rtol=1e-8, atol=1e-10)
    del layer, got
    gc.collect()


def test_split_chunk_narrow_unbind_are_views(device):
    a = ember.arange(30.0).view(5, 6)
    da = a.cuda()
    for got, expected in [(da.split(2), a.split(2)), (da.split([1, 4], dim=0), a.split([1, 4])),
                          (da.chunk(4, dim=1), a.chunk(4, dim=1)), (da.unbind(1), a.unbind(1)),
                          ((da.narrow(1, -3, 2),), (a.narrow(1, -3, 2),))]:
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert g.data_ptr() >= da.data_ptr()
            same(g, e)
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum"):
        da.split([1, 2])


class _TinyGPT(ember.nn.Module):
    """Token and position embeddings, one pre-norm causal transformer layer
    with GELU and dropout 0, a linear head: a GPT's parts."""

    def __init__(self, vocab=13, width=8, length=6):
        super().__init__()
        self.token = ember.nn.Embedding(vocab, width)
        self.position = ember.nn.Embedding(length, width)
        self.block = ember.nn.TransformerEncoderLayer(width, 2, 16, dropout=0.0,
                                                      activation="gelu", batch_first=True,
                                                      norm_first=True)
        self.head = ember.nn.Linear(width, vocab)

    def forward(self, tokens):
        steps = tokens.shape[1]
        x = self.token(tokens) + self.position(ember.arange(steps, device=tokens.device))
        mask = ember.nn.Transformer.generate_square_subsequent_mask(steps, device=tokens.device,
                                                                    dtype=x.dtype)
        return self.head(self.block(x, src_mask=mask, is_causal=True))


def test_a_tiny_gpt_trains_on_the_device_as_on_the_cpu(device):
    import copy
    ember.manual_seed(0)
    model = _TinyGPT().double()
    on_device = copy.deepcopy(model).cuda()
    tokens, targets = ember.randint(0, 13, (2, 6)), ember.randint(0, 13, (2, 6))

    def train(model, tokens, targets):
        optimizer = ember.optim.AdamW(model.parameters(), lr=1e-2)
        losses = []
        for _ in range(3):
            loss = ember.nn.functional.cross_entropy(model(tokens).reshape(-1, 13),
                                                     targets.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(float(loss))
        return losses

    expected = train(model, tokens, targets)
    got = train(on_device, tokens.cuda(), targets.cuda())
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    for p, q in zip(on_device.parameters(), model.parameters()):
        assert p.is_cuda
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().numpy(), rtol=1e-8,
                                   atol=1e-10)
    del on_device
    gc.collect()


def test_new_factories_keep_the_tensors_device(device):
    t = ember.ones(2, 3, dtype=ember.float64).cuda()
    for made in (t.new_zeros(2), t.new_ones((2, 2)), t.new_empty(3), t.new_full((2,), 4.0),
                 t.new_tensor([1.0, 2.0])):
        assert made.device == t.device and made.dtype == ember.float64
    assert t.new_full((2,), 4.0).cpu().tolist() == [4.0, 4.0]
    assert str(t.new_zeros(2, device="cpu").device) == "cpu"


def test_writes_on_the_device_bump_version_counters_as_on_the_cpu(device):
    """Note [Versions of tensors written on a device] (c/python/Device.c):
    each in-place operator, out=, __setitem__, in-place slot and copy_
    bumps the written tensor's version as the same call on the CPU does,
    so autograd still refuses a saved tensor changed in place."""
    writes = {
        "copy_ from the host": lambda t: t.copy_(ember.ones(6)),
        "copy_ on the device": lambda t: t.copy_(t + 1),
        "mul_": lambda t: t.mul_(2),
        "add(out=)": lambda t: ember.add(t, 1, out=t),
        "sort(out=)": lambda t: ember.sort(t + 0, out=(t, ember.empty(6, dtype=ember.int64,
                                                                        device=t.device))),
        "__setitem__": lambda t: t.__setitem__(slice(0, 2), 3.0),
        "+=": lambda t: t.__iadd__(1),
        "fill_": lambda t: t.fill_(1),
        "uniform_": lambda t: t.uniform_(),
        "relu_": lambda t: ember.relu_(t),
        "a read": lambda t: (t + 1, t.sum()),
    }
    for name, write in writes.items():
        bumps = []
        for t in (ember.zeros(6), ember.zeros(6).cuda()):
            before = t._version
            write(t)
            bumps.append(t._version - before)
        assert bumps[1] == bumps[0], (name, bumps)
    # from the device into a CPU tensor: straight in, or (strided, another
    # dtype, a broadcast source) through the CPU's copy_, which bumps too:
    # once either way
    source = ember.ones(6).cuda()
    for host in (ember.zeros(6), ember.zeros(12)[::2], ember.zeros(6, dtype=ember.float64),
                 ember.zeros(2, 6)):
        before = host._version
        host.copy_(source)
        assert host._version == before + 1, (host.shape, host.stride(), host.dtype)
        assert host.tolist() == ember.ones(host.shape, dtype=host.dtype).tolist()
    x = ember.randn(5).cuda().requires_grad_()
    y = x.exp()  # exp saves its output
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
