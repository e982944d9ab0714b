"""The CUDA launcher: where ember's C dispatch sends calls on CUDA tensors.

Note [One dispatch point] in c/python/Device.c: every C entry point whose
tensors live on CUDA calls launch(name, args, kwargs) instead of its CPU
kernels.  ember.cuda registers it on first use when CuPy sees a GPU.

Two kinds of calls have handlers here:

  copies      to()/cpu()/cuda(), copy_ across devices, and what reads
              values on the host (item(), float(), numpy(force=True),
              tolist(), printing).  A copy is one cudaMemcpy of a
              contiguous block: layout changes and broadcasting happen on
              the CPU side of the copy, and a dtype conversion on the side
              where the values take fewer bytes (Note [Convert on the
              narrow side]).  Between CUDA tensors a dtype conversion
              (to(dtype), half(), copy_) is a cast kernel (_cast.py),
              strided and broadcasting.
  operators   the pointwise operators of c/th/THPointwiseFormulas.h
              (arithmetic with alpha and Python numbers, comparisons,
              logical and bitwise ops, where, clamp, lerp, addcmul,
              addcdiv), the floating-point unary ones of THFloatFormulas.h,
              and the reductions of _reduce.py, as functions, methods,
              in-place methods, out= and the number protocol.  Each is a
              plan (metadata only: _pointwise.plan, _reduce.plan), a result
              tensor from the CUDA allocator and one kernel launch by the
              installed runtime (_runtime.py).  Besides them: matrix
              products (cuBLAS; _matmul.py's kernel for 16-bit floats),
              factories, random numbers (_random.py: rand/randn,
              uniform_/normal_, randint/randint_like/random_ in every
              dtype with PyTorch's range checks, exponential_,
              bernoulli_ and bernoulli), joins, indexing
              (views; gathers, scatters and scatter_reduce along a dim,
              index_copy among them; index tensors and
              masks, planned as the CPU's Note [Advanced indexing], with
              index_fill, take and put on the same plan; nonzero;
              repeat_interleave as an index_select: _index.py), sorting (_sort.py: sort, topk, kthvalue, and
              unique with a scan, along a dim by a sort per column), the
              float predicates (isnan, isinf, ...: _kernels.py) and what
              moves elements (_rearrange.py: flip, roll, repeat, tile,
              tril/triu).

An out= of another dtype than the result's is converted into by the
operators PyTorch converts for, and refused with PyTorch's RuntimeError
by the others (_destination).  Everything else raises NotImplementedError
naming the operator.
"""

import ctypes
import functools
import math
import operator
from collections import namedtuple

import ember

from .. import _C
from .._functions import _broadcast_shapes
from .._tensor import _contiguous_strides
from ..linalg._lapack import check_floating as _check_floating
from ..linalg._lapack import check_norm_dtype as _check_norm_dtype
from . import (_cast, _fused, _index, _kernels, _launch, _pointwise, _random, _rearrange,
               _reduce, _runtime, _sort)
from . import _matmul as _tiled_matmul  # its name is the operator's here
from ._runtime import DEVICE_TO_DEVICE as _DEVICE_TO_DEVICE
from ._runtime import DEVICE_TO_HOST as _DEVICE_TO_HOST
from ._runtime import HOST_TO_DEVICE as _HOST_TO_DEVICE
from ._reduce import _wrap_dim as _wrap


def _memcpy(destination, source, kind):
    """Copies source's bytes into destination (both dense, same dtype and size)."""
    nbytes = source.numel() * source.element_size()
    if nbytes:
        _runtime.current().memcpy(destination.data_ptr(), source.data_ptr(), nbytes, kind)


def _dense_on_device(tensor):
    """`tensor`, or a dense copy of it made by a kernel (a cudaMemcpy moves
    one contiguous block)."""
    return tensor if tensor.is_contiguous() else _copy_kernel(tensor)


def _to_host(tensor):
    """A new CPU tensor with the values of a CUDA tensor."""
    source = _dense_on_device(tensor)
    host = ember.empty(source.shape, dtype=source.dtype)
    _memcpy(host, source, _DEVICE_TO_HOST)
    return host


def _to_device(tensor):
    """A new CUDA tensor with the values of a CPU tensor."""
    source = tensor.contiguous()
    device = ember.empty(source.shape, dtype=source.dtype, device="cuda")
    _memcpy(device, source, _HOST_TO_DEVICE)
    return device


# Note [Convert on the narrow side]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A copy between host and device that also converts a dtype (to('cpu',
# dtype), to('cuda', dtype), copy_ across devices) sends every element over
# the bus once, in the source's dtype when it converts after the copy, in
# the destination's when before.  ember converts where the values are
# narrower: a float32 CUDA tensor to('cpu', float16) is a cast kernel and
# then a copy of half the bytes, an int8 CPU tensor to('cuda', float32) a
# copy of a quarter of the bytes and then a cast kernel; between dtypes of
# one size (or to a wider one on the host) the host converts.  The cast
# kernels are the CPU's TH_CONVERT (_cast.py), so which side converts
# changes the bytes moved and the kernels run, never a result's bits.
# The device holds one temporary, in the narrower dtype.  (PyTorch's copy_
# converts on the CPU for a blocking copy, sparing the GPU the temporary,
# and on the GPU for a non_blocking one, whichever dtype is narrower.)

def _cast_on_device(tensor, dtype):
    """A new CUDA tensor of `dtype` with a CUDA tensor's values: one cast
    kernel (the tensor itself when it has that dtype)."""
    if tensor.dtype == dtype:
        return tensor
    return _cast_into(ember.empty(tensor.shape, dtype=dtype, device="cuda"), tensor)


def _to_host_as(tensor, dtype):
    """A new CPU tensor of `dtype` with a CUDA tensor's values, converted
    on the narrow side (Note [Convert on the narrow side])."""
    if dtype.itemsize < tensor.element_size():
        return _to_host(_cast_on_device(tensor, dtype))
    return _to_host(tensor).to(dtype)


def _host_side(tensor, dtype):
    """A CPU tensor on its way to a CUDA tensor of `dtype` (Note [Convert
    on the narrow side]): converted here, or, when `dtype` is wider, as it
    is, for a cast kernel to convert on the device."""
    return tensor if dtype.itemsize > tensor.element_size() else tensor.to(dtype)


def _device_type(device):
    """'cpu' or 'cuda' for a device argument (a bare int is a CUDA index)."""
    return "cuda" if isinstance(device, int) else ember.device(device).type


def _target_of(tensor, args, kwargs):
    """(device type, dtype) that to(*args, **kwargs) asks for."""
    device, dtype = tensor.device.type, tensor.dtype
    for arg in args:
        if isinstance(arg, ember.Tensor):
            device, dtype = arg.device.type, arg.dtype
        elif isinstance(arg, ember.dtype):
            dtype = arg
        else:
            device = _device_type(arg)
    if kwargs.get("device") is not None:
        device = _device_type(kwargs["device"])
    if kwargs.get("dtype") is not None:
        dtype = kwargs["dtype"]
    return device, dtype


def _to(tensor, *args, **kwargs):
    device, dtype = _target_of(tensor, args, kwargs)
    if device == "cpu":
        return _to_host_as(tensor, dtype)
    if not tensor.is_cuda:
        return _cast_on_device(_to_device(_host_side(tensor, dtype)), dtype)
    if dtype != tensor.dtype:  # cuda -> cuda with another dtype
        return _cast_on_device(tensor, dtype)
    result = ember.empty(tensor.shape, dtype=dtype, device="cuda")  # copy=True
    _memcpy(result, _dense_on_device(tensor), _DEVICE_TO_DEVICE)
    return result


def _copy_(destination, source, non_blocking=False):
    if not destination.is_cuda:  # device -> host
        if destination.element_size() < source.element_size():
            source = _cast_on_device(source, destination.dtype)  # the narrow side
        if source.dtype == destination.dtype and destination.is_contiguous() \
                and source.shape == destination.shape:  # straight into destination
            _memcpy(destination, _dense_on_device(source), _DEVICE_TO_HOST)
        else:
            destination.copy_(_to_host_as(source, destination.dtype))
        return destination
    if not source.is_cuda:
        source = _host_side(source, destination.dtype)
        if source.dtype == destination.dtype and destination.is_contiguous() \
                and source.shape == destination.shape:  # straight into destination
            _memcpy(destination, source.contiguous(), _HOST_TO_DEVICE)
            return destination
        source = _to_device(source)
    if source.dtype != destination.dtype:
        return _cast_into(destination, source)
    source = source.expand(destination.shape)
    if destination.is_contiguous() and source.is_contiguous():
        _memcpy(destination, source, _DEVICE_TO_DEVICE)
    else:  # the copy kernel stores through destination's strides
        _pointwise_op("where", ember.tensor(True), source, source, out=destination)
    return destination


@functools.cache
def _cast_kernel(key):
    return _runtime.Kernel(_cast.kernel_name(*key), _cast.kernel_source(*key), _cast.headers(),
                           _cast.kernel_parameters(*key), False)


def _cast_into(destination, source):
    """Converts `source` (a CUDA tensor broadcastable to destination's
    shape) into `destination` with one cast kernel."""
    key, strides = _cast.plan(destination, source)
    if destination.numel():
        _launch_kernel(_cast_kernel(key), _launch.launch_config(destination.numel()),
                       _cast.arguments(strides, destination.data_ptr(), source.data_ptr(),
                                       destination.numel()))
    return destination


def _on_host(method):
    return lambda tensor, *args, **kwargs: getattr(_to_host(tensor), method)(*args, **kwargs)


# ---- operators: a plan, a result tensor, one launch ------------------------------

def _dtype_name(dtype):
    return str(dtype).removeprefix("ember.")


@functools.cache
def _pointwise_kernel(key):
    return _runtime.Kernel(_pointwise.kernel_name(*key), _pointwise.kernel_source(*key),
                           _pointwise.headers(), _pointwise.kernel_parameters(*key), False)


@functools.cache
def _unary_kernel(op, dtype, rank_class):
    return _runtime.Kernel(_kernels.kernel_name(op, dtype, rank_class),
                           _kernels.kernel_source(op, dtype, rank_class), _kernels.headers(),
                           _kernels.kernel_parameters(dtype, rank_class, op), False)


@functools.cache
def _reduce_kernel(key):
    # block reductions synchronise a block's threads; a scan is a thread a line
    cooperative = _reduce.REDUCTIONS[key[0]].kind != "scan"
    return _runtime.Kernel(_reduce.kernel_name(*key), _reduce.kernel_source(*key),
                           _reduce.headers(), _reduce.kernel_parameters(*key), cooperative)


def _launch_kernel(kernel, config, arguments):
    (grid,), (block,) = config
    _runtime.current().launch(kernel, grid, block, arguments)


def _out_dtype_error(dtype, out_dtype):
    return (f"Expected out tensor to have dtype {_pointwise.CPP_TYPE_NAMES[dtype]}, but got "
            f"{_pointwise.CPP_TYPE_NAMES[_dtype_name(out_dtype)]} instead")


def _destination(out, shape, dtype, op, converts=False, dtype_error=None):
    """`out` checked for a result of `shape` and `dtype` (a new CUDA tensor
    when None).  An out= of another dtype: the operators whose result
    converts into it (`converts`: pointwise, unary, reductions) come
    here only when the result cannot cast to it (_converting_out took the
    others) and raise PyTorch's "result type ... can't be cast"; the rest
    store their result's dtype only, as PyTorch's gathers, sorts and matrix
    products do, and raise its "Expected out tensor to have dtype ..." (or
    `dtype_error`, an operator's own words), before any shape check, since
    PyTorch would resize out."""
    if out is None:
        return ember.empty(shape, dtype=getattr(ember, dtype), device="cuda")
    if not out.is_cuda:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at "
                           f"least two devices, cuda:0 and {out.device}!")
    if _dtype_name(out.dtype) != dtype:
        if converts:
            raise RuntimeError(f"result type {_pointwise.SCALAR_TYPE_NAMES[dtype]} can't be "
                               f"cast to the desired output type "
                               f"{_pointwise.SCALAR_TYPE_NAMES[_dtype_name(out.dtype)]}")
        raise RuntimeError(dtype_error or _out_dtype_error(dtype, out.dtype))
    if tuple(out.shape) != tuple(shape):
        raise RuntimeError(f"{op}: the output has shape {tuple(out.shape)}, the result "
                           f"{tuple(shape)} (ember.cuda does not resize out= tensors)")
    return out


def _converting_out(out, shape, dtype):
    """Whether `out` (of the result's shape) has another dtype than a
    kernel's result of `dtype`, which casts to it (PyTorch's rule for out=,
    and in-place ops: float16 += float32): the result is then computed into
    a new tensor and converted into out by a cast kernel."""
    return (out is not None and out.is_cuda and tuple(out.shape) == tuple(shape)
            and _dtype_name(out.dtype) != dtype
            and ember.can_cast(getattr(ember, dtype), out.dtype))


def _operand_pointers(plan, operands):
    """Each operand's device address, None for a number; a CPU 0-dim tensor
    (a number that kept its dtype, as in PyTorch) is passed by value."""
    values, pointers = list(plan.values), []
    for k, a in enumerate(operands):
        if isinstance(a, ember.Tensor) and a.is_cuda:
            pointers.append(a.data_ptr())
        else:
            pointers.append(None)
            if isinstance(a, ember.Tensor):  # 0-dim, or a number _fill expanded
                values[k] = _pointwise.number_as(a[(0,) * a.ndim].item(), plan.key[1][k])
    return plan._replace(values=values), pointers


def _pointwise_op(op, *operands, alpha=1, out=None):
    """One THPointwise operator on CUDA operands and numbers."""
    plan = _pointwise.plan(op, *operands, alpha=alpha,
                           out_strides=None if out is None else out.stride())
    if _converting_out(out, plan.shape, plan.out_dtype):
        return _cast_into(out, _pointwise_op(op, *operands, alpha=alpha))
    out = _destination(out, plan.shape, plan.out_dtype, op, converts=True)
    plan, pointers = _operand_pointers(plan, operands)
    if plan.numel:
        _launch_kernel(_pointwise_kernel(plan.key), _launch.launch_config(plan.numel),
                       _pointwise.arguments(plan, out.data_ptr(), pointers))
    return out


def _unary_op(op, tensor, out=None):
    """A floating-point unary operator of THFloatFormulas.h (default params)."""
    dtype = _dtype_name(tensor.dtype)
    if dtype not in _kernels.DTYPES:
        raise NotImplementedError(f"ember.cuda: {op} of a {dtype} tensor (ember's CUDA unary "
                                  "kernels take float32, float64, float16 and bfloat16)")
    if _converting_out(out, tuple(tensor.shape), dtype):
        return _cast_into(out, _unary_op(op, tensor))
    return _unary_launch(op, tensor, _destination(out, tuple(tensor.shape), dtype, op,
                                                  converts=True))


def _unary_launch(op, tensor, out):
    """One _kernels.py kernel: op's formula of each element of a float
    tensor into `out` (of its shape)."""
    dense = tensor.is_contiguous() and out.is_contiguous()
    rank_class = "contiguous" if dense else "strided"
    arguments = [ctypes.c_void_p(tensor.data_ptr()), ctypes.c_void_p(out.data_ptr()),
                 ctypes.c_int64(tensor.numel())]
    if not dense:
        arguments.append(_kernels.pack_strides(tuple(tensor.shape), tensor.stride(),
                                               out.stride()))
    arguments.append(_kernels.THUnaryParams())
    if tensor.numel():
        _launch_kernel(_unary_kernel(op, _dtype_name(tensor.dtype), rank_class),
                       _launch.launch_config(tensor.numel()), arguments)
    return out


def _predicate(op, tensor, *, out=None):
    """isnan, isinf, isfinite, isposinf, isneginf (THFloatFormulas.h's
    predicates): a bool tensor, one launch; an integer or bool tensor's
    elements all give the predicate's integer value (one fill, as
    THUnary.c's fill_bool_loop)."""
    out = _destination(out, tuple(tensor.shape), "bool", op)
    if _dtype_name(tensor.dtype) not in _kernels.DTYPES:
        return _fill(out, _kernels.predicate_formulas()[op].integer_value)
    return _unary_launch(op, tensor, out)


def _run_reduction(plan, tensor, out=None):
    """A _reduce.py plan: the result, then one launch."""
    if _converting_out(out, plan.out_shape, plan.out_dtype):
        return _cast_into(out, _run_reduction(plan, tensor))
    out = _destination(out, plan.out_shape, plan.out_dtype, plan.op, converts=True)
    if not out.is_contiguous():
        raise NotImplementedError(f"ember.cuda: {plan.op} into a non-contiguous out= tensor")
    if plan.n_out and out.numel():
        _launch_kernel(_reduce_kernel(plan.key), _reduce.launch_config(plan),
                       _reduce.arguments(plan, out.data_ptr(), tensor.data_ptr()))
    return out


def _reduction(op, tensor, dim=None, keepdim=False, out=None):
    """One reduction of _reduce.py over `dim` (None: every dim)."""
    return _run_reduction(_reduce.plan(op, tensor, dim, keepdim), tensor, out)


def _reduction_call(name):
    """A call named in _reduce.CALLS (sum, var, norm, softmax, cumsum, ...),
    its arguments bound by _reduce.plan_call.  A dtype= converts the input
    (a cast kernel) and, where the kernel's result has another dtype (the
    int64 sums of integers), the result, as the CPU's sum_or_prod does; an
    out= must then have that dtype (PyTorch's rule: dtype= names the
    result's dtype)."""
    def run(tensor, *args, out=None, **kwargs):
        dtype = _reduce.pop_dtype(name, kwargs)
        if dtype is not None and out is not None and out.dtype != dtype:
            raise RuntimeError(_out_dtype_error(_dtype_name(dtype), out.dtype))
        if dtype is not None and name.removeprefix("Tensor.") == "norm":
            # THTensor_newNorm's checks, on the input before it is converted
            _check_floating("linalg.vector_norm", tensor, low_precision=True)
            _check_norm_dtype("linalg.vector_norm", tensor.dtype, dtype)
        if dtype is not None and dtype != tensor.dtype:
            tensor = _cast_into(ember.empty(tensor.shape, dtype=dtype, device="cuda"), tensor)
        plan = _reduce.plan_call(name, (tensor, *args), kwargs)
        if dtype is None or plan.out_dtype == _dtype_name(dtype):
            return _run_reduction(plan, tensor, out)
        result = _destination(out, plan.out_shape, _dtype_name(dtype), plan.op)
        return _cast_into(result, _run_reduction(plan, tensor))
    return run


def _max_or_min(values_op, index_op):
    """max/min: the value over everything, or (values, indices) along a dim."""
    def run(tensor, dim=None, keepdim=False):
        if dim is None:
            return _reduction(values_op, tensor)
        if isinstance(dim, ember.Tensor):  # maximum(a, b) spelt max(a, b)
            return _pointwise_op("maximum" if values_op == "amax" else "minimum", tensor, dim)
        result = getattr(ember.return_types, values_op[1:])
        return result((_reduction(values_op, tensor, dim, keepdim),
                       _reduction(index_op, tensor, dim, keepdim)))
    return run


def _clamp(tensor, min=None, max=None, out=None):
    """clamp with a missing bound as the dtype's own extreme (the kernel
    always takes both)."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if tensor.dtype.is_floating_point:
        low, high = -math.inf, math.inf
    elif tensor.dtype == ember.bool:
        low, high = False, True
    else:
        import numpy
        info = numpy.iinfo(_dtype_name(tensor.dtype))
        low, high = int(info.min), int(info.max)
    return _pointwise_op("clamp", tensor, low if min is None else min,
                         high if max is None else max, out=out)


def _binary(op):
    def run(a, b, *, alpha=1, out=None):
        if alpha != 1 and op in ("add", "sub"):
            return _pointwise_op(f"{op}_alpha", a, b, alpha=alpha, out=out)
        return _pointwise_op(op, a, b, out=out)
    return run


def _div(a, b, *, rounding_mode=None, out=None):
    modes = {None: "div", "trunc": "div_trunc", "floor": "div_floor"}
    if rounding_mode not in modes:
        raise RuntimeError("div expected rounding_mode to be one of None, 'trunc', or "
                           f"'floor' but found '{rounding_mode}'")
    return _pointwise_op(modes[rounding_mode], a, b, out=out)


def _pointwise_with_value(op):
    """addcmul/addcdiv: self + value * t1 (*, /) t2, value in the parameter."""
    def run(tensor, tensor1, tensor2, *, value=1, out=None):
        return _pointwise_op(op, tensor, tensor1, tensor2, alpha=value, out=out)
    return run


def _operator(op):
    """A pointwise operator's plain form (no keyword of its own but out=)."""
    def run(*operands, out=None):
        return _pointwise_op(op, *operands, out=out)
    return run


def _copy_kernel(tensor):
    """clone()/contiguous(): where(true, x, x) stores x's values densely;
    the pointwise template's copy, exact for every dtype (the condition is
    a CPU 0-dim tensor: passed by value)."""
    return _pointwise_op("where", ember.tensor(True), tensor, tensor)


def _fill(result, value):
    """Stores `value` into every element of `result` (a CUDA tensor): the
    copy kernel over a CPU number expanded to result's shape (passed by
    value, so nothing is read from the host)."""
    if result.numel():  # an empty result has no element to read the value from
        scalar = ember.tensor(value, dtype=result.dtype).expand(result.shape)
        _pointwise_op("where", ember.tensor(True), scalar, scalar, out=result)
    return result


def _new_filled(shape, dtype, value, requires_grad):
    result = ember.empty(shape, dtype=dtype, device="cuda")
    if value is not None:
        _fill(result, value)
    return result.requires_grad_(requires_grad)


def _factory(value):
    """zeros/ones(..., device='cuda'): the CPU factory's checks and metadata
    (ember.empty never touches its memory), a CUDA result, one fill."""
    def run(*size, device=None, requires_grad=False, **kwargs):
        meta = ember.empty(*size, **kwargs)
        return _new_filled(tuple(meta.shape), meta.dtype, value, requires_grad)
    return run


def _full(size, fill_value, *, device=None, requires_grad=False, **kwargs):
    dtype = ember.full((), fill_value, **kwargs).dtype  # inferred from the value, as on the CPU
    return _new_filled(tuple(ember.empty(size).shape), dtype, fill_value, requires_grad)


def _like_factory(value):
    """zeros_like/ones_like/full_like(t, ..., device='cuda')."""
    def run(tensor, *fill_value, dtype=None, device=None, requires_grad=False, **kwargs):
        fill = fill_value[0] if fill_value else kwargs.pop("fill_value", value)
        dtype = dtype or tensor.dtype
        if device is not None and _device_type(device) == "cpu":
            return ember.full(tuple(tensor.shape), fill, dtype=dtype,
                              requires_grad=requires_grad)
        return _new_filled(tuple(tensor.shape), dtype, fill, requires_grad)
    return run


def _made_on_the_host(factory):
    """tensor/arange/linspace/eye(..., device='cuda'): the CPU factory's
    values, copied over (they are small or one-off: no kernel of their own)."""
    def run(*args, device=None, requires_grad=False, **kwargs):
        host = getattr(ember, factory)(*args, **kwargs)
        return _to_device(host).requires_grad_(requires_grad)
    return run


def _fill_into(tensor, value, out=None):
    """fill/fill_ (out=tensor for the in-place form)."""
    return _fill(ember.empty_like(tensor) if out is None else out, value)


def _reshape(tensor, *shape):
    """A view where the strides allow one, else a view of a dense copy (as
    the CPU's reshape)."""
    try:
        return tensor.view(*shape)
    except RuntimeError:
        return _copy_kernel(tensor).view(*shape)


_OPERATORS = {
    **{op: _operator(op) for op, info in _pointwise.ops().items() if op not in
       ("add", "sub", "div", "add_alpha", "sub_alpha", "clamp", "addcmul", "addcdiv",
        "div_trunc", "div_floor", "lshift", "rshift")},
    **{op: functools.partial(_unary_op, op) for op in _kernels.float_formulas()
       if op not in ("round_decimals", "nan_to_num")},
    **{op: functools.partial(_predicate, op) for op in _kernels.predicate_formulas()},
    **{name: _reduction_call(name) for name in _reduce.CALLS},
    "add": _binary("add"), "sub": _binary("sub"), "subtract": _binary("sub"),
    "div": _div, "divide": _div, "true_divide": _div, "multiply": _operator("mul"),
    "floor_divide": _operator("div_floor"), "clamp": _clamp, "clip": _clamp,
    "addcmul": _pointwise_with_value("addcmul"), "addcdiv": _pointwise_with_value("addcdiv"),
    "max": _max_or_min("amax", "argmax"), "min": _max_or_min("amin", "argmin"),
    "clone": _copy_kernel, "contiguous": lambda t: t if t.is_contiguous() else _copy_kernel(t),
    "zeros": _factory(0), "ones": _factory(1), "full": _full,
    "zeros_like": _like_factory(0), "ones_like": _like_factory(1),
    "full_like": _like_factory(None), "fill": _fill_into,
    "zero": lambda tensor, out=None: _fill_into(tensor, 0, out=out),
    "reshape": _reshape,
    **{name: _made_on_the_host(name) for name in ("tensor", "arange", "linspace", "eye")},
    "gelu": lambda tensor, approximate="none", out=None: _unary_op(
        "gelu_tanh" if approximate == "tanh" else "gelu", tensor, out=out),
}
# The number protocol: the slot's operands in order (1 - t is __sub__(1, t)).
_NUMBER_SLOTS = {
    "__add__": "add", "__sub__": "sub", "__mul__": "mul", "__truediv__": "div",
    "__floordiv__": "floor_divide", "__mod__": "remainder", "__pow__": "pow",
    "__and__": "bitwise_and", "__or__": "bitwise_or", "__xor__": "bitwise_xor",
    "__lshift__": "lshift", "__rshift__": "rshift", "__neg__": "neg", "__abs__": "abs",
    "__invert__": "bitwise_not", "__eq__": "eq", "__ne__": "ne", "__lt__": "lt",
    "__le__": "le", "__gt__": "gt", "__ge__": "ge",
}
_OPERATORS["lshift"] = _operator("lshift")
_OPERATORS["rshift"] = _operator("rshift")


# ---- matrix products: cuBLAS through CuPy, and a tiled kernel for 16 bits -------

def _matmul_shape(a, b):
    """torch.matmul's result shape: 1-D operands gain (and lose) a dim,
    batch dims broadcast."""
    if a.ndim == 0 or b.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{a.ndim}D and {b.ndim}D")
    a_shape = (1,) + tuple(a.shape) if a.ndim == 1 else tuple(a.shape)
    b_shape = tuple(b.shape) + (1,) if b.ndim == 1 else tuple(b.shape)
    if a_shape[-1] != b_shape[-2]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a_shape[-2]}x"
                           f"{a_shape[-1]} and {b_shape[-2]}x{b_shape[-1]})")
    batch = _pointwise._broadcast_shape([a_shape[:-2], b_shape[:-2]])
    return batch + (a_shape[-2],) * (a.ndim > 1) + (b_shape[-1],) * (b.ndim > 1)


def _matmul(a, b, out=None):
    """matmul/mm/bmm on the GPU: one cuBLAS call (the runtime's matmul), or
    for float16/bfloat16 one launch of ember's tiled kernel."""
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: "
                           f"{_dtype_name(a.dtype)} != {_dtype_name(b.dtype)}")
    dtype = _dtype_name(a.dtype)
    if dtype not in ("float32", "float64") + _tiled_matmul.DTYPES:
        raise RuntimeError(f'"addmm_cuda" not implemented for '
                           f"'{_pointwise.SCALAR_TYPE_NAMES.get(dtype, dtype)}'")
    out = _destination(out, _matmul_shape(a, b), dtype, "matmul")
    if not out.numel():
        return out
    if dtype in _tiled_matmul.DTYPES:
        _half_matmul(out, a, b)
    else:
        _runtime.current().matmul(out, a, b)
    return out


@functools.cache
def _matmul_kernel(dtype):
    return _runtime.Kernel(_tiled_matmul.kernel_name(dtype), _tiled_matmul.kernel_source(dtype),
                           _tiled_matmul.headers(), _tiled_matmul.kernel_parameters(dtype), True)


def _half_matmul(out, a, b):
    """out = a @ b for float16/bfloat16 by ember's tiled kernel (Note [A
    tiled product] in _matmul.py), as 3-d operands: a 1-d operand gains
    the dim torch.matmul gives it, batch dims are broadcast and merged
    into one (a copy where an operand's batch dims do not merge)."""
    a3 = a.unsqueeze(0) if a.ndim == 1 else a
    b3 = b.unsqueeze(-1) if b.ndim == 1 else b
    batch = tuple(_broadcast_shapes(tuple(a3.shape[:-2]), tuple(b3.shape[:-2])))
    m, k, n = a3.shape[-2], a3.shape[-1], b3.shape[-1]
    count = math.prod(batch)
    a3 = a3.expand(batch + (m, k)).reshape(count, m, k)
    b3 = b3.expand(batch + (k, n)).reshape(count, k, n)
    target = out if out.is_contiguous() else ember.empty(tuple(out.shape), dtype=out.dtype,
                                                         device="cuda")
    c3 = target.view(count, m, n)
    shape = _tiled_matmul.shape_of(a3, b3, c3)
    grid = min(_tiled_matmul.tile_count(shape), _launch.sm_count() * _launch.BLOCKS_PER_SM)
    _launch_kernel(_matmul_kernel(_dtype_name(a.dtype)), ((grid,), (_tiled_matmul.TILE ** 2,)),
                   [ctypes.c_void_p(a3.data_ptr()), ctypes.c_void_p(b3.data_ptr()),
                    ctypes.c_void_p(c3.data_ptr()), shape])
    if target is not out:
        _copy_(out, target)


def _mm(a, b, out=None):
    if a.ndim != 2 or b.ndim != 2:
        raise RuntimeError(f"{'self' if a.ndim != 2 else 'mat2'} must be a matrix")
    return _matmul(a, b, out=out)


def _bmm(a, b, out=None):
    if a.ndim != 3 or b.ndim != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor" if a.ndim != 3
                           else "batch2 must be a 3D tensor")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError("batch1 and batch2 must have same number of batches, got "
                           f"{a.shape[0]} and {b.shape[0]}")
    return _matmul(a, b, out=out)


def _addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (mat1 @ mat2): the product, then one
    pointwise kernel (input is not read when beta is 0, as in PyTorch)."""
    product = _mm(mat1, mat2)
    if beta == 0:
        return _pointwise_op("mul", product, alpha, out=out)
    if beta != 1:
        input = _pointwise_op("mul", input, beta)
    return _pointwise_op("add_alpha", input.expand(product.shape), product, alpha=alpha,
                         out=out)


# ---- t[index]: the basic items make a view, index tensors a kernel ----------------

class _BoolItem:
    """t[True] is t[None][[0]] and t[False] is t[None][[]]: a new size-1
    dim and the positions that index it (c/python/Indexing.c)."""

    def __init__(self, value):
        self.positions = ember.tensor([0] if value else [], dtype=ember.int64)


_MASK_DTYPES = (ember.bool, ember.uint8)
_POSITION_DTYPES = (ember.int64, ember.int32)


def _index_item(item):
    """One item of an index as c/python/Indexing.c:parse_item classifies
    it: None, Ellipsis, a slice, an int, a _BoolItem or an index tensor
    (sequences and arrays become tensors; a 0-d integer tensor is an int)."""
    if item is None or item is Ellipsis or isinstance(item, slice):
        return item
    if isinstance(item, bool):
        return _BoolItem(item)
    if isinstance(item, int):
        return item
    if not isinstance(item, ember.Tensor):
        if hasattr(item, "__len__") and not isinstance(item, (str, bytes)):
            # no positions: int64, not the float dtype ember.tensor([]) gives
            item = ember.tensor(item) if len(item) else ember.empty(0, dtype=ember.int64)
        elif hasattr(item, "__index__"):
            return item.__index__()  # a NumPy integer
        else:
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or "
                             f"byte Variables are valid indices (got {type(item).__name__})")
    if item.ndim == 0 and item.dtype == ember.bool:
        return _BoolItem(bool(item))
    if item.ndim == 0 and not item.dtype.is_floating_point:
        return int(item)
    return item


def _index_items(tensor, index):
    """The items of `index` (a tuple, or one item standing for a tuple of one)."""
    items = [_index_item(item) for item in (index if isinstance(index, tuple) else (index,))]
    if not isinstance(index, tuple) and tensor.ndim == 0 and isinstance(items[0], int):
        raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                         "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
    return items


def _consumed_dims(item):
    """How many of the tensor's dims an item consumes (a k-dim mask: k)."""
    if isinstance(item, ember.Tensor):
        return item.ndim if item.dtype in _MASK_DTYPES else 1
    return int(isinstance(item, (int, slice)))


def _basic_step(view, dim, position, item):
    """The view one int, slice, None or bool makes at dim `dim`, and the
    dim the next item starts at."""
    if isinstance(item, int):
        size = view.shape[dim]
        if not -size <= item < size:
            # PyTorch names the item's position in the index, not the dim
            raise IndexError(f"index {item} is out of bounds for dimension {position} with "
                             f"size {size}")
        return view.select(dim, item % size), dim
    if isinstance(item, slice):
        start, stop, step = item.indices(view.shape[dim])
        if step <= 0:
            raise ValueError("step must be greater than zero")
        sizes, strides = list(view.shape), list(view.stride())
        offset = view.storage_offset() + start * strides[dim]
        sizes[dim] = max(0, -(-(stop - start) // step))
        strides[dim] *= step
        return view.as_strided(sizes, strides, offset), dim + 1
    return view.unsqueeze(dim), dim + 1  # None, or a bool's new dim


def _index_view(tensor, items):
    """c/python/Indexing.c:apply_basic_items: the view the basic items
    make, and the index tensors standing at its leading dims (None for a
    dim kept whole, a k-dim mask for k dims); [] when there are none."""
    specified = sum(_consumed_dims(item) for item in items)
    if sum(item is Ellipsis for item in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if specified > tensor.ndim:
        raise IndexError(f"too many indices for tensor of dimension {tensor.ndim}")
    view, dim, at_dim = tensor, 0, {}
    for position, item in enumerate(items):
        if item is Ellipsis:
            dim += tensor.ndim - specified
        elif isinstance(item, ember.Tensor):
            at_dim[dim] = item
            dim += _consumed_dims(item)
        else:
            if isinstance(item, _BoolItem):
                at_dim[dim] = item.positions
            view, dim = _basic_step(view, dim, position, item)
    advanced, d = [], 0
    while at_dim and d < dim:
        advanced.append(at_dim.get(d))
        d += 1 if d not in at_dim else _consumed_dims(at_dim[d])
    return view, advanced


def _basic_view(tensor, index):
    """t[index] for ints, slices, None and Ellipsis: a view (as_strided),
    as the CPU's basic indexing."""
    view, advanced = _index_view(tensor, _index_items(tensor, index))
    assert not advanced, "an index of ints, slices, None and Ellipsis"
    return view


def _check_indexed_on_device(tensor):
    """A CUDA index tensor can only index a CUDA tensor (a CPU one may
    index either)."""
    if not tensor.is_cuda:
        raise RuntimeError("indices should be either on cpu or on the same device as the "
                           f"indexed tensor ({tensor.device.type})")


def _getitem(tensor, index):
    """t[index]: the view of the basic items, then (with index tensors)
    one gather through element offsets (_index_gather)."""
    _check_indexed_on_device(tensor)
    view, advanced = _index_view(tensor, _index_items(tensor, index))
    return _index_gather(view, advanced) if advanced else view


def _setitem(tensor, index, value):
    view, advanced = _index_view(tensor, _index_items(tensor, index))
    if advanced:
        _check_indexed_on_device(tensor)
        if not isinstance(value, ember.Tensor):
            value = ember.tensor(value, dtype=tensor.dtype)
        if value.dtype != tensor.dtype:
            value = value.to(tensor.dtype)
        _index_put_into(view, advanced, value, accumulate=False)
    elif isinstance(value, ember.Tensor):
        _copy_(view, value)
    else:
        _fill(view, value)


_OPERATORS.update(__getitem__=_getitem, __setitem__=_setitem)


# ---- joining: one copy kernel per input, into views of the result -------------------

def _cat(tensors, dim=0, *, out=None):
    """cat: the result from the CUDA allocator, each input copied into its
    slice (a view) by the copy kernel."""
    tensors = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]  # legacy empties
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    first = tensors[0]
    if first.ndim == 0:
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    if not -first.ndim <= dim < first.ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-first.ndim}, {first.ndim - 1}], but got {dim})")
    dim %= first.ndim
    for k, t in enumerate(tensors):
        for d in range(first.ndim):
            if t.ndim != first.ndim or (d != dim and t.shape[d] != first.shape[d]):
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {dim}. Expected size "
                    f"{first.shape[d]} but got size {t.shape[d] if t.ndim > d else None} "
                    f"for tensor number {k} in the list.")
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = ember.result_type(ember.empty(1, dtype=dtype), t)
    shape = list(first.shape)
    shape[dim] = sum(t.shape[dim] for t in tensors)
    if _converting_out(out, tuple(shape), _dtype_name(dtype)):
        dtype = out.dtype  # each input converts as it is copied in (a cast kernel)
    elif out is not None and out.dtype != dtype:  # PyTorch's (and the CPU's) TypeError
        raise TypeError(f"torch.cat(): input types can't be cast to the desired output type "
                        f"{_type_name(out.dtype)}")
    out = _destination(out, tuple(shape), _dtype_name(dtype), "cat")
    start = 0
    for t in tensors:
        index = (slice(None),) * dim + (slice(start, start + t.shape[dim]),)
        if t.numel():
            _copy_(_basic_view(out, index), t)
        start += t.shape[dim]
    return out


def _stack(tensors, dim=0, *, out=None):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    for k, t in enumerate(tensors):
        if t.shape != tensors[0].shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(tensors[0].shape)} at entry 0 and {list(t.shape)} at "
                               f"entry {k}")
    return _cat([t.unsqueeze(dim) for t in tensors], dim, out=out)


_OPERATORS.update(cat=_cat, concat=_cat, concatenate=_cat, stack=_stack)


# ---- random numbers: Philox kernels (_random.py) --------------------------------------

@functools.cache
def _random_kernel(distribution, dtype):
    return _runtime.Kernel(_random.kernel_name(distribution, dtype),
                           _random.kernel_source(distribution, dtype), _random.headers(),
                           _random.kernel_parameters(distribution, dtype), False)


# The host's ctypes for the distributions' parameters (_random._PARAMETERS).
_RANDOM_PARAMETER_CTYPES = {"double": ctypes.c_double, "int64_t": ctypes.c_int64,
                            "uint64_t": ctypes.c_uint64, "const double *": ctypes.c_void_p}


def _random_fill(out, distribution, *parameters):
    """Fills `out` with the distribution's values: one Philox kernel, with
    counters from the CUDA generator (a dense temporary for a strided out).
    `parameters`: numbers, or a CUDA tensor for a pointer."""
    dtype = _dtype_name(out.dtype)
    if dtype not in _random.dtypes_of(distribution):
        raise NotImplementedError(f"ember.cuda: {distribution} random numbers of dtype "
                                  f"{dtype} (ember's CUDA generator makes "
                                  f"{', '.join(_random.dtypes_of(distribution))})")
    target = out if out.is_contiguous() else ember.empty(out.shape, dtype=out.dtype,
                                                         device="cuda")
    n = out.numel()
    if n:
        seed, offset = _random.default_generator.take(distribution, dtype, n)
        kernel = _random_kernel(distribution, dtype)
        ctypes_ = [_RANDOM_PARAMETER_CTYPES[ctype] for ctype, _ in kernel.parameters[4:]]
        _launch_kernel(kernel, _launch.launch_config(n),
                       [ctypes.c_void_p(target.data_ptr()), ctypes.c_int64(n),
                        ctypes.c_uint64(seed), ctypes.c_uint64(offset)]
                       + [ctype(x.data_ptr() if isinstance(x, ember.Tensor) else x)
                          for ctype, x in zip(ctypes_, parameters)])
    if target is not out:
        _copy_(out, target)
    return out


def _no_generator(generator):
    if generator is not None:
        raise RuntimeError("ember.cuda draws from its default generator only (generator= "
                           "takes CPU generators)")


def _random_factory(distribution, a, b):
    """rand/randn(*size, ..., device='cuda'): the CPU factory's checks."""
    def run(*size, generator=None, device=None, requires_grad=False, **kwargs):
        _no_generator(generator)
        meta = ember.empty(*size, **kwargs)
        out = ember.empty(tuple(meta.shape), dtype=meta.dtype, device="cuda")
        return _random_fill(out, distribution, a, b).requires_grad_(requires_grad)
    return run


def _random_like(distribution, a, b):
    def run(tensor, *, dtype=None, device=None, requires_grad=False, **kwargs):
        out = ember.empty(tuple(tensor.shape), dtype=dtype or tensor.dtype, device="cuda")
        return _random_fill(out, distribution, a, b).requires_grad_(requires_grad)
    return run


def _randint(*args, size=None, generator=None, dtype=None, device=None,
             requires_grad=False, **kwargs):
    """randint(high, size) or randint(low, high, size), in any dtype."""
    _no_generator(generator)
    if size is None:
        *args, size = args
    low, high = (0, *args) if len(args) == 1 else args
    out = ember.empty(tuple(ember.empty(size).shape), dtype=dtype or ember.int64, device="cuda")
    return _random_fill(out, "randint", *_random.random_bounds(_dtype_name(out.dtype),
                                                               low, high))


def _randint_like(tensor, *bounds, dtype=None, device=None, requires_grad=False,
                  generator=None, **options):
    """randint_like(input, high) or randint_like(input, low, high): input's
    shape, and its dtype unless dtype= is given."""
    _no_generator(generator)
    named = {name: options.pop(name) for name in ("low", "high") if name in options}
    given = dict(zip(("high",) if len(bounds) == 1 else ("low", "high"), bounds), **named)
    out = ember.empty(tuple(tensor.shape), dtype=dtype or tensor.dtype, device="cuda")
    low, high = given.get("low", 0), given["high"]
    return _random_fill(out, "randint", *_random.random_bounds(_dtype_name(out.dtype), low,
                                                               high)).requires_grad_(requires_grad)


def _integer_argument(value, name):
    """random_'s from/to: an int (the CPU's THPUtils_unpackLong message)."""
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"random_(): argument '{name}' must be int, not "
                        f"{type(value).__name__}") from None


def _random_(tensor, *bounds, generator=None, out=None, **named):
    """random_(from, to), random_(to), random_(): integers in [from, to),
    by default from 0 to the dtype's largest (_random.random_bounds)."""
    _no_generator(generator)
    given = dict(zip(("from", "to"), bounds), **named)
    if len(bounds) == 1 and "to" not in named:  # x.random_(10): [0, 10)
        given = {"to": bounds[0]}
    low = _integer_argument(given.get("from", 0), "from")
    high = given.get("to")
    if high is not None:
        high = _integer_argument(high, "to")
    out = tensor if out is None else out
    return _random_fill(out, "randint", *_random.random_bounds(_dtype_name(out.dtype),
                                                               low, high))


def _exponential_(tensor, lambd=1.0, *, generator=None, out=None):
    _no_generator(generator)
    out = tensor if out is None else out
    if _dtype_name(out.dtype) not in _random.FLOATING:
        raise RuntimeError(f"Exponential distribution is a continuous probability "
                           f"distribution. dtype must be a floating point but you specified "
                           f"{_dtype_name(out.dtype)}")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd:g}")
    return _random_fill(out, "exponential", lambd)


def _probabilities(p, shape):
    """A tensor of probabilities as the bernoulli_tensor kernel reads them:
    dense float64 of `shape` on the device, every value checked in [0, 1]."""
    if not p.is_cuda:  # a 0-dim CPU tensor goes with CUDA ones
        p = _to_device(p)
    if not bool(((p >= 0) & (p <= 1)).all()):  # a NaN fails both
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    return _dense_on_device(_cast_on_device(p, ember.float64).expand(shape))


def _bernoulli_(tensor, p=0.5, *, generator=None):
    """bernoulli_(p): 1 with probability p (a number, or a tensor that
    broadcasts to tensor's shape), in tensor's dtype."""
    _no_generator(generator)
    if isinstance(p, ember.Tensor):
        return _random_fill(tensor, "bernoulli_tensor", _probabilities(p, tensor.shape))
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p:g}")
    return _random_fill(tensor, "bernoulli", p)


def _bernoulli(tensor, p=None, *, generator=None, out=None):
    """bernoulli(input): 1 with probability input[i]; bernoulli(input, p):
    with probability p, shaped like input."""
    out = _destination(out, tuple(tensor.shape), _dtype_name(tensor.dtype), "bernoulli")
    return _bernoulli_(out, tensor if p is None else p, generator=generator)


def _uniform_(tensor, a=0.0, b=1.0, *, generator=None, out=None, **bounds):
    _no_generator(generator)
    a, b = bounds.get("from", a), bounds.get("to", b)
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found "
                           f"from={a:g} > to={b:g}")
    return _random_fill(tensor if out is None else out, "uniform", a, b)


def _normal_(tensor, mean=0.0, std=1.0, *, generator=None, out=None):
    _no_generator(generator)
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    return _random_fill(tensor if out is None else out, "normal", mean, std)


_OPERATORS.update(rand=_random_factory("uniform", 0.0, 1.0),
                  randn=_random_factory("normal", 0.0, 1.0),
                  rand_like=_random_like("uniform", 0.0, 1.0),
                  randn_like=_random_like("normal", 0.0, 1.0),
                  randint=_randint, randint_like=_randint_like, uniform=_uniform_,
                  normal=_normal_, random=_random_,
                  exponential=_exponential_, bernoulli=_bernoulli)
_OPERATORS.update(matmul=_matmul, __matmul__=_matmul, mm=_mm, bmm=_bmm, addmm=_addmm)


# ---- indexing along a dim: gather and scatter-add kernels (_index.py) ---------------

@functools.cache
def _index_kernel(kind, dtype, index_dtype):
    return _runtime.Kernel(_index.kernel_name(kind, dtype, index_dtype),
                           _index.kernel_source(kind, dtype, index_dtype), _index.headers(),
                           _index.kernel_parameters(kind, dtype, index_dtype), False)


def _index_launch(kind, operands, index, shape, strides, *, alpha=0, dim=None, dim_size=0,
                  bad_index=None):
    """One launch of the _index.py `kind` over `shape`: its pointer
    operands in the kind's order, the index (or offsets) tensor and the
    (indexed, other, index) strides.  With `bad_index`, raises
    bad_index(k) for an index out of range, read back from the kernel's
    error slot."""
    dtype, index_dtype = _dtype_name(operands[0].dtype), _dtype_name(index.dtype)
    if index_dtype not in _index.INDEX_DTYPES:
        raise RuntimeError(f"{kind}(): Expected dtype int64 for index")
    if dtype not in _index.DTYPES:
        raise NotImplementedError(f"ember.cuda: indexing a {dtype} tensor (ember's CUDA index "
                                  f"kernels take {', '.join(_index.DTYPES)})")
    n = math.prod(shape)
    if not n:
        return
    error = ember.zeros(2, dtype=ember.int64, device="cuda") if bad_index else None
    g = _index.geometry(shape, dim, dim_size, *strides)
    scalar = _pointwise.CTYPES[dtype]
    _launch_kernel(_index_kernel(kind, dtype, index_dtype), _launch.launch_config(n),
                   [ctypes.c_void_p(x.data_ptr()) for x in operands]
                   + [ctypes.c_void_p(index.data_ptr()), ctypes.c_int64(n), g,
                      scalar(_pointwise.number_as(alpha, dtype)),
                      ctypes.c_void_p(None if error is None else error.data_ptr())])
    if error is not None:
        flag, value = _to_host(error).tolist()
        if flag:
            raise bad_index(value)


def _along(kind, target, walked, index, shape, dim, alpha, bad_index):
    """A gather (target: the result) or scatter-add (target: written)
    along `dim` over `shape`, walking `walked` in order."""
    walked, index = _on_device(walked), _on_device(index)  # a CPU 0-d tensor may come along
    indexed, other = (walked, target) if kind == "gather" else (target, walked)
    _index_launch(kind, (target, walked), index, shape,
                  (indexed.stride(), other.stride(), index.stride()), alpha=alpha, dim=dim,
                  dim_size=indexed.shape[dim] if indexed.ndim else 1, bad_index=bad_index)


def _out_of_bounds(dim, size):
    return lambda k: RuntimeError(f"index {k} is out of bounds for dimension {dim} with "
                                  f"size {size}")


def _along_dim(index, ndim, dim):
    """index (1-D) as seen along `dim` of an ndim tensor: its stride there,
    0 elsewhere."""
    strides = [0] * ndim
    strides[dim] = index.stride(0) if index.ndim else 0
    return index.as_strided([index.numel() if d == dim else 1 for d in range(ndim)], strides)


def _gather(input, dim, index, *, sparse_grad=False, out=None):
    dim = _wrap(dim, input.ndim)
    if index.ndim != input.ndim and not (index.ndim <= 1 and input.ndim <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input "
                           "tensor")
    out = _destination(out, tuple(index.shape), _dtype_name(input.dtype), "gather")
    shape = tuple(index.shape)
    _along("gather", out, input, index.expand(shape), shape, dim, 0,
           _out_of_bounds(dim, input.shape[dim] if input.ndim else 1))
    return out


def _index_select(input, dim, index, *, out=None):
    dim = _wrap(dim, input.ndim)
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    shape = tuple(index.numel() if d == dim else s for d, s in enumerate(input.shape))
    out = _destination(out, shape, _dtype_name(input.dtype), "index_select",
                       dtype_error="index_select(): self and result must have the same "
                                   "scalar type")
    if input.ndim:
        seen = _along_dim(index, input.ndim, dim).expand(shape)
        _along("gather", out, input, seen, shape, dim, 0,
               lambda k: IndexError("index out of range in self"))
    return out


def _scatter_add(input, dim, index, src, *, out=None):
    """scatter_add (out=input: scatter_add_): target += src at the indices."""
    dim = _wrap(dim, input.ndim)
    if out is not None:
        _check_no_overlap(out, index)
        _check_no_overlap(out, src)
    target = _copy_kernel(input) if out is None else out
    shape = tuple(index.shape)
    _along("scatter_add", target, src, index, shape, dim, 1,
           _out_of_bounds(dim, target.shape[dim]))
    return target


def _index_add(input, dim, index, source, *, alpha=1, out=None):
    dim = _wrap(dim, input.ndim)
    if out is not None:
        _check_no_overlap(out, index)
        _check_no_overlap(out, source)
    target = _copy_kernel(input) if out is None else out
    shape = tuple(source.shape)
    seen = _along_dim(index, input.ndim, dim).expand(shape)
    _along("scatter_add", target, source, seen, shape, dim, alpha,
           _out_of_bounds(dim, target.shape[dim]))
    return target


def _masked_fill(input, mask, value, *, out=None):
    """where(mask, value, input), the value in input's dtype (as PyTorch)."""
    if isinstance(value, ember.Tensor):
        value = value.item()
    value = _pointwise.number_as(value, _dtype_name(input.dtype))
    return _pointwise_op("where", mask.expand(input.shape), value, input, out=out)


# ---- advanced indexing: Note [Advanced indexing] (c/th/THIndex.c), on the device ------

def _shape_text(shape):
    return "[" + ", ".join(map(str, shape)) + "]"


def _on_device(tensor):
    return tensor if tensor.is_cuda else _to_device(tensor)


def _check_index_dtypes(tensor, advanced):
    consumed = 0
    for index in advanced:
        if index is not None and index.dtype not in _POSITION_DTYPES + _MASK_DTYPES:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if index is not None and index.dtype in _MASK_DTYPES and index.ndim == 0:
            raise IndexError("a 0-dim bool index is only supported by tensor[...] indexing")
        consumed += 1 if index is None else _consumed_dims(index)
    if consumed > tensor.ndim:
        raise IndexError(f"too many indices for tensor of dimension {tensor.ndim} "
                         f"(got {consumed})")


def _index_per_dim(tensor, advanced):
    """The position tensor standing at each dim of `tensor` (None: kept
    whole), on the device; a k-dim mask becomes the k columns of its
    nonzero(), after its shape is checked against the dims it covers."""
    _check_index_dtypes(tensor, advanced)
    per_dim = []
    for index in advanced:
        if index is None or index.dtype not in _MASK_DTYPES:
            per_dim.append(None if index is None else _on_device(index))
            continue
        dim = len(per_dim)
        for j, size in enumerate(index.shape):
            if size != tensor.shape[dim + j]:
                raise IndexError(f"The shape of the mask {_shape_text(index.shape)} at index {j} "
                                 f"does not match the shape of the indexed tensor "
                                 f"{_shape_text(tensor.shape)} at index {dim + j}")
        columns = _nonzero(_on_device(index))
        per_dim += [columns.select(1, j) for j in range(index.ndim)]
    return per_dim + [None] * (tensor.ndim - len(per_dim))


def _broadcast_indices(indexed):
    try:
        return _pointwise._broadcast_shape([tuple(i.shape) for i in indexed])
    except RuntimeError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                         "with shapes " + ", ".join(_shape_text(i.shape) for i in indexed)) \
            from None


# tensor: the indexed tensor with its indexed dims adjacent; sizes: the
# result's; tensor_strides (0 along B) and offset_strides (0 outside B)
# lay the tensor and the offsets (int64, shape B) out in the result's shape.
_IndexPlan = namedtuple("_IndexPlan", "tensor sizes tensor_strides offset_strides offsets")


def _out_of_bounds_at(value, k, size):
    """t[idx]'s error: PyTorch names the index tensor's position k."""
    return IndexError(f"index {value} is out of bounds for dimension {k} with size {size}")


def _index_plan(tensor, advanced, bad_index=_out_of_bounds_at):
    """c/th/THIndex.c:plan_init on the device: the result is (dims before
    the indexed ones) + B + (dims after), B the index tensors' broadcast
    shape, with the indexed dims made adjacent first when they are not
    (then B comes first); one `offsets` launch per indexed dim sums each
    position's element offset, checking it against the dim's size
    (bad_index(value, k, size): the error for index tensor k's value)."""
    per_dim = _index_per_dim(tensor, advanced)
    positions = [d for d, index in enumerate(per_dim) if index is not None]
    indexed = [per_dim[d] for d in positions]
    b_shape = _broadcast_indices(indexed)
    first = positions[0]
    if positions[-1] - first != len(positions) - 1:  # not adjacent: B goes first
        tensor = tensor.permute(positions + [d for d, i in enumerate(per_dim) if i is None])
        first = 0
    after = first + len(indexed)
    sizes = tuple(tensor.shape[:first]) + b_shape + tuple(tensor.shape[after:])
    b_strides = _contiguous_strides(b_shape)
    offsets = ember.zeros(b_shape, dtype=ember.int64, device="cuda")
    for k, index in enumerate(indexed):
        size = tensor.shape[first + k]
        _index_launch("offsets", (offsets,), index, b_shape,
                      ((0,) * len(b_shape), b_strides,
                       _pointwise._broadcast_strides(index, b_shape)),
                      alpha=tensor.stride(first + k), dim_size=size,
                      bad_index=lambda value, k=k, size=size: bad_index(value, k, size))
    return _IndexPlan(tensor, sizes,
                      tuple(tensor.stride()[:first]) + (0,) * len(b_shape)
                      + tuple(tensor.stride()[after:]),
                      (0,) * first + b_strides + (0,) * (len(sizes) - first - len(b_shape)),
                      offsets)


def _index_gather(tensor, advanced, bad_index=_out_of_bounds_at):
    """tensor[advanced]: a new tensor, one `take` launch over its shape."""
    plan = _index_plan(tensor, advanced, bad_index)
    out = ember.empty(plan.sizes, dtype=tensor.dtype, device="cuda")
    _index_launch("take", (out, plan.tensor), plan.offsets, plan.sizes,
                  (plan.tensor_strides, out.stride(), plan.offset_strides))
    return out


def _overlaps(a, b):
    """Whether two tensors' memory spans meet."""
    def span(t):
        return t.data_ptr(), t.data_ptr() + t.element_size() * (
            1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride())))
    (a0, a1), (b0, b1) = span(a), span(b)
    return a.numel() and b.numel() and a0 < b1 and b0 < a1


def _is_dense(t):
    """c/th/THTensor.c:THTensor_isNonOverlappingAndDense: the elements fill
    their span, each once (size-1 dims aside)."""
    expected = 1
    for size, stride in sorted(((n, s) for n, s in zip(t.shape, t.stride()) if n != 1),
                               key=lambda pair: pair[1]):
        if stride != expected:
            return t.numel() == 0
        expected *= size
    return True


def _check_no_overlap(written, input):
    """c/th/THCopy.c:THTensor_checkNoOverlap: PyTorch's assert_no_overlap,
    which tells only for two dense tensors."""
    if _is_dense(written) and _is_dense(input) and _overlaps(written, input):
        raise RuntimeError("unsupported operation: some elements of the input tensor and the "
                           "written-to tensor refer to a single memory location. Please clone() "
                           "the tensor before performing the operation.")


def _put_values(values, sizes, target):
    """values (target's dtype) checked to broadcast to the indexing result
    (extra leading size-1 dims dropped), on the device and apart from
    target's memory: c/th/THIndex.c:new_put_values."""
    extra = values.ndim - len(sizes)
    if not all(size == 1 if d < extra else size in (1, sizes[d - extra])
               for d, size in enumerate(values.shape)):
        raise RuntimeError(f"shape mismatch: value tensor of shape {_shape_text(values.shape)} "
                           f"cannot be broadcast to indexing result of shape "
                           f"{_shape_text(sizes)}")
    if not values.is_cuda:
        values = _to_device(values)
    elif _overlaps(values, target):
        values = _copy_kernel(values)
    if extra > 0:
        values = values.as_strided(values.shape[extra:], values.stride()[extra:],
                                   values.storage_offset())
    return values.expand(sizes)


def _index_put_into(target, advanced, values, accumulate, bad_index=_out_of_bounds_at):
    """target[advanced] = values (+= with accumulate): one `put` (or
    atomic `put_add`) launch over the indexing result's shape."""
    plan = _index_plan(target, advanced, bad_index)
    values = _put_values(values, plan.sizes, target)
    _index_launch("put_add" if accumulate else "put", (plan.tensor, values), plan.offsets,
                  plan.sizes, (plan.tensor_strides, values.stride(), plan.offset_strides))


def _index_put(input, indices, values, accumulate=False, *, out=None):
    """index_put (out=input: index_put_)."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError("index_put_(): argument 'indices' (position 1) must be tuple of "
                        f"Tensors, not {type(indices).__name__}")
    if values.dtype != input.dtype:
        names = _pointwise.SCALAR_TYPE_NAMES
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{names[_dtype_name(input.dtype)]} for the destination and "
                           f"{names[_dtype_name(values.dtype)]} for the source.")
    target = _copy_kernel(input) if out is None else out
    _index_put_into(target, list(indices), values, accumulate)
    return target


@functools.cache
def _nonzero_kernel(dtype):
    return _runtime.Kernel(_index.nonzero_kernel_name(dtype), _index.nonzero_source(dtype),
                           _index.headers(), _index.nonzero_parameters(dtype), True)


def _nonzero_launch(tensor, out, count):
    """Note [Nonzero in one block]: one block; without `out` it only
    stores the count."""
    dtype = _dtype_name(tensor.dtype)
    zeros = (0,) * tensor.ndim
    g = _index.geometry(tuple(tensor.shape), None, 0, tensor.stride(), zeros, zeros)
    _launch_kernel(_nonzero_kernel(dtype), _index.nonzero_launch_config(tensor.numel()),
                   [ctypes.c_void_p(tensor.data_ptr()), ctypes.c_int64(tensor.numel()), g,
                    ctypes.c_void_p(None if out is None else out.data_ptr()),
                    ctypes.c_void_p(count.data_ptr())])


def _nonzero(input, *, out=None, as_tuple=False):
    """The coordinates of input's non-zero elements, one row each, in
    row-major order; as_tuple: one column per dim (a 0-d input counts as
    1-d, as in PyTorch)."""
    if as_tuple and out is not None:
        raise TypeError("nonzero(): out= is not supported with as_tuple=True")
    dtype = _dtype_name(input.dtype)
    if dtype not in _index.DTYPES:
        raise NotImplementedError(f"ember.cuda: nonzero of a {dtype} tensor")
    count = ember.zeros(1, dtype=ember.int64, device="cuda")
    if input.numel():
        _nonzero_launch(input, None, count)
    rows = int(_to_host(count).item())
    positions = _destination(out, (rows, input.ndim), "int64", "nonzero", dtype_error=(
        None if out is None else f"nonzero: Expected out tensor to have scalar type Long but "
                                 f"got scalar type{_type_name(out.dtype)}"))
    if rows and input.ndim:
        _nonzero_launch(input, positions, count)
    if not as_tuple:
        return positions
    if input.ndim == 0:
        return (_new_filled((rows,), ember.int64, 0, False),)
    return tuple(positions.select(1, d) for d in range(input.ndim))


def _masked_select(input, mask, *, out=None):
    """input[mask] after both broadcast (a 0-d pair counts as 1-d)."""
    if mask.dtype != ember.bool:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = tuple(_broadcast_shapes(mask.shape, input.shape)) or (1,)
    result = _index_gather(input.expand(shape), [mask.expand(shape)])
    if out is None:
        return result
    _copy_(_destination(out, tuple(result.shape), _dtype_name(input.dtype), "masked_select",
                        dtype_error="masked_select(): self and result must have the same "
                                    "scalar type"), result)
    return out


def _where(condition, *operands, out=None):
    """where(condition, x, y), or where(condition): nonzero(as_tuple=True)."""
    if not operands:
        return _nonzero(condition, as_tuple=True)
    return _pointwise_op("where", condition, *operands, out=out)


def _any_or_all(reduction):
    def run(tensor, dim=None, keepdim=False, *, out=None):
        nonzero = tensor if tensor.dtype == ember.bool else _pointwise_op("ne", tensor, 0)
        return _run_reduction(_reduce.plan(reduction, nonzero, dim, keepdim), nonzero, out)
    return run


def _repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """repeat_interleave on the device: a gather.  The index is the CPU's
    repeat_interleave of a stand-in of the input's rank whose elements are
    their positions along dim (arange; all of them when it flattens), so
    every check and error is the CPU's, and index_select gathers (one
    _index kernel).  Repeats on the device are read on the host first, as
    PyTorch's CUDA kernel reads their sum to size its result."""
    if isinstance(repeats, ember.Tensor) and repeats.is_cuda:
        repeats = _to_host(repeats)
    if repeats is None:  # repeat_interleave(repeats): arange(n) repeated
        return _to_device(ember.repeat_interleave(_to_host(input), output_size=output_size))
    flattens = dim is None or input.ndim == 0
    if flattens:
        stand_in = ember.arange(input.numel()).view(input.shape)
    else:
        shape = [1] * input.ndim
        if -input.ndim <= dim < input.ndim:
            shape[dim] = input.shape[dim]
        stand_in = ember.arange(math.prod(shape)).view(shape)
    index = ember.repeat_interleave(stand_in, repeats, dim, output_size=output_size)
    index = _to_device(index.reshape(-1))
    if flattens:
        return _index_select(input.reshape(-1), 0, index)
    return _index_select(input, dim, index)


_OPERATORS.update(gather=_gather, index_select=_index_select, scatter_add=_scatter_add,
                  index_add=_index_add, masked_fill=_masked_fill, any=_any_or_all("amax"),
                  all=_any_or_all("amin"), index_put=_index_put, nonzero=_nonzero,
                  argwhere=_nonzero, masked_select=_masked_select, where=_where,
                  repeat_interleave=_repeat_interleave)


# ---- scatter, scatter_reduce, index_fill, take: the CPU's checks, then launches -----

def _check_written(target):
    """c/th/THCopy.c:THTensor_checkNoInternalOverlap: no write through an
    expanded dim, whose result would depend on the order of the writes."""
    if target.numel() and any(stride == 0 and size > 1
                              for size, stride in zip(target.shape, target.stride())):
        raise RuntimeError("unsupported operation: more than one element of the written-to "
                           "tensor refers to a single memory location. Please clone() the "
                           "tensor before performing the operation.")


def _value_on_device(value, dtype):
    """A number (or a 0-d tensor's) as a 0-d CUDA tensor of `dtype`,
    converted and range-checked as the CPU's fills do (THTensor_fill)."""
    if isinstance(value, ember.Tensor):
        value = value.item()
    return _to_device(ember.empty((), dtype=dtype).fill_(value))


def _check_scatter(self, dim, index, src, written=None):
    """c/th/THIndex.c:check_scatter_args (src None: the value form; written:
    an in-place target): dim wrapped."""
    dim = _wrap(dim, self.ndim)
    if index.dtype not in _POSITION_DTYPES:
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if src is not None and src.dtype != self.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if written is not None:
        _check_written(written)
    ndim = max(index.ndim, 1)
    if ndim != max(self.ndim, 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if src is not None and ndim != max(src.ndim, 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    size_at = lambda t, d: t.shape[d] if t.ndim else 1  # noqa: E731 (0-d counts as 1-d)
    if all((d == dim or size <= size_at(self, d)) and (src is None or size <= size_at(src, d))
           for d, size in enumerate(index.shape)):
        if written is not None:
            _check_no_overlap(written, index)
            if src is not None:
                _check_no_overlap(written, src)
        return dim
    if src is None:
        raise RuntimeError(f"Expected index {_shape_text(index.shape)} to be no larger than "
                           f"self {_shape_text(self.shape)} apart from dimension {dim}")
    raise RuntimeError(f"Expected index {_shape_text(index.shape)} to be no larger than self "
                       f"{_shape_text(self.shape)} apart from dimension {dim} and to be no "
                       f"larger size than src {_shape_text(src.shape)}")


def _scatter_into(target, dim, index, source, kind, bad_index=None):
    """One _index.py scatter `kind` over index's shape, from source (src,
    or a 0-d value that every position reads through stride 0) into target
    along dim; a 0-d target, index or src counts as 1-d.  bad_index(k):
    the error for a position out of range (scatter's by default)."""
    size = target.shape[dim] if target.ndim else 1
    if target.ndim == 0:
        target = target.view(1)
    if index.ndim == 0:
        index = index.reshape(1)
    shape = tuple(index.shape)
    source = _on_device(source)
    source = source.expand(shape) if source.ndim == 0 else source
    if _overlaps(source, target):  # x.scatter_(0, i, x) reads x as it was
        source = _copy_kernel(source)
    _along(kind, target, source, index, shape, dim, 1, bad_index or _out_of_bounds(dim, size))


_SCATTER_REDUCE = {None: "scatter", "add": "scatter_add", "multiply": "scatter_multiply"}


def _scatter(input, dim, index, src=None, value=None, *, reduce=None, out=None):
    """scatter (out=input: scatter_): src's values, or one value, written
    (or added, or multiplied) at index's positions along dim."""
    if reduce not in _SCATTER_REDUCE:
        raise RuntimeError("reduce argument must be either add or multiply.")
    if src is not None and not isinstance(src, ember.Tensor) and value is None:
        src, value = None, src  # a number in src's place is the value
    if (src is None) == (value is None):
        raise TypeError("scatter() needs exactly one of 'src' (a Tensor) or 'value' (a number)")
    source = src if value is None else _value_on_device(value, input.dtype)
    dim = _check_scatter(input, dim, index, src, written=out)
    target = _copy_kernel(input) if out is None else out
    _scatter_into(target, dim, index, source, _SCATTER_REDUCE[reduce])
    return target


# scatter_reduce's reductions: the kernel kind, and what the positions
# written start from without include_self (the reduction's identity).
_REDUCTIONS = {"sum": "scatter_add", "prod": "scatter_multiply", "mean": "scatter_add",
               "amax": "scatter_amax", "amin": "scatter_amin"}


def _reduction_identity(reduce, dtype):
    """c/th/THIndex.c:reduction_identity: 0, 1, or the dtype's lowest /
    highest value (infinities for floats)."""
    if reduce == "prod":
        return 1
    if reduce not in ("amax", "amin"):
        return 0
    if dtype.is_floating_point:
        return -math.inf if reduce == "amax" else math.inf
    if dtype == ember.bool:
        return reduce == "amin"
    import numpy
    info = numpy.iinfo(_dtype_name(dtype))
    return int(info.min) if reduce == "amax" else int(info.max)


def _divide_by_counts(target, dim, index, include_self):
    """scatter_reduce's mean: the sums divided by how many values each
    position reduced, at least 1 (floor division for integers), as
    c/th/THIndex.c:divide_by_counts."""
    counts = _new_filled(tuple(target.shape), target.dtype, int(include_self), False)
    _scatter_into(counts, dim, index, _value_on_device(1, target.dtype), "scatter_add")
    divisor = _pointwise_op("maximum", counts, 1)
    _pointwise_op("div" if target.dtype.is_floating_point else "div_floor", target, divisor,
                  out=target)


def _scatter_reduce(input, dim, index, src, reduce, *, include_self=True, out=None):
    """scatter_reduce (out=input: scatter_reduce_): without include_self the
    positions written start from the identity (a scatter of it first)."""
    if not isinstance(reduce, str):
        raise TypeError(f"scatter_reduce(): argument 'reduce' must be str, not "
                        f"{type(reduce).__name__}")
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, "
                           f"got {reduce}")
    dim = _check_scatter(input, dim, index, src, written=out)
    target = _copy_kernel(input) if out is None else out
    if not include_self:
        _scatter_into(target, dim, index,
                      _value_on_device(_reduction_identity(reduce, target.dtype), target.dtype),
                      "scatter")
    _scatter_into(target, dim, index, src, _REDUCTIONS[reduce])
    if reduce == "mean":
        _divide_by_counts(target, dim, index, include_self)
    return target


def _index_fill(input, dim, index, value, *, out=None):
    """index_fill (out=input: index_fill_): the slices at index along dim
    set to value, negative positions counting from the end: the put of
    t[(:,) * dim + (index,)] = value, as c/th/THIndex.c:dim_put."""
    if isinstance(value, ember.Tensor) and value.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.ndim} dimension(s).")
    if index.dtype != ember.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if out is not None:
        _check_no_overlap(out, index)
    if index.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    dim = _wrap(dim, input.ndim)
    if out is not None:
        _check_written(out)
    fill = _value_on_device(value, input.dtype)
    target = _copy_kernel(input) if out is None else out
    _index_put_into(target.view(1) if target.ndim == 0 else target,
                    [None] * dim + [index.reshape(-1)], fill, False,
                    lambda bad, k, size: IndexError(f"index {bad} is out of bounds for "
                                                    f"dimension {dim} with size {size}"))
    return target


def _take(input, index, *, out=None):
    """input.flatten()[index], shaped like index (negative positions count
    from the end): one gather through element offsets."""
    if index.dtype != ember.int64:
        name = _pointwise.SCALAR_TYPE_NAMES.get(_dtype_name(index.dtype), str(index.dtype))
        raise RuntimeError(f"take(): Expected a long tensor for index, but got {name}")
    flat = _reshape(input, -1)
    result = _index_gather(flat, [index], lambda bad, k, size: IndexError(
        f"out of range: tried to access index {bad} on a tensor of {size} elements."))
    if out is None:
        return result
    return _copy_(_destination(out, tuple(result.shape), _dtype_name(input.dtype), "take",
                               dtype_error=f"take(): self and out expected to have the same "
                                           f"dtype, but got self.dtype = "
                                           f"{_type_name(input.dtype)} and out.dtype = "
                                           f"{_type_name(out.dtype)}"), result)


_OPERATORS.update(scatter=_scatter, scatter_reduce=_scatter_reduce, index_fill=_index_fill,
                  take=_take)


# ---- index_copy, put: the CPU's checks, then a scatter or a put launch ------------------

def _type_name(dtype):
    return _pointwise.SCALAR_TYPE_NAMES[_dtype_name(dtype)]


def _check_index_copy(self, dim, index, source):
    """c/th/THIndex.c:check_index_copy_args, in PyTorch's order (dim wrapped)."""
    if index.ndim > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index.ndim})")
    if source.ndim == 0 and index.numel() != 1:
        raise IndexError(f"index_copy_(): When source is scalar, index should have one element "
                         f"(got {index.numel()})")
    if source.ndim != self.ndim and source.ndim and self.ndim:
        raise IndexError(f"index_copy_(): When source and destination are not scalars, their "
                         f"dimensionality must match. Source dimensionality ({source.ndim}), "
                         f"destination dimensionality ({self.ndim})")
    if index.dtype != ember.int64:
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got "
                           f"{_type_name(index.dtype)}")
    if source.dtype != self.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, "
                           f"but got (self) {_type_name(self.dtype)} and (source) "
                           f"{_type_name(source.dtype)}")
    slices = [" ".join(str(n) for d, n in enumerate(t.shape) if d != dim) for t in (self, source)]
    if slices[0] != slices[1]:
        raise RuntimeError(f"index_copy_(): Source/destination tensor must have same slice "
                           f"shapes. Destination slice shape: {slices[0]} at dimension {dim} and "
                           f"source slice shape: {slices[1]} at dimension 0.")
    if source.ndim and index.numel() != source.shape[dim]:
        raise IndexError(f"index_copy_(): Number of indices ({index.numel()}) should be equal "
                         f"to source.size(dim) ({source.shape[dim]})")


def _index_copy(input, dim, index, source, *, out=None):
    """index_copy (out=input: index_copy_): source's slices written at index
    along dim, positions in [0, size): the scatter whose index has stride 0
    in every dim but dim, as index_add is the scatter-add."""
    dim = _wrap(dim, input.ndim)
    if out is not None:
        _check_written(out)
        _check_no_overlap(out, index)
        _check_no_overlap(out, source)
    _check_index_copy(input, dim, index, source)
    target = _copy_kernel(input) if out is None else out
    if source.numel():  # else no position is read, as on the CPU
        size = target.shape[dim] if target.ndim else 1
        if source.ndim < max(target.ndim, 1):  # a 0-d source, or one into a 0-d target
            source = source.reshape(index.numel())
        shape = tuple(source.shape)
        seen = _along_dim(_on_device(index), len(shape), dim).expand(shape)
        _scatter_into(target, dim, seen, source, "scatter", lambda k: IndexError(
            f"index_copy_(): index {k} is out of bounds for dimension {dim} with size {size}"))
    return target


def _put(input, index, source, accumulate=False, *, out=None):
    """put (out=input: put_): source's elements written (added, atomically,
    with accumulate) at index's flat positions of input, negative ones
    counting from the end: t[idx] = v on input seen as 1-d.  A target
    without a 1-d view is put into through a dense copy, copied back."""
    if index.dtype != ember.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got "
                           f"{_type_name(index.dtype)}")
    if source.dtype != input.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {_type_name(input.dtype)} and source.dtype = "
                           f"{_type_name(source.dtype)}")
    if source.numel() != index.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of "
                         f"elements, but got source.numel() = {source.numel()}, index.numel() = "
                         f"{index.numel()}")
    if input.numel() == 0 and index.numel():
        raise IndexError("put_(): Tried to put elements into an empty tensor")
    if out is not None:
        _check_written(out)
        _check_no_overlap(out, index)
        _check_no_overlap(out, source)
    target = _copy_kernel(input) if out is None else out
    if not index.numel():
        return target
    flat = target.view(-1) if target.is_contiguous() else _copy_kernel(target).view(-1)
    _index_put_into(flat, [_reshape(_on_device(index), -1)], _reshape(source, -1), accumulate,
                    lambda bad, k, size: IndexError(
                        f"out of range: tried to access index {bad} on a tensor of {size} "
                        f"elements."))
    if not target.is_contiguous():  # (after a bad index raised, target is as it was)
        _copy_(target, flat.view(target.shape))
    return target


_OPERATORS.update(index_copy=_index_copy, put=_put)


# ---- sorting along a dim: one bitonic network per lane (_sort.py) ---------------------

@functools.cache
def _sort_kernel(dtype):
    return _runtime.Kernel(_sort.kernel_name(dtype), _sort.kernel_source(dtype),
                           _sort.headers(), _sort.kernel_parameters(dtype), True)


def _sorted_lanes(input, dim, descending, count, op):
    """The first `count` items of each lane of `input` along `dim` in
    sorted order (Note [Sort keys] in c/th/THSort.h): (values, indices),
    new dense tensors shaped like input with dim's size `count`.  The
    lanes are made rows of a dense matrix first (a copy kernel when dim
    is not innermost)."""
    dtype = _dtype_name(input.dtype)
    if dtype not in _sort.DTYPES:
        raise NotImplementedError(f"ember.cuda: {op} of a {dtype} tensor (ember's CUDA sort "
                                  f"takes {', '.join(_sort.DTYPES)})")
    dim = _wrap(dim, input.ndim)
    # dim moved innermost, and back: permutations (views on any device)
    order = [d for d in range(input.ndim) if d != dim] + [dim]
    back = [order.index(d) for d in range(input.ndim)]
    lanes_last = input.reshape(1) if input.ndim == 0 else input.permute(order)
    n = lanes_last.shape[-1]
    rows = _dense_on_device(lanes_last)
    lanes = rows.numel() // n if n else 0
    shape = tuple(lanes_last.shape[:-1]) + (count,)
    values = ember.empty(shape, dtype=input.dtype, device="cuda")
    indices = ember.empty(shape, dtype=ember.int64, device="cuda")
    if lanes and count:
        padded = _sort.padded_length(n)
        config = _sort.launch_config(lanes, padded)
        keys = ember.empty(config[0][0] * padded, dtype=ember.int64, device="cuda")
        positions = ember.empty(config[0][0] * padded, dtype=ember.int64, device="cuda")
        _launch_kernel(_sort_kernel(dtype), config,
                       _sort.arguments(rows.data_ptr(), values.data_ptr(), indices.data_ptr(),
                                       keys.data_ptr(), positions.data_ptr(), lanes, n, padded,
                                       count, descending))
    if input.ndim == 0:
        return values.reshape(()), indices.reshape(())
    return _dense_on_device(values.permute(back)), _dense_on_device(indices.permute(back))


def _into(out, results, op, dtype_errors=(None, None)):
    """A (values, indices) result, copied into out= when one is given (of
    the results' dtypes: dtype_errors, an operator's own words when not)."""
    if out is None:
        return results
    for target, result, dtype_error in zip(out, results, dtype_errors):
        _copy_(_destination(target, tuple(result.shape), _dtype_name(result.dtype), op,
                            dtype_error=dtype_error), result)
    return out


def _sort_call(input, dim=-1, descending=False, stable=False, *, out=None):
    """sort: every ember sort is stable (Note [Sort keys])."""
    n = input.shape[_wrap(dim, input.ndim)] if input.ndim else 1
    results = _sorted_lanes(input, dim, descending, n, "sort")
    return ember.return_types.sort(_into(out, results, "sort"))


def _argsort(input, dim=-1, descending=False, stable=False):
    return _sort_call(input, dim, descending, stable).indices


def _topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):
    """topk: the first k of the sorted lane (always in sorted order)."""
    n = input.shape[_wrap(dim, input.ndim)] if input.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    results = _sorted_lanes(input, dim, largest, k if input.ndim else 1, "topk")
    return ember.return_types.topk(_into(out, results, "topk"))


def _msort(input, *, out=None):
    values = _sort_call(input, 0).values
    if out is None:
        return values
    return _copy_(_destination(out, tuple(values.shape), _dtype_name(values.dtype), "msort"),
                  values)


def _kthvalue(input, k, dim=-1, keepdim=False, *, out=None):
    """The k-th smallest of each lane along dim (and its index): the last
    of the lane's first k in sorted order, so ties and NaNs go as in sort."""
    dim = _wrap(dim, input.ndim)
    n = input.shape[dim] if input.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
    results = _sorted_lanes(input, dim, False, k, "kthvalue")
    if input.ndim:  # the lanes' last item, kept as a dim of size 1 or dropped
        results = tuple(_dense_on_device(r.narrow(dim, k - 1, 1) if keepdim
                                         else r.select(dim, k - 1)) for r in results)
    return ember.return_types.kthvalue(_into(
        out, results, "kthvalue", ("output values must be of same type as input",
                                   "output indices must be of scalar type Long")))


def _group_ids(values):
    """Each element's group among runs of equal neighbours of a 1-d tensor
    (each row's, of a 2-d one: rows are equal when all their elements
    are), counted from 0 (NaNs differ from everything, -0.0 equals 0.0, as
    the CPU's same_value), and where each group starts: a comparison with
    the left neighbour and a scan."""
    n = values.shape[0]
    starts = ember.empty(n, dtype=ember.bool, device="cuda")
    if n:
        _fill(starts.narrow(0, 0, 1), True)
        later, earlier = values.narrow(0, 1, n - 1), values.narrow(0, 0, n - 1)
        if values.ndim == 1:
            _pointwise_op("ne", later, earlier, out=starts.narrow(0, 1, n - 1))
        else:
            differ = _pointwise_op("ne", later, earlier)
            _run_reduction(_reduce.plan("amax", differ, 1), differ, starts.narrow(0, 1, n - 1))
    ids = _pointwise_op("sub", _reduction("cumsum", starts, 0), 1)
    return ids, starts


def _slices_as_rows(input, dim):
    """The slices of `input` along `dim` as the rows of a dense matrix, and
    the permutation that moved dim to the front (THTensor_uniqueDim's
    checks first)."""
    if input.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    dim = _wrap(dim, input.ndim)
    rows = input.shape[dim]
    cols = input.numel() // rows if rows else 0
    if rows and not cols:
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so "
                           "unique cannot be applied")
    front = [dim] + [d for d in range(input.ndim) if d != dim]
    return _reshape(input.permute(front), rows, cols), front


def _lexicographic_order(matrix):
    """The rows' order, lexicographic and stable, as the CPU's sort_rows:
    an LSD sort, the rows re-sorted by each column from the last to the
    first with the (stable) sort kernel, so earlier columns decide."""
    rows, cols = matrix.shape
    order = _made_on_the_host("arange")(rows)
    for c in reversed(range(cols if rows > 1 else 0)):
        keys = _index_select(matrix.select(1, c), 0, order)
        _, by_column = _sorted_lanes(keys, 0, False, rows, "unique")
        order = _index_select(order, 0, by_column)
    return order


def _unique_impl(input, consecutive, return_inverse, return_counts, dim):
    """unique's values (the first element, or slice along dim, of each
    group of equal ones, in sorted order unless consecutive), inverse and
    counts, from a sort (of the flattened input, or of the slices as rows,
    lexicographically; none for unique_consecutive), _group_ids, a
    selection, a scatter and a scatter_add."""
    if dim is None:
        flat = _reshape(input, -1)
        if consecutive:
            values, order = _dense_on_device(flat), None
        else:
            values, order = _sorted_lanes(flat, 0, False, flat.shape[0], "unique")
        ids, starts = _group_ids(values)
        results = [_masked_select(values, starts)]
        inverse_shape, groups = tuple(input.shape), results[0].shape[0]
    else:
        matrix, front = _slices_as_rows(input, dim)
        order = None if consecutive else _lexicographic_order(matrix)
        values = matrix if order is None else _index_select(matrix, 0, order)
        ids, starts = _group_ids(values)
        firsts = _index_select(values, 0, _nonzero(starts).view(-1))
        shape = [firsts.shape[0]] + [input.shape[d] for d in front[1:]]
        back = [front.index(d) for d in range(input.ndim)]
        results = [_dense_on_device(firsts.view(shape).permute(back))]
        inverse_shape, groups = (matrix.shape[0],), firsts.shape[0]
    if return_inverse:
        inverse = ids
        if order is not None:  # sorted position i came from input position order[i]
            inverse = ember.empty(ids.shape, dtype=ember.int64, device="cuda")
            _scatter_into(inverse, 0, order, ids, "scatter")
        results.append(inverse.view(inverse_shape))
    if return_counts:
        counts = _new_filled((groups,), ember.int64, 0, False)
        _scatter_into(counts, 0, ids, _value_on_device(1, ember.int64), "scatter_add")
        results.append(counts)
    return results[0] if len(results) == 1 else tuple(results)


def _unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """unique: always sorted, as ember's CPU unique."""
    return _unique_impl(input, False, return_inverse, return_counts, dim)


def _unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    return _unique_impl(input, True, return_inverse, return_counts, dim)


_OPERATORS.update(sort=_sort_call, argsort=_argsort, topk=_topk, msort=_msort,
                  kthvalue=_kthvalue, unique=_unique, unique_consecutive=_unique_consecutive)


# ---- flip, roll, repeat, tril/triu: one rearranging launch (_rearrange.py) ------------

@functools.cache
def _rearrange_kernel(dtype):
    return _runtime.Kernel(_rearrange.kernel_name(dtype), _rearrange.kernel_source(dtype),
                           _rearrange.headers(), _rearrange.kernel_parameters(dtype), False)


def _rearranged(input, plan, out=None):
    """A _rearrange.py plan: the result (or out=, of plan's shape), then
    one launch."""
    if out is None:
        out = ember.empty(plan.shape, dtype=input.dtype, device="cuda")
    if out.numel():
        _launch_kernel(_rearrange_kernel(_dtype_name(input.dtype)),
                       _launch.launch_config(out.numel()),
                       _rearrange.arguments(plan, input.data_ptr(), out.data_ptr(), out.stride(),
                                            input.element_size()))
    return out


def _int_list(name, what, args, keyword):
    """The ints of f(*ints), f([ints]) or f(what=ints), as the CPU's
    parse_dims_varargs reads them (c/python/Shape.c)."""
    if keyword is not None:
        args = (keyword,)
    if not args:
        raise TypeError(f'{name}() missing 1 required positional arguments: "{what}"')
    if len(args) == 1:
        args = _ints(args[0])
    if len(args) > _kernels.MAX_DIMS:
        raise ValueError(f"{name}(): ember tensors have at most {_kernels.MAX_DIMS} "
                         f"dimensions, got {len(args)}")
    return [operator.index(a) for a in args]


def _ints(value):
    """An int (a 0-d integer tensor, a NumPy integer) or a sequence of
    them, as a list (c/python/Shape.c's parse_int_or_ints)."""
    try:
        return [operator.index(value)]
    except TypeError:
        return [operator.index(v) for v in value]


def _flip(input, *dims, **keyword):
    dims = _int_list("flip", "dims", dims, keyword.pop("dims", None))
    flipped = set()
    for d in dims:
        d = _wrap(d, input.ndim)
        if d in flipped:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        flipped.add(d)
    if input.ndim == 0:
        return _copy_kernel(input)
    return _rearranged(input, _rearrange.plan(input, flipped=sorted(flipped)))


def _flip_one(dim):
    """fliplr (dim 1) and flipud (dim 0)."""
    def run(input):
        if input.ndim < dim + 1:
            raise RuntimeError(f"Input must be >= {dim + 1}-d.")
        return _flip(input, dim)
    return run


def _roll(input, shifts, dims=None):
    """roll: one launch with each dim's shift (repeated dims add up); with
    no dims, the flattened tensor's roll, shaped back (a dense copy first
    when the tensor has no 1-d view), as the CPU's roll_flat."""
    shifts, dims = _ints(shifts), [] if dims is None else _ints(dims)
    if not shifts:
        raise RuntimeError("`shifts` required")
    if len(shifts) != len(dims) and not (len(dims) == 0 and len(shifts) == 1):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    if not dims:
        flat = _reshape(input, -1)
        return _rearranged(flat, _rearrange.plan(flat, shifts=shifts)).view(input.shape)
    per_dim = [0] * input.ndim
    for shift, d in zip(shifts, dims):
        d = _wrap(d, input.ndim)
        if input.ndim:
            per_dim[d] += shift
    if input.ndim == 0:
        return _copy_kernel(input)
    return _rearranged(input, _rearrange.plan(input, shifts=per_dim))


def _repeat_into_shape(input, repeats):
    """repeat: the CPU's THTensor_newRepeat checks, then one launch."""
    if len(repeats) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    sizes = (1,) * (len(repeats) - input.ndim) + tuple(input.shape)
    shape = [size * r for size, r in zip(sizes, repeats)]
    if any(size < 0 for size in shape):
        negative = next(size for size in shape if size < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {negative}: "
                           f"{_shape_text(shape)}")
    return _rearranged(input, _rearrange.plan(input, shape=tuple(shape)))


def _repeat(input, *repeats, **keyword):
    return _repeat_into_shape(input, _int_list("repeat", "repeats", repeats,
                                               keyword.pop("repeats", None)))


def _tile(input, *dims, **keyword):
    """tile: repeat with the repeats padded by leading 1s to the tensor's ndim."""
    dims = _int_list("tile", "dims", dims, keyword.pop("dims", None))
    return _repeat_into_shape(input, [1] * (input.ndim - len(dims)) + dims)


def _triangle(name):
    """tril/triu (out=input: tril_/triu_, each element in its own place)."""
    def run(input, diagonal=0, *, out=None):
        if input.ndim < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        diagonal = operator.index(diagonal)
        out = _destination(out, tuple(input.shape), _dtype_name(input.dtype), name)
        return _rearranged(input, _rearrange.plan(input, triangle=name, diagonal=diagonal),
                           out)
    return run


_OPERATORS.update(flip=_flip, fliplr=_flip_one(1), flipud=_flip_one(0),
                  roll=_roll, repeat=_repeat, tile=_tile, tril=_triangle("tril"),
                  triu=_triangle("triu"))


# ---- the jit's fusion groups: one generated kernel (_fused.py) ----------------------

@functools.cache
def _fused_kernel(program, dtype, is_tensor):
    return _runtime.Kernel(_fused.kernel_name(program, dtype, is_tensor),
                           _fused.cuda_source(program, dtype, is_tensor), _fused.headers(),
                           _fused.kernel_parameters(program, dtype, is_tensor), False)


def _fused_call(kernel, *inputs):
    """A FusedKernel called on CUDA tensors (c/python/Fused.c hands it over):
    one kernel for the whole group when every tensor input is dense, of one
    shape and one float dtype, and needs no gradient; None otherwise, and
    the jit runs the group's ops one by one (its fallback)."""
    tensors = [x for x in inputs if isinstance(x, ember.Tensor)]
    if not tensors or any(not t.is_cuda or not t.is_contiguous() for t in tensors):
        return None
    shape, dtype = tuple(tensors[0].shape), tensors[0].dtype
    if any(tuple(t.shape) != shape or t.dtype != dtype for t in tensors) \
            or dtype not in (ember.float32, ember.float64) \
            or (ember.is_grad_enabled() and any(t.requires_grad for t in tensors)):
        return None
    dtype = _dtype_name(dtype)
    program, is_tensor = kernel.spec, tuple(isinstance(x, ember.Tensor) for x in inputs)
    outputs = [ember.empty(shape, dtype=getattr(ember, dtype), device="cuda")
               for _ in program[2]]
    n = outputs[0].numel()
    if n:
        arguments = [ctypes.c_void_p(out.data_ptr()) for out in outputs]
        for x in inputs:
            value = 0 if isinstance(x, ember.Tensor) else _pointwise.number_as(x, dtype)
            pointer = x.data_ptr() if isinstance(x, ember.Tensor) else None
            arguments.append(_pointwise.EmberInput(dtype)(data=pointer, value=value))
        arguments.append(ctypes.c_int64(n))
        _launch_kernel(_fused_kernel(program, dtype, is_tensor), _launch.launch_config(n),
                       arguments)
    return tuple(outputs)


# Methods whose arguments differ from their function's, and the dtype
# shorthands (t.float(): a cast kernel, as to(dtype) is).
_METHODS = {
    "where": lambda self, condition, other, out=None: _pointwise_op(
        "where", condition, self, other, out=out),
    **{name: (lambda dtype: lambda self: _to(self, dtype))(getattr(ember, dtype))
       for name, dtype in (("float", "float32"), ("double", "float64"), ("half", "float16"),
                           ("long", "int64"), ("int", "int32"), ("short", "int16"),
                           ("char", "int8"), ("byte", "uint8"), ("bool", "bool"),
                           ("bfloat16", "bfloat16"))},
}


def _operator_call(name, args, kwargs):
    """The handler for an operator call, or None: functions by name, methods
    as Tensor.<name> (self first), in-place methods and in-place slots
    (__iadd__) writing into their first operand."""
    base = name.removeprefix("Tensor.")
    in_place = False
    if base.startswith("__i") and f"__{base[3:]}" in _NUMBER_SLOTS:
        base, in_place = f"__{base[3:]}", True
    elif base.endswith("_") and not base.endswith("__"):
        base, in_place = base[:-1], True
    base = _NUMBER_SLOTS.get(base, base)
    handler = (_METHODS.get(base) if name.startswith("Tensor.") and not in_place else None) \
        or _OPERATORS.get(base)
    if handler is None or (in_place and base in _reduce.CALLS):
        return None
    if in_place:
        return lambda: handler(*args, **kwargs, out=args[0])
    return lambda: handler(*args, **kwargs)


_HANDLERS = {
    "Tensor.to": _to,
    "Tensor.copy_": _copy_,
    "Tensor.bernoulli_": _bernoulli_,  # p is its probability, not bernoulli's input
    "Tensor.item": _on_host("item"),
    "Tensor.tolist": _on_host("tolist"),
    "Tensor.numpy": _on_host("numpy"),
    "__float__": _on_host("__float__"),
    "__int__": _on_host("__int__"),
    "__index__": _on_host("__index__"),
    "__bool__": _on_host("__bool__"),
}


def launch(name, args, kwargs):
    """Runs one call whose tensors live on CUDA (see the module's docstring)."""
    if args and isinstance(args[0], _C.FusedKernel):
        return _fused_call(*args)
    handler = _HANDLERS.get(name)
    if handler is None:
        call = _operator_call(name, args, kwargs)
        if call is not None:
            return call()
        raise NotImplementedError(
            f"ember.cuda: '{name}' has no CUDA kernel yet (ember moves tensors to and "
            "from the GPU, but runs no operator there so far)")
    return handler(*args, **kwargs)


def register():
    """Installs launch() for 'cuda' unless a launcher is there already."""
    previous = _C._register_device_backend("cuda", launch)
    if previous is not None:
        _C._register_device_backend("cuda", previous)
