"""What runs ember's generated kernels: a runtime, CuPy's on a GPU.

The launcher (_launcher.py) plans a call on CUDA tensors down to a kernel
and its arguments without touching device memory; a runtime does the two
things that need the device:

  memcpy(destination, source, nbytes, kind)   cudaMemcpy between
                                              addresses;
  launch(kernel, grid, block, arguments)      load the kernel (once) and
                                              run it on the arguments;
  matmul(out, a, b)                           out = a @ b by cuBLAS (the
                                              one library kernel ember
                                              calls instead of writing).

`CupyRuntime` does them with CuPy's bindings of the CUDA runtime and
driver: NVRTC compiles the source for the device's architecture (cached on
disk by _launch.compile_cached), cuModuleLoadData loads the cubin, and
cuLaunchKernel launches the function on the current stream (CuPy's, which
ember.cuda.stream(s) sets) with _launch.kernel_params's array of argument
addresses.  The test suite
installs another runtime (tests/cuda_emulation.py:EmulatedRuntime) that
compiles the same sources with g++ and runs them on host memory, so the
launcher's whole path, from the C dispatch to the kernel's stores, is
checked on machines without a GPU.
"""

import ctypes
from collections import namedtuple

from . import _launch

__all__ = ["Kernel", "CupyRuntime", "current", "use"]

# One generated kernel: its extern "C" name, source and headers, its
# parameters [(C type, name)] (what an emulation needs to call it), and
# whether its threads must run together (a block reduction's barriers).
Kernel = namedtuple("Kernel", "name source headers parameters cooperative")

# cudaMemcpyKind
HOST_TO_DEVICE = 1
DEVICE_TO_HOST = 2
DEVICE_TO_DEVICE = 3


class CupyRuntime:
    """Kernels on the GPU through CuPy's driver bindings."""

    def __init__(self):
        import cupy
        self._cupy = cupy
        # CuPy gives the capability as a string of digits: "90" on an H100/H200
        self.arch = f"sm_{cupy.cuda.Device().compute_capability}"
        self._functions = {}  # kernel name -> CUfunction handle
        self._modules = []  # kept loaded for the process's life

    def memcpy(self, destination, source, nbytes, kind):
        self._cupy.cuda.runtime.memcpy(destination, source, nbytes, kind)

    def _function(self, kernel):
        function = self._functions.get(kernel.name)
        if function is None:
            driver = self._cupy.cuda.driver
            compiled = _launch.compile_cached(kernel.source, self.arch, kernel.headers,
                                              name=f"{kernel.name}.cu")
            module = driver.moduleLoadData(compiled.cubin)
            self._modules.append(module)
            function = self._functions[kernel.name] = driver.moduleGetFunction(
                module, kernel.name)
        return function

    def launch(self, kernel, grid, block, arguments):
        params = _launch.kernel_params(arguments)  # alive until the launch returns
        stream = self._cupy.cuda.get_current_stream().ptr  # ember.cuda.stream(s) sets it
        self._cupy.cuda.driver.launchKernel(self._function(kernel), grid, 1, 1, block, 1, 1,
                                            0, stream, ctypes.addressof(params), 0)


    def matmul(self, out, a, b):
        """out = a @ b (numpy.matmul's rules, which are torch.matmul's) by
        CuPy's matmul: cuBLAS's GEMM, batched where there are batch dims."""
        self._cupy.matmul(self._array(a), self._array(b), out=self._array(out))

    def _array(self, tensor):
        """A CuPy array on the tensor's memory (no copy, no stream
        synchronisation: CuPy and ember queue on the same current stream)."""
        cupy = self._cupy
        itemsize = tensor.element_size()
        span = itemsize * (1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride())))
        memory = cupy.cuda.UnownedMemory(tensor.data_ptr(), span, tensor)
        return cupy.ndarray(tuple(tensor.shape), dtype=str(tensor.dtype).removeprefix("ember."),
                            memptr=cupy.cuda.MemoryPointer(memory, 0),
                            strides=tuple(s * itemsize for s in tensor.stride()))


_current = None


def current():
    """The installed runtime (ember.cuda installs CupyRuntime on first use)."""
    if _current is None:
        from . import _lazy_init
        _lazy_init()
    if _current is None:
        raise RuntimeError("ember.cuda: no kernel runtime is installed")
    return _current


def use(runtime):
    """Installs `runtime` (None: none) and returns the previous one."""
    global _current
    previous, _current = _current, runtime
    return previous
