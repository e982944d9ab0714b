"""CUDA tensors on the host side, without a GPU.

The memory of these CUDA tensors comes from a CUDA allocator written in
Python (ember.memory.set_allocator(..., 'cuda')) whose blocks are mapped
with PROT_NONE: any host read or write of them crashes the process, so
these tests fail loudly if the core ever runs a CPU kernel on a CUDA
storage (Note [One dispatch point] in c/python/Device.c).  Calls on them go
to the launcher registered for 'cuda'; a recording launcher checks what the
dispatch hands over.  Everything here passes with and without CuPy (the
no-CuPy branch is tested by making `import cupy` fail).
"""

import ctypes
import math
import re
import sys

import pytest

import ember

PROT_NONE = 0
MAP_PRIVATE = 0x02
MAP_ANONYMOUS = 0x20
PAGE = 4096

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

MIXED = ("Expected all tensors to be on the same device, but found at least two "
         "devices, {} and {}!")


class NoAccessAllocator:
    """Counts its blocks, each mapped PROT_NONE: device memory the host must not touch."""

    def __init__(self):
        self.sizes = {}  # address -> mapped bytes
        self.num_allocs = 0
        self.fail_next = False

    def malloc(self, nbytes):
        if self.fail_next:
            self.fail_next = False
            raise MemoryError("out of (pretend) device memory")
        size = (nbytes + PAGE - 1) // PAGE * PAGE
        address = _libc.mmap(None, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            raise MemoryError("mmap failed")
        self.sizes[address] = size
        self.num_allocs += 1
        return address

    def free(self, address):
        assert _libc.munmap(address, self.sizes.pop(address)) == 0


class RecordingLauncher:
    """A 'cuda' launcher that records each call and returns what `answer` gives."""

    def __init__(self, answer=None):
        self.calls = []
        self.answer = answer

    def __call__(self, name, args, kwargs):
        self.calls.append((name, args, kwargs))
        return self.answer(name, args, kwargs) if self.answer else "launched"


@pytest.fixture
def cuda_memory():
    """Installs a NoAccessAllocator for 'cuda' and no launcher; checks nothing leaks."""
    allocator = NoAccessAllocator()
    before = ember.memory.stats("cuda")
    previous = ember.memory.set_allocator(allocator, "cuda")
    previous_launcher = ember._C._register_device_backend("cuda", None)
    try:
        yield allocator
    finally:
        ember._C._register_device_backend("cuda", previous_launcher)
        ember.memory.set_allocator(previous, "cuda")
    after = ember.memory.stats("cuda")
    assert allocator.sizes == {}
    assert after["allocated_bytes"] == before["allocated_bytes"]
    assert after["live_blocks"] == before["live_blocks"]


def use_launcher(launcher):
    return ember._C._register_device_backend("cuda", launcher)


@pytest.fixture
def no_cupy(monkeypatch):
    """`import cupy` fails, and ember.cuda probes again."""
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setattr(ember.cuda, "_probed", None)
    monkeypatch.setattr(ember.cuda, "_initialized", False)


def test_availability_never_raises():
    available, count = ember.cuda.is_available(), ember.cuda.device_count()
    assert isinstance(available, bool) and isinstance(count, int)
    assert available == (count > 0)
    assert ember.accelerator.is_available() == available


@pytest.mark.usefixtures("no_cupy")
def test_without_cupy_every_cuda_use_names_cupy():
    assert ember.cuda.is_available() is False
    assert ember.cuda.device_count() == 0
    assert ember.cuda.get_arch_list() == []
    message = re.escape("pip install ember[cuda]")
    uses = [lambda: ember.empty(3, device="cuda"), lambda: ember.ones(2).to("cuda"),
            lambda: ember.ones(2).cuda(), ember.cuda.current_device,
            ember.cuda.synchronize, ember.cuda.get_device_name,
            lambda: ember.zeros_like(ember.ones(2), device="cuda"), ember.cuda.init]
    for use in uses:
        with pytest.raises(RuntimeError, match=f"CuPy, which is not installed.*{message}"):
            use()
    assert ember.cuda.memory_allocated() == ember.memory.stats("cuda")["allocated_bytes"]


def test_without_a_gpu_the_error_says_what_is_missing():
    if ember.cuda.is_available():
        pytest.skip("a GPU is there")
    reason = ember.cuda._probe()[1]
    assert reason
    for use in (lambda: ember.empty(2, device="cuda"), lambda: ember.ones(2).cuda(),
                ember.cuda.current_device, lambda: ember.cuda.set_device(0)):
        with pytest.raises(RuntimeError, match=re.escape(reason)):
            use()


def test_cuda_runtime_errors_become_pytorchs_messages():
    runtime = pytest.importorskip("cupy_backends.cuda.api.runtime")
    no_driver = ember.cuda._runtime_failure(runtime.CUDARuntimeError(35))
    assert no_driver.startswith("Found no NVIDIA driver on your system.")
    assert ember.cuda._runtime_failure(runtime.CUDARuntimeError(100)) == \
        "No CUDA GPUs are available"


def test_device_parsing_and_index_errors():
    assert ember.device("cuda:1").index == 1  # a device object may name any index
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        ember.empty(1, device="cuda:1")
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        ember.empty(1, device=ember.device("cuda", 2))
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda device type"):
        ember.empty(1, device="tpu")
    with pytest.raises(RuntimeError, match="only CPU generators"):
        ember.Generator(device="cuda")
    with pytest.raises(TypeError, match="callable malloc"):
        ember.memory.set_allocator(None, "cpu")  # the CPU always keeps one


def test_python_cuda_allocator_statistics_and_lifetime(cuda_memory):
    before = ember.memory.stats("cuda")
    t = ember.empty(2, 3, device="cuda")
    assert t.device == ember.device("cuda", 0) and str(t.device) == "cuda:0"
    assert t.is_cuda and t.dtype == ember.float32 and t.shape == (2, 3)
    assert t.data_ptr() in cuda_memory.sizes
    like = ember.empty_like(t, dtype=ember.float64)
    moved = ember.empty_like(ember.ones(4), device="cuda")
    assert like.is_cuda and moved.is_cuda and not ember.empty_like(t, device="cpu").is_cuda
    stats = ember.memory.stats("cuda")
    assert stats["allocated_bytes"] - before["allocated_bytes"] == 24 + 48 + 16
    assert stats["live_blocks"] - before["live_blocks"] == 3
    assert ember.cuda.memory_allocated() == stats["allocated_bytes"]
    assert ember.memory.get_allocator("cuda") is cuda_memory
    # metadata and views need no kernel: they run on any device
    view = t.t().unsqueeze(0).expand(2, 3, 2)
    assert view.is_cuda and view.data_ptr() == t.data_ptr()
    assert t.view(6).stride() == (1,) and t.transpose(0, 1).size() == (3, 2)
    assert t.detach().is_cuda and t.numel() == 6 and t.__dlpack_device__() == (2, 0)
    del t, like, moved, view
    assert ember.memory.stats("cuda")["live_blocks"] == before["live_blocks"]
    # a failing malloc is the operation's exception, and counts nothing
    cuda_memory.fail_next = True
    with pytest.raises(MemoryError, match="pretend"):
        ember.empty(5, device="cuda")
    assert ember.memory.stats("cuda")["allocated_bytes"] == before["allocated_bytes"]


def test_no_cpu_kernel_runs_on_cuda_memory(cuda_memory):
    """Every operator category raises (no launcher), none reads the memory."""
    t, cpu = ember.empty(2, 3, device="cuda"), ember.ones(2, 3)
    index, scalar = ember.tensor([0]), ember.empty([], device="cuda")
    uses = {
        "unary": [lambda: ember.exp(t), lambda: -t, lambda: t.abs(), lambda: t.float()],
        "binary": [lambda: t + t, lambda: t * 2, lambda: 2 - t, lambda: ember.add(t, t),
                   lambda: t @ t.t(), lambda: ember.where(t > 0, t, t)],
        "reduction": [lambda: t.sum(), lambda: t.max(dim=1), lambda: ember.softmax(t, 1)],
        "copy": [lambda: t.copy_(cpu), lambda: cpu.copy_(t), lambda: t.clone(),
                 lambda: t.contiguous().add_(1), lambda: t.cpu(), lambda: t.to(ember.float64),
                 lambda: ember.cat([t, t])],
        "indexing": [lambda: t[0], lambda: t[index], lambda: t.__setitem__(0, 1.0),
                     lambda: t.index_select(0, index), lambda: t.masked_fill(t > 0, 1)],
        "host reads": [lambda: t[0, 0].item(), lambda: float(t.view(6)[:1]), t.tolist,
                       lambda: bool(t.view(6)[:1]), lambda: repr(t), lambda: str(t)],
        "nested": [lambda: ember.tensor([[scalar]]),  # deeper than pinning looks
                   lambda: ember.Generator().set_state(
                       ember.empty(16, dtype=ember.uint8, device="cuda"))],
        "factories": [lambda: ember.zeros(2, device="cuda"), lambda: ember.zeros_like(t),
                      lambda: ember.tensor([1.0], device="cuda"),
                      lambda: ember.arange(3, device="cuda")],
    }
    for category, calls in uses.items():
        for use in calls:
            with pytest.raises(RuntimeError) as raised:
                use()
            message = str(raised.value)
            del raised  # its traceback holds this frame, and so `t`
            assert ("CUDA backend" in message or "Expected all tensors" in message
                    or "must be a CPU tensor here" in message
                    or message == ember.cuda._probe()[1]), (category, message)
    for use in (t.numpy, lambda: ember.ones(1).numpy() + t.numpy()):
        with pytest.raises(TypeError, match=re.escape(
                "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to "
                "copy the tensor to host memory first.")):
            use()


def test_mixed_devices_raise_pytorchs_error(cuda_memory):
    t, cpu = ember.empty(2, 3, device="cuda"), ember.ones(2, 3)
    for use, first, second in [(lambda: t + cpu, "cuda:0", "cpu"),
                               (lambda: cpu * t, "cpu", "cuda:0"),
                               (lambda: ember.add(cpu, t), "cpu", "cuda:0"),
                               (lambda: ember.cat([t, cpu]), "cuda:0", "cpu"),
                               (lambda: cpu @ t.t(), "cpu", "cuda:0")]:
        with pytest.raises(RuntimeError, match=re.escape(MIXED.format(first, second))):
            use()


def test_result_type_reads_dtypes_on_any_device(cuda_memory):
    # PyTorch's result_type needs no kernel: CUDA, and CUDA beside CPU, work
    t = ember.empty(2, 3, device="cuda", dtype=ember.float32)
    assert ember.result_type(t, 2.5) == ember.float32
    assert ember.result_type(t, ember.ones(2, dtype=ember.float64)) == ember.float64


def test_calls_on_cuda_tensors_go_to_the_launcher(cuda_memory):
    launcher = RecordingLauncher()
    previous = use_launcher(launcher)
    try:
        t, cpu = ember.empty(2, 3, device="cuda"), ember.ones(2, 3)
        scalar = ember.tensor(2.0)  # a 0-dim CPU tensor goes with any device
        assert ember.sum(t, dim=1) == "launched"
        assert t.add(scalar, alpha=2) == "launched"
        assert (1 + t) == "launched"
        assert t[0] == "launched"
        t[0] = 5.0
        assert ember.zeros(2, device="cuda") == "launched"
        assert cpu.to("cuda") == "launched" and cpu.cuda() == "launched"
        assert cpu.copy_(t) == "launched"
        assert ember.ones_like(cpu, device="cuda") == "launched"
        assert [(name, len(args), kwargs) for name, args, kwargs in launcher.calls] == [
            ("sum", 1, {"dim": 1}), ("Tensor.add", 2, {"alpha": 2}), ("__add__", 2, {}),
            ("__getitem__", 2, {}), ("__setitem__", 3, {}), ("zeros", 1, {"device": "cuda"}),
            ("Tensor.to", 2, {}), ("Tensor.to", 2, {}), ("Tensor.copy_", 2, {}),
            ("ones_like", 1, {"device": "cuda"})]
        calls = launcher.calls
        assert calls[0][1][0] is t and calls[1][1] == (t, scalar)
        assert calls[2][1][0] == 1 and calls[2][1][1] is t  # 1 + t: operands in order
        assert calls[4][1][1:] == (0, 5.0) and calls[6][1] == (cpu, "cuda")
        assert t.to("cuda") is t  # nothing to move: no launch
        assert len(launcher.calls) == 10
    finally:
        use_launcher(previous)


def test_a_launch_that_writes_bumps_the_written_versions(cuda_memory):
    """c/python/Device.c:Note [Versions of tensors written on a device], on
    the C dispatch alone: in-place names, in-place slots, __setitem__ and
    out= (a tensor, a tuple, a list) bump what they write once, after the
    launch returns; reads and a failed launch bump nothing."""
    def answer(name, args, kwargs):
        if name == "Tensor.div_":
            raise RuntimeError("no kernel")
        return "launched"
    launcher = RecordingLauncher(answer)
    previous = use_launcher(launcher)
    try:
        t, u = ember.empty(4, device="cuda"), ember.empty(4, device="cuda")
        host = ember.zeros(4)
        writes = [(lambda: t.mul_(2), t), (lambda: ember.relu_(t), t),
                  (lambda: t.__iadd__(1), t), (lambda: t.__setitem__(0, 1.0), t),
                  (lambda: ember.add(u, 1, out=t), t), (lambda: host.copy_(t), host),
                  (lambda: ember.sort(u, out=(t, u)), (t, u)),
                  (lambda: ember.sort(u, out=[t, u]), (t, u))]
        for write, written in writes:
            written = written if isinstance(written, tuple) else (written,)
            before = [w._version for w in written]
            write()
            assert [w._version for w in written] == [v + 1 for v in before], launcher.calls[-1][0]
        before = t._version, u._version
        t + u, t.sum(), t.__getitem__(0), ember.exp(u)  # reads
        with pytest.raises(RuntimeError, match="no kernel"):
            t.div_(2)
        assert (t._version, u._version) == before
    finally:
        use_launcher(previous)


REDUCTION_CALLS = [
    lambda x: ember.sum(x, dim=1), lambda x: x.sum(), lambda x: x.mean((0, 2), True),
    lambda x: x.amax(1), lambda x: x.argmax(), lambda x: ember.prod(x, 2, keepdim=True),
    lambda x: ember.var(x, 1, correction=0, keepdim=True), lambda x: x.std(dim=(0, 1)),
    lambda x: ember.std(x), lambda x: ember.var(x, 2, False),
    lambda x: ember.linalg.vector_norm(x, 3, dim=1), lambda x: ember.norm(x, p=1, dim=0),
    lambda x: x.norm(), lambda x: ember.linalg.vector_norm(x, float("inf"), (0, 2), True),
    lambda x: ember.logsumexp(x, 1), lambda x: x.logsumexp(dim=0, keepdim=True),
    lambda x: ember.softmax(x, 1), lambda x: x.softmax(-1),
    lambda x: ember.nn.functional.softmax(x, dim=0), lambda x: ember.log_softmax(x, 0),
    lambda x: ember.nn.functional.log_softmax(x, dim=2), lambda x: ember.cumsum(x, 1),
    lambda x: x.cumsum(0), lambda x: ember.cumprod(x, dim=2),
    lambda x: x.transpose(0, 2).cumprod(1),  # strided
]


def test_reduction_calls_plan_through_the_launcher_table(cuda_memory):
    """Each reduction's call, as the launcher receives it, plans the kernel
    whose result has the CPU operator's shape and dtype."""
    from ember.cuda import _reduce
    launcher = RecordingLauncher()
    previous = use_launcher(launcher)
    try:
        t = ember.empty(2, 3, 4, device="cuda")
        for call in REDUCTION_CALLS:
            call(t)
    finally:
        use_launcher(previous)
    cpu = ember.randn(2, 3, 4)
    assert len(launcher.calls) == len(REDUCTION_CALLS)
    for (name, args, kwargs), call in zip(launcher.calls, REDUCTION_CALLS):
        p = _reduce.plan_call(name, args, kwargs)
        expected = call(cpu)
        assert (p.out_shape, p.out_dtype) == (tuple(expected.shape),
                                              str(expected.dtype).removeprefix("ember.")), name
    # dtype=: the launcher converts the input first (a cast kernel), so a
    # plan takes only the input's own dtype
    with pytest.raises(ValueError, match="convert the input to ember.float64 first"):
        _reduce.plan_call("softmax", (t, 0), {"dtype": ember.float64})
    assert _reduce.plan_call("softmax", (t, 0), {"dtype": ember.float32}).out_dtype == "float32"
    with pytest.raises(TypeError, match="unexpected keyword argument 'dtype'"):
        _reduce.plan_call("amax", (t,), {"dtype": ember.float32})
    assert _reduce.plan_call("Tensor.var", (t, 1, False), {}).param == 0  # unbiased=False
    assert _reduce.plan_call("norm", (t,), {"p": "fro"}).key[0] == "norm2"


def test_printing_copies_to_the_host_through_the_launcher(cuda_memory):
    def to_host(name, args, kwargs):
        assert name == "Tensor.to" and args[1:] == ("cpu",)
        return ember.arange(6.0).view(2, 3)  # stands for the copied values

    previous = use_launcher(RecordingLauncher(to_host))
    try:
        t = ember.empty(2, 3, device="cuda")
        assert repr(t) == ("tensor([[0., 1., 2.],\n        [3., 4., 5.]], "
                           "device='cuda:0')")
    finally:
        use_launcher(previous)


def test_launcher_errors_propagate_and_leak_nothing(cuda_memory):
    def fail(name, args, kwargs):
        raise ValueError(f"kernel for {name} failed")

    previous = use_launcher(fail)
    try:
        t = ember.empty(4, device="cuda")
        with pytest.raises(ValueError, match="kernel for exp failed"):
            ember.exp(t)
        with pytest.raises(ValueError, match="kernel for __mul__ failed"):
            t * t
    finally:
        use_launcher(previous)
    with pytest.raises(TypeError, match="expected a callable"):
        ember._C._register_device_backend("cuda", 3)
    with pytest.raises(ValueError, match="only other devices"):
        ember._C._register_device_backend("cpu", fail)


def test_ember_cuda_launcher_names_what_has_no_kernel(cuda_memory):
    from ember.cuda import _launcher
    t = ember.empty(2, 3, device="cuda")
    assert _launcher._target_of(t, ("cpu", ember.float64), {}) == ("cpu", ember.float64)
    assert _launcher._target_of(ember.ones(1), (t,), {}) == ("cuda", ember.float32)
    assert _launcher._target_of(t, (), {"device": 0, "dtype": ember.int8}) == \
        ("cuda", ember.int8)
    previous = use_launcher(_launcher.launch)
    try:
        with pytest.raises(NotImplementedError, match="'cummax' has no CUDA kernel yet"):
            ember.cummax(t, 1)
        if not ember.cuda.is_available():  # a kernel needs the runtime, which needs CuPy
            for needs_a_kernel in (lambda: ember.exp(t), lambda: t.t().cpu()):
                with pytest.raises(RuntimeError, match=re.escape(ember.cuda._probe()[1])):
                    needs_a_kernel()
    finally:
        use_launcher(previous)


@pytest.mark.skipif(not ember.cuda.is_available(), reason="needs CuPy and a GPU")
def test_cupy_allocator_on_a_gpu():
    t = ember.empty(1000, device="cuda")
    allocator = ember.memory.get_allocator("cuda")
    assert isinstance(allocator, ember.cuda.CupyAllocator)
    assert t.data_ptr() in allocator.blocks
    assert ember.cuda.memory_allocated() >= 4000
    del t
    assert allocator.blocks == {}


@pytest.mark.skipif(not ember.cuda.is_available(), reason="needs CuPy and a GPU")
def test_copies_between_host_and_gpu():
    import numpy as np
    host = ember.arange(12.0).view(3, 4)
    device = host.t().to("cuda")  # made contiguous on the host first
    assert device.is_cuda and device.shape == (4, 3)
    np.testing.assert_array_equal(device.cpu().numpy(), host.t().numpy())
    assert device.to("cpu", ember.float64).dtype == ember.float64
    target = ember.empty(4, 3, device="cuda")
    target.copy_(ember.ones(3))  # broadcast on the host side
    assert target.cpu().tolist() == [[1.0] * 3] * 4
    back = ember.zeros(4, 3)
    back.copy_(device)
    assert ember.equal(back, host.t())
    assert "device='cuda:0'" in repr(device)


# ---- zero-copy interop: __cuda_array_interface__ and DLPack on CUDA memory ----

class LentDeviceArray:
    """A CUDA array from another library, as CuPy or Numba lend one: device
    memory (a NoAccessAllocator block) described by __cuda_array_interface__,
    freed when the object dies."""

    def __init__(self, allocator, shape, typestr="<f4", strides=None, **extra):
        self.allocator = allocator
        itemsize = int(typestr[2:])
        self.address = allocator.malloc(max(1, math.prod(shape)) * itemsize * 4)
        self.__cuda_array_interface__ = dict(
            {"shape": shape, "typestr": typestr, "data": (self.address, False),
             "strides": strides, "version": 3}, **extra)

    def __del__(self):
        self.allocator.free(self.address)


def test_cuda_array_interface_export(cuda_memory):
    t = ember.empty(2, 3, device="cuda")
    assert t.__cuda_array_interface__ == {
        "typestr": "<f4", "shape": (2, 3), "strides": None, "data": (t.data_ptr(), False),
        "version": 3, "stream": 1}
    assert t.t().__cuda_array_interface__["strides"] == (4, 12)
    assert t.as_strided((2, 2), (3, 1), 1).__cuda_array_interface__["data"][0] == \
        t.data_ptr() + 4
    for dtype, typestr in [(ember.bool, "|b1"), (ember.uint8, "|u1"), (ember.int16, "<i2"),
                           (ember.int64, "<i8"), (ember.float16, "<f2"),
                           (ember.float64, "<f8")]:
        assert ember.empty(1, dtype=dtype, device="cuda") \
            .__cuda_array_interface__["typestr"] == typestr
    assert ember.empty(0, device="cuda").__cuda_array_interface__["data"] == (0, False)
    assert not hasattr(ember.ones(2), "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="non-CUDA tensor type: ember.FloatTensor"):
        ember.ones(2).__cuda_array_interface__
    with pytest.raises(RuntimeError, match="Variable that requires grad"):
        ember.empty(2, device="cuda", requires_grad=True).__cuda_array_interface__
    with pytest.raises(TypeError, match="no type string for ember.bfloat16"):
        ember.empty(2, dtype=ember.bfloat16, device="cuda").__cuda_array_interface__


def test_as_tensor_shares_lent_cuda_memory_and_keeps_the_lender(cuda_memory):
    import weakref
    lender = LentDeviceArray(cuda_memory, (3, 4), "<i4", strides=(4, 12))
    address, gone = lender.address, weakref.ref(lender)
    t = ember.as_tensor(lender)
    assert t.is_cuda and t.dtype == ember.int32 and t.shape == (3, 4)
    assert t.stride() == (1, 3) and t.data_ptr() == address
    assert ember.as_tensor(t) is t and ember.as_tensor(t, device="cuda") is t
    view = t.select(0, 1)  # metadata only: indexing would need a kernel
    del lender, t
    assert gone() is not None and address in cuda_memory.sizes  # the view still uses it
    del view
    assert gone() is None and address not in cuda_memory.sizes
    # what the interface's producers write, read back the same
    contiguous = ember.as_tensor(LentDeviceArray(cuda_memory, (5,), "<f8"))
    assert contiguous.dtype == ember.float64 and contiguous.stride() == (1,)
    assert ember.as_tensor(LentDeviceArray(cuda_memory, (0, 2), "|u1")).shape == (0, 2)
    del contiguous


def test_bad_cuda_array_interfaces_raise_and_keep_nothing(cuda_memory):
    bad = [({"typestr": ">f4"}, TypeError, "unsupported type string '>f4'"),
           ({"typestr": "<c8"}, TypeError, "unsupported type string"),
           ({"version": 4}, ValueError, "version 4 is not supported"),
           ({"mask": object()}, ValueError, "with a mask"),
           ({"strides": (4,)}, ValueError, "1 strides for 2 dimensions"),
           ({"strides": (6, 2)}, ValueError, "multiples of the element size"),
           ({"shape": (2, -1)}, ValueError, "negative sizes"),
           ({"stream": "s"}, None, None)]
    for change, error, message in bad:
        lender = LentDeviceArray(cuda_memory, (2, 2))
        lender.__cuda_array_interface__.update(change)
        if error is None:  # a stream is only read when CUDA has run: no GPU here
            ember.as_tensor(lender)
            continue
        with pytest.raises(error, match=re.escape(message) if "'" in message else message):
            ember.as_tensor(lender)
        assert sys.getrefcount(lender) == 2  # the failed import took no reference
    owner = object()
    calls = [((owner, 1, ("x",), None, ember.float32, False), TypeError),
             ((owner, 1, (2,), (1, 1), ember.float32, False), ValueError),
             ((owner, 1, (2,), None, "float32", False), TypeError),
             ((owner, 1), TypeError)]
    held = sys.getrefcount(owner)
    for arguments, error in calls:
        with pytest.raises(error):
            ember._C._tensor_over_cuda_memory(*arguments)
    assert sys.getrefcount(owner) == held  # no failed call kept a reference
    null = LentDeviceArray(cuda_memory, (2,))
    null.__cuda_array_interface__["data"] = (0, False)
    with pytest.raises(ValueError, match="null data pointer"):
        ember.as_tensor(null)


def test_dlpack_exchanges_cuda_memory_with_its_stream(cuda_memory):
    t = ember.empty(2, 3, device="cuda")
    assert t.__dlpack_device__() == (2, 0)
    shared = ember.from_dlpack(t.__dlpack__(stream=1))
    assert shared.is_cuda and shared.data_ptr() == t.data_ptr() and shared.shape == (2, 3)
    strided = ember.from_dlpack(t.t())
    assert strided.is_cuda and strided.stride() == (1, 3)

    class Producer:
        """Records the stream a consumer asks for."""
        def __init__(self, tensor):
            self.tensor, self.streams = tensor, []

        def __dlpack_device__(self):
            return self.tensor.__dlpack_device__()

        def __dlpack__(self, stream=None, max_version=None):
            self.streams.append(stream)
            return self.tensor.__dlpack__(stream=stream, max_version=max_version)

    producer = Producer(t)
    assert ember.from_dlpack(producer).data_ptr() == t.data_ptr()
    cpu_producer = Producer(ember.ones(2))
    ember.from_dlpack(cpu_producer)
    assert producer.streams == [1] and cpu_producer.streams == [None]
    address = t.data_ptr()
    del t, strided, producer
    assert address in cuda_memory.sizes  # `shared` holds the storage through the capsule
    del shared
    assert address not in cuda_memory.sizes
    u = ember.empty(2, device="cuda")
    with pytest.raises(BufferError, match=re.escape("can't export a CUDA tensor to dl_device=(1, 0)")):
        u.__dlpack__(dl_device=(1, 0))
    assert u.__dlpack__(dl_device=(2, 0), stream=-1) is not None
    with pytest.raises(TypeError, match="stream must be ``int`` or ``none``"):
        u.__dlpack__(stream="default")
    with pytest.raises(ValueError, match="stream 0 is disallowed"):
        u.__dlpack__(stream=0)
    u.__dlpack__(stream=7)  # ember has run nothing on the GPU: nothing to order


def test_number_slots_on_cuda_record_autograd_first(cuda_memory):
    """t * 2 on a CUDA tensor that requires grad goes through autograd
    (which records the node, then calls the operator again, launched)."""
    def answer(name, args, kwargs):
        return ember.empty(2, device="cuda")

    launcher = RecordingLauncher(answer)
    previous = use_launcher(launcher)
    try:
        x = ember.empty(2, device="cuda", requires_grad=True)
        y, z = x * 2, 1 - x
        assert type(y.grad_fn).__name__ == "MulBackward0" and y.is_cuda
        assert type(z.grad_fn).__name__ == "RsubBackward1"
        assert [name for name, _, _ in launcher.calls] == ["__mul__", "__sub__"]
        del x, y, z
    finally:
        use_launcher(previous)


def test_streams_and_events_need_a_gpu_and_say_why():
    if ember.cuda.is_available():
        pytest.skip("a GPU is there (tests/test_cuda_launcher.py times a stream)")
    reason = ember.cuda._probe()[1]
    for make in (ember.cuda.Stream, ember.cuda.Event, ember.cuda.current_stream,
                 ember.cuda.default_stream):
        with pytest.raises(RuntimeError, match=re.escape(reason)):
            make()
    with ember.cuda.stream(None):  # None changes nothing, as in PyTorch
        pass


def test_autograd_records_a_device_getitem_before_the_launcher_runs_it(cuda_memory):
    """t[index] on a device tensor that requires grad goes through autograd's
    handler first (c/python/Pin.c:THPPin_callBinary), which calls the
    launcher with grad mode off, as the CPU's getitem does."""
    t = ember.empty(2, 3, device="cuda").requires_grad_()
    launcher = RecordingLauncher(lambda name, args, kwargs: args[0].select(0, 0))
    previous = use_launcher(launcher)
    try:
        row = t[0]
        assert [name for name, _, _ in launcher.calls] == ["__getitem__"]
        assert type(row.grad_fn).__name__ == "SelectBackward0" and row.is_cuda
        with ember.no_grad():
            assert t[0].grad_fn is None
    finally:
        use_launcher(previous)
    del row, t
