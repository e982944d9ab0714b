"""Pooling, unfold/fold, interpolation and pixel shuffles for
ember.nn.functional.

2-D max and average pooling of floating tensors (and the 1-D forms, as
height-1 images) run the C kernels of c/th/THPool.c (Note [Pooling
windows]) through the autograd Functions below; their backward is itself
differentiable (the max backward's adjoint is a gather, the average
backward's is the average forward), so double backward works.

Other dtypes (integers) take the composites: pad, then `unfold` along the
two spatial dims gives (N, C, out_h, out_w, kh, kw) without copying, and a
reduction over the window's elements finishes the job.  Adaptive pooling
(C kernels for floating dtypes: Note [Adaptive pooling windows]) falls back
to products with small (out x in) averaging matrices, as linear
interpolation does: linear maps along each spatial dim.
"""

import math

import ember
from ember import _C
from ember.autograd.function import Function

__all__ = ["max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d",
           "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d", "unfold",
           "fold", "interpolate", "pixel_shuffle", "pixel_unshuffle"]


def _pair(value):
    if isinstance(value, int):
        return (value, value)
    value = tuple(value)
    return value * 2 if len(value) == 1 else value


def _out_size(size, kernel, stride, pad, dilation, ceil_mode):
    """PyTorch's pooling output size; with ceil_mode the last window must
    start inside the input or its left padding."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _windows(input, kernel, stride, padding, dilation, out_size, fill):
    """(N, C, out_h, out_w, kh, kw): every pooling window, padded with `fill`."""
    pads = []
    for dim, (k, s, p, d, o) in enumerate(zip(kernel, stride, padding, dilation, out_size)):
        size = input.shape[2 + dim]
        needed = (o - 1) * s + d * (k - 1) + 1   # the padded extent the windows read
        pads.append((p, max(needed - size - p, 0)))
    padded = _pad_value(input, pads, fill)
    windows = padded
    for dim, (k, s, d) in enumerate(zip(kernel, stride, dilation)):
        windows = windows.unfold(2 + dim, d * (k - 1) + 1, s)
    if any(d != 1 for d in dilation):
        windows = windows[..., ::dilation[0], ::dilation[1]]
    return windows[:, :, :out_size[0], :out_size[1]]


def _pad_value(input, pads, fill):
    from ._convolution import pad
    amounts = []
    for before, after in reversed(pads):
        amounts += [before, after]
    return pad(input, amounts, value=fill) if any(amounts) else input


def _spatial_input(name, input, dims):
    """(batched input, was it unbatched?)."""
    if input.dim() not in (dims + 1, dims + 2):
        raise RuntimeError(f"{name}: Expected {dims + 1}D or {dims + 2}D (batch mode) tensor "
                           f"with optional 0 dim batch size for input, but got: "
                           f"{list(input.shape)}")
    unbatched = input.dim() == dims + 1
    return (input.unsqueeze(0) if unbatched else input), unbatched


def _check_pool(kernel, stride, padding, dilation):
    if any(k <= 0 for k in kernel):
        raise RuntimeError(f"kernel_size must be greater than zero, but got kH: {kernel[0]} "
                           f"kW: {kernel[1]}")
    if any(s == 0 for s in stride):
        raise RuntimeError("stride should not be zero")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"stride should be greater than zero, but got dH: {stride[0]} "
                           f"dW: {stride[1]}")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"dilation should be greater than zero, but got dilationH: "
                           f"{dilation[0]} dilationW: {dilation[1]}")
    for k, p, d in zip(kernel, padding, dilation):
        if p < 0 or p > (d * (k - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={p}, kernel_size={k} and dilation={d}")
    if any(p > k // 2 for k, p in zip(kernel, padding)):    # PyTorch's second check
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but "
                           f"got padW = {padding[1]}, padH = {padding[0]}, kW = {kernel[1]}, "
                           f"kH = {kernel[0]}")


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The largest element of each window; with return_indices also its
    flat index in the input's (H, W) plane, as PyTorch's."""
    kernel = _pair(kernel_size)
    stride = kernel if stride is None or stride == [] else _pair(stride)
    padding, dilation = _pair(padding), _pair(dilation)
    _check_pool(kernel, stride, padding, dilation)
    x, unbatched = _spatial_input("max_pool2d", input, 2)
    out_size = [_out_size(x.shape[2 + i], kernel[i], stride[i], padding[i], dilation[i],
                          ceil_mode) for i in range(2)]
    _check_output_size(x, out_size)
    if x.dtype in _KERNEL_DTYPES + _ROUNDED_DTYPES:
        values, indices = _max_pool_kernel(x, (*kernel, *stride, *padding, *dilation),
                                           ceil_mode, return_indices)
    else:
        values, indices = _max_pool_composite(x, kernel, stride, padding, dilation,
                                              out_size, return_indices)
    if unbatched:
        values = values.squeeze(0)
        indices = None if indices is None else indices.squeeze(0)
    return (values, indices) if return_indices else values


def _check_output_size(x, out_size):
    if any(o <= 0 for o in out_size):
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, x.shape[1:]))}). "
                           f"Calculated output size: ({x.shape[1]}x{out_size[0]}x"
                           f"{out_size[1]}). Output size is too small")


def _max_pool_composite(x, kernel, stride, padding, dilation, out_size, return_indices):
    lowest = float("-inf") if x.dtype.is_floating_point else ember.iinfo(x.dtype).min
    windows = _windows(x, kernel, stride, padding, dilation, out_size, lowest)
    flat = windows.reshape(*windows.shape[:4], kernel[0] * kernel[1])
    values, local = flat.max(-1)
    if not return_indices:
        return values, None
    return values, _input_indices(local, x.shape[3], kernel, stride, padding, dilation,
                                  out_size)


def _input_indices(local, width, kernel, stride, padding, dilation, out_size):
    """Window-local argmax positions -> flat indices into the input plane."""
    oy = ember.arange(out_size[0]).reshape(-1, 1) * stride[0] - padding[0]
    ox = ember.arange(out_size[1]).reshape(1, -1) * stride[1] - padding[1]
    row = oy + (local // kernel[1]) * dilation[0]
    col = ox + (local % kernel[1]) * dilation[1]
    return row * width + col


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    x, unbatched = _spatial_input("max_pool1d", input, 1)
    stride = kernel_size if stride is None or stride == [] else stride
    if not return_indices and _one(padding) > _one(kernel_size) // 2:
        # PyTorch's max_pool1d without indices checks this first, in its own words
        raise RuntimeError(f"max_pool1d() padding should be at most half of kernel size, but "
                           f"got padding={_one(padding)} and kernel_size={_one(kernel_size)}")
    result = max_pool2d(x.unsqueeze(2), (1, _one(kernel_size)), (1, _one(stride)),
                        (0, _one(padding)), (1, _one(dilation)), ceil_mode, return_indices)
    if return_indices:
        values, indices = result
        values, indices = values.squeeze(2), indices.squeeze(2)
        return (values.squeeze(0), indices.squeeze(0)) if unbatched else (values, indices)
    result = result.squeeze(2)
    return result.squeeze(0) if unbatched else result


def _one(value):
    if isinstance(value, (tuple, list)):
        (value,) = value
    return value


# ---- the C kernels (c/th/THPool.c) ------------------------------------------------
#
# `window` is the ints the _C functions take after the tensor: (kh, kw, sh,
# sw, ph, pw) and, for max pooling, (dh, dw).

_KERNEL_DTYPES = (ember.float32, ember.float64)
_ROUNDED_DTYPES = (ember.float16, ember.bfloat16)   # pooled in float32, rounded once


def _in_compute_dtype(apply, x, *args):
    """apply(x, *args) on a contiguous x; float16/bfloat16 run in float32 and
    the result (a (values, indices) pair's values) is rounded once."""
    low = x.dtype if x.dtype in _ROUNDED_DTYPES else None
    out = apply(x.contiguous() if low is None else x.float().contiguous(), *args)
    if low is None:
        return out
    return (out[0].to(low), out[1]) if isinstance(out, tuple) else out.to(low)


def _max_pool_kernel(x, window, ceil_mode, return_indices):
    """(values, indices or None); indices are always made when autograd will
    need them."""
    if x.requires_grad and ember.is_grad_enabled():
        return _in_compute_dtype(_MaxPool2d.apply, x, window, bool(ceil_mode))
    return _in_compute_dtype(_C._max_pool2d, x, *window, bool(ceil_mode),
                             bool(return_indices))


class _MaxPool2d(Function):
    """(the largest element of each window, its index); Note [Pooling
    windows].  The int64 indices are not differentiable."""

    @staticmethod
    def forward(ctx, x, window, ceil_mode):
        values, indices = _C._max_pool2d(x, *window, ceil_mode, True)
        ctx.save_for_backward(indices)
        ctx.set_materialize_grads(False)
        ctx.input_size = tuple(x.shape[2:])
        return values, indices

    @staticmethod
    def backward(ctx, grad, grad_indices):
        if grad is None:
            return None, None, None
        indices, = ctx.saved_tensors
        return _MaxPool2dBackward.apply(grad, indices, ctx.input_size), None, None


class _MaxPool2dBackward(Function):
    """Each output gradient added to the input element its index names."""

    @staticmethod
    def forward(ctx, grad, indices, input_size):
        ctx.indices, ctx.plane = indices, input_size[0] * input_size[1]
        return _C._max_pool2d_backward(grad.contiguous(), indices, *input_size)

    @staticmethod
    def backward(ctx, grad_grad):
        flat = ctx.indices.flatten(2)
        inside = flat < ctx.plane    # an empty dilated window's index names nothing
        picked = grad_grad.flatten(2).gather(2, flat.clamp(max=max(ctx.plane - 1, 0)))
        return (picked * inside).reshape(ctx.indices.shape), None, None


class _AvgPool2d(Function):
    """The mean of each window; divisor = (count_include_pad,
    divisor_override or 0)."""

    @staticmethod
    def forward(ctx, x, window, ceil_mode, divisor):
        ctx.geometry = (*window, ceil_mode, *divisor)
        ctx.input_size = tuple(x.shape[2:])
        return _C._avg_pool2d(x, *ctx.geometry)

    @staticmethod
    def backward(ctx, grad):
        return _AvgPool2dBackward.apply(grad, ctx.input_size, ctx.geometry), None, None, None


class _AvgPool2dBackward(Function):
    """Each output gradient shared out over its window; its own adjoint is
    the average forward."""

    @staticmethod
    def forward(ctx, grad, input_size, geometry):
        ctx.geometry = geometry
        return _C._avg_pool2d_backward(grad.contiguous(), *input_size, *geometry)

    @staticmethod
    def backward(ctx, grad_grad):
        window, ceil_mode, divisor = ctx.geometry[:6], ctx.geometry[6], ctx.geometry[7:]
        return _AvgPool2d.apply(grad_grad.contiguous(), window, ceil_mode, divisor), None, None


class _AdaptiveMaxPool2d(Function):
    """(the largest element of each adaptive window, its index); the
    backward is max pooling's."""

    @staticmethod
    def forward(ctx, x, out_size):
        values, indices = _C._adaptive_max_pool2d(x, *out_size)
        ctx.save_for_backward(indices)
        ctx.set_materialize_grads(False)
        ctx.input_size = tuple(x.shape[2:])
        return values, indices

    @staticmethod
    def backward(ctx, grad, grad_indices):
        if grad is None:
            return None, None
        indices, = ctx.saved_tensors
        return _MaxPool2dBackward.apply(grad, indices, ctx.input_size), None


class _AdaptiveAvgPool2d(Function):
    """The mean of each adaptive window.  A 1 x 1 output is the mean of the
    whole plane, whose gradient is the output's spread over the plane: an
    expand, which the gradient's accumulation reads without a full-size
    copy (Note [Whole-plane means] in c/th/THPool.c)."""

    @staticmethod
    def forward(ctx, x, out_size):
        ctx.input_shape = tuple(x.shape)
        return _C._adaptive_avg_pool2d(x, *out_size)

    @staticmethod
    def backward(ctx, grad):
        height, width = ctx.input_shape[2:]
        if tuple(grad.shape[2:]) == (1, 1):
            return grad.div(height * width).expand(ctx.input_shape), None
        return _AdaptiveAvgPool2dBackward.apply(grad, (height, width)), None


class _AdaptiveAvgPool2dBackward(Function):
    """Each output gradient shared out over its window; its own adjoint is
    the adaptive average forward."""

    @staticmethod
    def forward(ctx, grad, input_size):
        ctx.out_size = tuple(grad.shape[2:])
        return _C._adaptive_avg_pool2d_backward(grad.contiguous(), *input_size)

    @staticmethod
    def backward(ctx, grad_grad):
        return _AdaptiveAvgPool2d.apply(grad_grad.contiguous(), ctx.out_size), None


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """The mean of each window: divided by divisor_override, else by the
    window's size within the padded input (count_include_pad) or within the
    input alone."""
    kernel = _pair(kernel_size)
    stride = kernel if stride is None or stride == [] else _pair(stride)
    padding = _pair(padding)
    _check_pool(kernel, stride, padding, (1, 1))
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    x, unbatched = _spatial_input("avg_pool2d", input, 2)
    out_size = [_out_size(x.shape[2 + i], kernel[i], stride[i], padding[i], 1, ceil_mode)
                for i in range(2)]
    _check_output_size(x, out_size)
    if x.dtype in _KERNEL_DTYPES + _ROUNDED_DTYPES:
        divisor = (bool(count_include_pad), divisor_override or 0)
        result = _in_compute_dtype(_AvgPool2d.apply, x, (*kernel, *stride, *padding),
                                   bool(ceil_mode), divisor)
    else:
        result = _avg_pool_composite(x, kernel, stride, padding, out_size,
                                     count_include_pad, divisor_override)
    return result.squeeze(0) if unbatched else result


def _avg_pool_composite(x, kernel, stride, padding, out_size, count_include_pad,
                        divisor_override):
    windows = _windows(x, kernel, stride, padding, (1, 1), out_size, 0.0)
    total = windows.sum((-2, -1))
    if divisor_override is not None:
        result = total / divisor_override
    else:
        counts = [_window_counts(x.shape[2 + i], kernel[i], stride[i], padding[i],
                                 out_size[i], count_include_pad) for i in range(2)]
        divisor = ember.tensor(counts[0], dtype=x.dtype).reshape(-1, 1) * \
            ember.tensor(counts[1], dtype=x.dtype).reshape(1, -1)
        result = total / divisor
    return result


def _window_counts(size, kernel, stride, pad, out, include_pad):
    """Per output position along one dim: how many elements its window
    averages (PyTorch's pool_size)."""
    counts = []
    for o in range(out):
        start = o * stride - pad
        end = min(start + kernel, size + pad)
        if include_pad:
            counts.append(end - start)
        else:
            counts.append(min(end, size) - max(start, 0))
    return counts


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    x, unbatched = _spatial_input("avg_pool1d", input, 1)
    stride = kernel_size if stride is None or stride == [] else stride
    result = avg_pool2d(x.unsqueeze(2), (1, _one(kernel_size)), (1, _one(stride)),
                        (0, _one(padding)), ceil_mode, count_include_pad).squeeze(2)
    return result.squeeze(0) if unbatched else result


# ---- adaptive pooling ------------------------------------------------------------

def _adaptive_bounds(size, out):
    """PyTorch's window [start, end) of each output position along one dim."""
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


def _averaging_matrix(size, out, dtype):
    rows = []
    for start, end in _adaptive_bounds(size, out):
        rows.append([1.0 / (end - start) if start <= j < end else 0.0 for j in range(size)])
    return ember.tensor(rows, dtype=dtype).reshape(out, size)


def _adaptive_sizes(name, input, output_size):
    """(out_h, out_w) with PyTorch's checks (of the input as given, batched
    or not); None keeps the input's extent."""
    sizes = (output_size,) * 2 if isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != 2:
        raise RuntimeError(f"{name}: output_size must be 2")
    sizes = [input.shape[-2 + i] if s is None else int(s) for i, s in enumerate(sizes)]
    if any(s < 0 for s in sizes):
        if name == "adaptive_max_pool2d":   # PyTorch's max pool meets it allocating
            raise RuntimeError(f"Trying to create tensor with negative dimension "
                               f"{min(sizes)}: {[*input.shape[:2], *sizes]}")
        raise RuntimeError(f"adaptive_avg_pool2d: elements of output_size must be greater "
                           f"than or equal to 0 but received {{{sizes[0]}, {sizes[1]}}}")
    for dim in range(1, input.dim()):
        if input.shape[dim] == 0:
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(input.shape)} with "
                               f"dimension {dim} being empty")
    return sizes


def _adaptive_kernel_fits(x, sizes):
    return x.dtype in _KERNEL_DTYPES + _ROUNDED_DTYPES and x.numel() > 0 and min(sizes) > 0


def adaptive_avg_pool2d(input, output_size):
    """The mean of each adaptive window (Note [Adaptive pooling windows])."""
    x, unbatched = _spatial_input("adaptive_avg_pool2d", input, 2)
    sizes = _adaptive_sizes("adaptive_avg_pool2d", input, output_size)
    if _adaptive_kernel_fits(x, sizes):
        result = _in_compute_dtype(_AdaptiveAvgPool2d.apply, x, tuple(sizes))
    else:
        rows = _averaging_matrix(x.shape[2], sizes[0], x.dtype)
        cols = _averaging_matrix(x.shape[3], sizes[1], x.dtype)
        result = ember.matmul(ember.matmul(rows, x), cols.t())
    return result.squeeze(0) if unbatched else result


def adaptive_avg_pool1d(input, output_size):
    x, unbatched = _spatial_input("adaptive_avg_pool1d", input, 1)
    result = adaptive_avg_pool2d(x.unsqueeze(2), (1, _one(output_size))).squeeze(2)
    return result.squeeze(0) if unbatched else result


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """The largest element of each adaptive window and its flat index in
    the input's (H, W) plane (Note [Adaptive pooling windows])."""
    x, unbatched = _spatial_input("adaptive_max_pool2d", input, 2)
    sizes = _adaptive_sizes("adaptive_max_pool2d", input, output_size)
    if not _adaptive_kernel_fits(x, sizes):
        values, indices = _adaptive_max_composite(x, *sizes)
    elif x.requires_grad and ember.is_grad_enabled():
        values, indices = _in_compute_dtype(_AdaptiveMaxPool2d.apply, x, tuple(sizes))
    else:
        values, indices = _in_compute_dtype(_C._adaptive_max_pool2d, x, *sizes)
    if unbatched:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return (values, indices) if return_indices else values


def _adaptive_max_composite(x, out_h, out_w):
    if out_h == 0 or out_w == 0:
        shape = (*x.shape[:2], out_h, out_w)
        return ember.empty(shape, dtype=x.dtype), ember.empty(shape, dtype=ember.int64)
    width = x.shape[3]
    values, indices = [], []
    for top, bottom in _adaptive_bounds(x.shape[2], out_h):
        row_values, row_indices = [], []
        for left, right in _adaptive_bounds(width, out_w):
            window = x[:, :, top:bottom, left:right]
            best, local = window.reshape(*window.shape[:2], -1).max(-1)
            row_values.append(best)
            span = right - left
            row_indices.append((top + local // span) * width + left + local % span)
        values.append(ember.stack(row_values, -1))
        indices.append(ember.stack(row_indices, -1))
    return ember.stack(values, -2), ember.stack(indices, -2)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    x, unbatched = _spatial_input("adaptive_max_pool1d", input, 1)
    values, indices = adaptive_max_pool2d(x.unsqueeze(2), (1, _one(output_size)), True)
    values, indices = values.squeeze(2), indices.squeeze(2)
    if unbatched:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return (values, indices) if return_indices else values


# ---- unfold and fold ------------------------------------------------------------

def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """(N, C * kh * kw, L): every sliding block as a column (im2col)."""
    kernel, dilation = _pair(kernel_size), _pair(dilation)
    padding, stride = _pair(padding), _pair(stride)
    x, unbatched = _spatial_input("unfold", input, 2)
    out_size = [_out_size(x.shape[2 + i], kernel[i], stride[i], padding[i], dilation[i], False)
                for i in range(2)]
    windows = _windows(x, kernel, stride, padding, dilation, out_size, 0.0)
    n, c = x.shape[0], x.shape[1]
    columns = windows.permute(0, 1, 4, 5, 2, 3).reshape(n, c * kernel[0] * kernel[1],
                                                         out_size[0] * out_size[1])
    return columns.squeeze(0) if unbatched else columns


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """The inverse layout of unfold, summing where blocks overlap (col2im)."""
    out_h, out_w = _pair(output_size)
    kernel, dilation = _pair(kernel_size), _pair(dilation)
    padding, stride = _pair(padding), _pair(stride)
    unbatched = input.dim() == 2
    x = input.unsqueeze(0) if unbatched else input
    blocks = [_out_size(size, k, s, p, d, False) for size, k, s, p, d in
              zip((out_h, out_w), kernel, stride, padding, dilation)]
    n, columns, length = x.shape
    if columns % (kernel[0] * kernel[1]) != 0 or length != blocks[0] * blocks[1]:
        raise RuntimeError(f"Expected size of input's dimension 2 to match the calculated "
                           f"number of sliding blocks {blocks[0]} * {blocks[1]} = "
                           f"{blocks[0] * blocks[1]}, but got input.size(2)={length}.")
    channels = columns // (kernel[0] * kernel[1])
    padded_h, padded_w = out_h + 2 * padding[0], out_w + 2 * padding[1]
    targets = []
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            for by in range(blocks[0]):
                for bx in range(blocks[1]):
                    y = by * stride[0] + i * dilation[0]
                    xx = bx * stride[1] + j * dilation[1]
                    targets.append(y * padded_w + xx)
    index = ember.tensor(targets, dtype=ember.int64).reshape(1, 1, -1).expand(
        n, channels, len(targets))
    values = x.reshape(n, channels, kernel[0] * kernel[1] * length)   # n may be 0
    image = ember.zeros((n, channels, padded_h * padded_w), dtype=x.dtype).scatter_add(
        2, index, values).reshape(n, channels, padded_h, padded_w)
    image = image[:, :, padding[0]:padding[0] + out_h, padding[1]:padding[1] + out_w]
    return image.squeeze(0) if unbatched else image


# ---- interpolation ------------------------------------------------------------

def _target_sizes(input, size, scale_factor, dims):
    if (size is None) == (scale_factor is None):
        raise ValueError("either size or scale_factor should be defined" if size is None
                         else "only one of size or scale_factor should be defined")
    if size is not None:
        sizes = [size] * dims if isinstance(size, int) else list(size)
        if len(sizes) != dims:
            raise ValueError(f"Input and output must have the same number of spatial "
                             f"dimensions, but got input with spatial dimensions of "
                             f"{list(input.shape[2:])} and output size of {sizes}. Please "
                             f"provide input tensor in (N, C, d1, d2, ...,dK) format and "
                             f"output size in (o1, o2, ...,oK) format.")
        return sizes, [None] * dims
    scales = [scale_factor] * dims if isinstance(scale_factor, (int, float)) \
        else list(scale_factor)
    return [int(math.floor(n * s)) for n, s in zip(input.shape[2:], scales)], scales


def _nearest_indices(size, out, scale, exact):
    ratio = (1.0 / scale) if scale is not None else size / out
    if exact:
        return [min(int(math.floor((o + 0.5) * ratio)), size - 1) for o in range(out)]
    return [min(int(math.floor(o * ratio)), size - 1) for o in range(out)]


def _linear_matrix(size, out, scale, align_corners, dtype):
    """(out x size) weights of linear interpolation along one dim."""
    rows = []
    for o in range(out):
        if align_corners:
            source = o * (size - 1) / (out - 1) if out > 1 else 0.0
        else:
            ratio = (1.0 / scale) if scale is not None else size / out
            source = max((o + 0.5) * ratio - 0.5, 0.0)
        low = min(int(math.floor(source)), size - 1)
        high = min(low + 1, size - 1)
        weight = source - low
        row = [0.0] * size
        row[low] += 1.0 - weight
        row[high] += weight
        rows.append(row)
    return ember.tensor(rows, dtype=dtype).reshape(out, size)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resizes the spatial dims: 'nearest', 'nearest-exact', 'linear' (3-D)
    and 'bilinear' (4-D)."""
    dims = input.dim() - 2
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if antialias:
        raise NotImplementedError("ember.nn.functional.interpolate: antialias=True is not "
                                  "implemented")
    sizes, scales = _target_sizes(input, size, scale_factor, dims)
    if recompute_scale_factor:
        scales = [None] * dims
    if mode in ("nearest", "nearest-exact"):
        output = input
        for i in range(dims):
            picks = _nearest_indices(input.shape[2 + i], sizes[i], scales[i],
                                     mode == "nearest-exact")
            output = output.index_select(2 + i, ember.tensor(picks, dtype=ember.int64))
        return output
    expected = {"linear": 1, "bilinear": 2}
    if mode not in expected:
        raise NotImplementedError(f"ember.nn.functional.interpolate: mode '{mode}' is not "
                                  f"implemented")
    if dims != expected[mode]:
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs "
                                  f"{expected[mode] + 2}D input")
    align = bool(align_corners)
    output = input
    for i in range(dims):
        weights = _linear_matrix(input.shape[2 + i], sizes[i], scales[i], align, input.dtype)
        moved = output.transpose(2 + i, output.dim() - 1)
        output = ember.matmul(moved, weights.t()).transpose(2 + i, output.dim() - 1)
    return output


# ---- pixel shuffles ----------------------------------------------------------------

def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""
    r = upscale_factor
    *batch, channels, height, width = input.shape
    if channels % (r * r) != 0:
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)="
                           f"{channels} is not divisible by {r * r}")
    c = channels // (r * r)
    x = input.reshape(-1, c, r, r, height, width).permute(0, 1, 4, 2, 5, 3)
    return x.reshape(*batch, c, height * r, width * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W)."""
    r = downscale_factor
    *batch, channels, height, width = input.shape
    if height % r or width % r:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by "
                           f"downscale_factor, but input.size(-2)={height} is not divisible "
                           f"by {r}" if height % r else
                           f"pixel_unshuffle expects width to be divisible by "
                           f"downscale_factor, but input.size(-1)={width} is not divisible "
                           f"by {r}")
    x = input.reshape(-1, channels, height // r, r, width // r, r).permute(0, 1, 3, 5, 2, 4)
    return x.reshape(*batch, channels * r * r, height // r, width // r)
