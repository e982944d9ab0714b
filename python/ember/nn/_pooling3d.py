"""3-D pooling and max unpooling for ember.nn.functional, composed over the
2-D pooling of ember/nn/_pooling.py.

Note [Separable 3-D pooling]
A 3-D pooling window is a box, the product of one interval per dim, so
each pooling is separable: pool every depth slice in 2-D (the C kernels of
c/th/THPool.c, the D slices of each channel read as D more channels), then
reduce along the depth.

- max: the 2-D pass gives each slice's window maximum and its flat (H, W)
  index; the depth pass picks, among the depth window's slices, the first
  one holding the largest value.  PyTorch scans a window in (d, h, w) order
  and keeps the first maximum, so the two agree on ties: the first slice
  with the maximum, and within it the first (h, w).  The depth pass finds
  its slice without autograd and gathers the value, so the gradient goes
  through the gather and the 2-D backward to the element PyTorch picks,
  a window of -inf included (where a padded -inf must not win).
- average: PyTorch's divisor is a product of per-dim counts (the window's
  extent within the padded input, or within the input alone), so dividing
  the 2-D averages' depth-window sums by the depth counts gives it.
- adaptive: PyTorch's adaptive windows are boxes too ([i*n // o,
  ceil((i+1)*n / o)) along each dim).
"""

import math

import ember
from ._pooling import (_adaptive_bounds, _averaging_matrix, _out_size, _window_counts,
                       adaptive_avg_pool2d, adaptive_max_pool2d, avg_pool2d, max_pool2d)

__all__ = ["max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d",
           "max_unpool1d", "max_unpool2d", "max_unpool3d"]


def _three(value, message, default=None):
    """An int or a 1- or 3-sequence as a 3-tuple (None -> default)."""
    if value is None or (isinstance(value, (tuple, list)) and len(value) == 0
                         and default is not None):
        return default
    if isinstance(value, int):
        return (value,) * 3
    value = tuple(int(v) for v in value)
    if len(value) not in (1, 3):
        raise RuntimeError(message)
    return value * 3 if len(value) == 1 else value


def _volume_input(input):
    """(input as (N, C, D, H, W), was it unbatched?)."""
    if input.dim() not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    unbatched = input.dim() == 4
    return (input.unsqueeze(0) if unbatched else input), unbatched


def _pool3d_output_size(name, input, x, kernel, stride, padding, dilation, ceil_mode):
    """The output (D, H, W), after PyTorch's checks in its order
    (pooling_output_shape per dim, then pool3d_shape_check)."""
    for k, s, p, d in zip(kernel, stride, padding, dilation):
        if s == 0:
            raise RuntimeError("stride should not be zero")
        if p < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {p}")
        if p > ((k - 1) * d + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={p}, kernel_size={k} and dilation={d}")
    if min(kernel) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kT: {kernel[0]} "
                           f"kH: {kernel[1]} kW: {kernel[2]}")
    if min(stride) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dT: {stride[0]} "
                           f"dH: {stride[1]} dW: {stride[2]}")
    if min(dilation) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationT: "
                           f"{dilation[0]} dilationH: {dilation[1]} dilationW: {dilation[2]}")
    first = 1 if input.dim() == 5 else 0
    for dim in range(first, input.dim()):
        if input.shape[dim] == 0:
            raise RuntimeError(f"{name}(): Expected input's non-batch dimensions to have "
                               f"positive length, but input has a shape of {list(input.shape)} "
                               f"and non-batch dimension {dim - first} has length zero!")
    sizes = tuple(x.shape[2:])
    if name == "avg_pool3d" and any(n < k for n, k in zip(sizes, kernel)):
        raise RuntimeError(f"input image (T: {sizes[0]} H: {sizes[1]} W: {sizes[2]}) smaller "
                           f"than kernel size (kT: {kernel[0]} kH: {kernel[1]} kW: {kernel[2]})")
    if any(p > k // 2 for k, p in zip(kernel, padding)):
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got "
                           f"kT: {kernel[0]} kW: {kernel[2]} kH: {kernel[1]} padT: {padding[0]} "
                           f"padW: {padding[2]} padH: {padding[1]}")
    out = [_out_size(n, k, s, p, d, ceil_mode)
           for n, k, s, p, d in zip(sizes, kernel, stride, padding, dilation)]
    if min(out) < 1:
        channels = x.shape[1]
        raise RuntimeError(f"Given input size: ({channels}x{'x'.join(map(str, sizes))}). "
                           f"Calculated output size: ({channels}x{'x'.join(map(str, out))}). "
                           f"Output size is too small")
    return out


def _as_planes(x):
    """(N, C, D, H, W) -> (N, C * D, H, W): each depth slice a channel."""
    n, c, depth, height, width = x.shape
    return x.reshape(n, c * depth, height, width)


def _from_planes(planes, n, c, depth):
    return planes.reshape(n, c, depth, *planes.shape[2:])


def _depth_windows(values, kernel, stride, padding, dilation, out, fill):
    """(N, C, out, oh, ow, kernel): every depth window of `values`
    (N, C, D, oh, ow), padded along the depth with `fill`."""
    depth = values.shape[2]
    span = dilation * (kernel - 1) + 1
    after = max((out - 1) * stride + span - depth - padding, 0)
    if padding or after:
        values = ember.nn.functional.pad(values, (0, 0, 0, 0, padding, after), value=fill)
    windows = values.unfold(2, span, stride)
    if dilation != 1:
        windows = windows[..., ::dilation]
    return windows[:, :, :out]


def _lowest(dtype):
    return float("-inf") if dtype.is_floating_point else ember.iinfo(dtype).min


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The largest element of each (kD, kH, kW) window; with return_indices
    also its flat index in the input's (D, H, W) volume, as PyTorch's
    (Note [Separable 3-D pooling])."""
    kernel = _three(kernel_size, "max_pool3d: kernel_size must either be a single int, or a "
                                 "tuple of three ints")
    stride = _three(stride, "max_pool3d: stride must either be omitted, a single int, or a "
                            "tuple of three ints", default=kernel)
    padding = _three(padding, "max_pool3d: padding must either be a single int, or a tuple "
                              "of three ints")
    dilation = _three(dilation, "max_pool3d: dilation must be either a single int, or a tuple "
                                "of three ints")
    x, unbatched = _volume_input(input)
    out = _pool3d_output_size("max_pool3d_with_indices_out_cpu_template", input, x, kernel,
                              stride, padding, dilation, ceil_mode)
    n, c, depth, height, width = x.shape
    values, plane_indices = max_pool2d(_as_planes(x), kernel[1:], stride[1:], padding[1:],
                                       dilation[1:], ceil_mode, return_indices=True)
    values = _from_planes(values, n, c, depth)
    plane_indices = _from_planes(plane_indices, n, c, depth)
    with ember.no_grad():
        windows = _depth_windows(values, kernel[0], stride[0], padding[0], dilation[0], out[0],
                                 _lowest(x.dtype))
        local = windows.max(-1).indices
        starts = ember.arange(out[0]).reshape(-1, 1, 1) * stride[0] - padding[0]
        slices = starts + local * dilation[0]
        # A padded slice wins only a window of -inf; PyTorch names its first
        # slice inside the input, as does the first tap at or past 0.
        first_inside = starts + (-starts).clamp(min=0).add(dilation[0] - 1).div(
            dilation[0], rounding_mode="floor") * dilation[0]
        slices = ember.where((slices < 0) | (slices >= depth), first_inside, slices)
    result = values.gather(2, slices)
    if return_indices:
        indices = slices * (height * width) + plane_indices.gather(2, slices)
    if unbatched:
        result = result.squeeze(0)
        indices = indices.squeeze(0) if return_indices else None
    return (result, indices) if return_indices else result


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """The mean of each (kD, kH, kW) window: divided by divisor_override,
    else by the window's size within the padded input (count_include_pad)
    or within the input (Note [Separable 3-D pooling])."""
    kernel = _three(kernel_size, "avg_pool3d: kernel_size must be a single int, or a tuple of "
                                 "three ints")
    stride = _three(stride, "avg_pool3d: stride must be omitted, a single int, or a tuple of "
                            "three ints", default=kernel)
    padding = _three(padding, "avg_pool3d: padding must be a single int, or a tuple of three "
                              "ints")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    x, unbatched = _volume_input(input)
    out = _pool3d_output_size("avg_pool3d", input, x, kernel, stride, padding, (1, 1, 1),
                              ceil_mode)
    n, c, depth = x.shape[:3]
    # the plane pass: window sums (divisor 1) or window means
    planes = avg_pool2d(_as_planes(x), kernel[1:], stride[1:], padding[1:], ceil_mode,
                        count_include_pad, 1 if divisor_override else None)
    planes = _from_planes(planes, n, c, depth)
    sums = _depth_windows(planes, kernel[0], stride[0], padding[0], 1, out[0], 0.0).sum(-1)
    if divisor_override:
        result = sums / divisor_override
    else:
        counts = _window_counts(depth, kernel[0], stride[0], padding[0], out[0],
                                count_include_pad)
        result = sums / ember.tensor(counts, dtype=sums.dtype).reshape(-1, 1, 1)
    return result.squeeze(0) if unbatched else result


# ---- adaptive pooling ------------------------------------------------------------

def _adaptive_input(name, input, output_size, separator):
    """(x as (N, C, D, H, W), unbatched?, (od, oh, ow)) after PyTorch's checks."""
    if input.dim() not in (4, 5):
        raise RuntimeError(f"{name}(): Expected 4D or 5D tensor, but got{separator} "
                           f"{list(input.shape)}")
    sizes = (output_size,) * 3 if isinstance(output_size, int) else tuple(output_size)
    if len(sizes) != 3:
        raise RuntimeError(f"{name}: output_size must be 3" if name == "adaptive_avg_pool3d"
                           else f"{name}(): internal error: output_size.size() must be 3")
    sizes = [input.shape[-3 + i] if s is None else int(s) for i, s in enumerate(sizes)]
    if min(sizes) < 0:
        if name == "adaptive_max_pool3d":   # PyTorch's max pool meets it allocating
            batch = list(input.shape[:-3])
            raise RuntimeError(f"Trying to create tensor with negative dimension {min(sizes)}: "
                               f"{batch + sizes}")
        raise RuntimeError(f"adaptive_avg_pool3d: elements of output_size must be greater than "
                           f"or equal to 0 but received {{{sizes[0]}, {sizes[1]},{sizes[2]}}}")
    for dim in range(1, input.dim()):
        if input.shape[dim] == 0:
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch "
                               f"dimensions, but input has sizes {list(input.shape)} with "
                               f"dimension {dim} being empty")
    if not input.is_floating_point():
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for "
                                  f"'{ember.nn.functional._type_name(input.dtype)}'")
    unbatched = input.dim() == 4
    return (input.unsqueeze(0) if unbatched else input), unbatched, sizes


def adaptive_avg_pool3d(input, output_size):
    """The mean of each adaptive (D, H, W) window."""
    x, unbatched, sizes = _adaptive_input("adaptive_avg_pool3d", input, output_size, "")
    n, c, depth = x.shape[:3]
    if 0 in sizes or n == 0:
        result = ember.zeros((n, c, *sizes), dtype=x.dtype) + x.sum() * 0
    else:
        planes = _from_planes(adaptive_avg_pool2d(_as_planes(x), sizes[1:]), n, c, depth)
        rows = _averaging_matrix(depth, sizes[0], x.dtype)     # (od, D)
        result = ember.matmul(planes.movedim(2, -1), rows.t()).movedim(-1, 2)
    return result.squeeze(0) if unbatched else result


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """The largest element of each adaptive window and its flat index in
    the input's (D, H, W) volume (Note [Separable 3-D pooling])."""
    x, unbatched, sizes = _adaptive_input("adaptive_max_pool3d", input, output_size, ":")
    n, c, depth, height, width = x.shape
    if 0 in sizes or n == 0:
        shape = (n, c, *sizes)
        values = ember.zeros(shape, dtype=x.dtype) + x.sum() * 0
        indices = ember.zeros(shape, dtype=ember.int64)
    else:
        values, plane_indices = adaptive_max_pool2d(_as_planes(x), sizes[1:], True)
        values = _from_planes(values, n, c, depth)
        plane_indices = _from_planes(plane_indices, n, c, depth)
        with ember.no_grad():
            slices = ember.stack([values[:, :, start:end].max(2).indices + start
                                  for start, end in _adaptive_bounds(depth, sizes[0])], 2)
        indices = slices * (height * width) + plane_indices.gather(2, slices)
        values = values.gather(2, slices)
    if unbatched:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return (values, indices) if return_indices else values


# ---- max unpooling ------------------------------------------------------------

def _unpool_output_size(input, kernel, stride, padding, output_size):
    """PyTorch's: the default size inverts the pooling's; an explicit one
    must lie strictly within a stride of it."""
    spatial = len(kernel)
    default = [(input.shape[-spatial + d] - 1) * stride[d] + kernel[d] - 2 * padding[d]
               for d in range(spatial)]
    if output_size is None:
        sizes = default
    else:
        sizes = list(output_size)
        if len(sizes) == spatial + 2:
            sizes = sizes[2:]
        if len(sizes) != spatial:
            raise ValueError(f"output_size should be a sequence containing {spatial} or "
                             f"{spatial + 2} elements, but it has a length of '{len(sizes)}'")
        for d in range(spatial):
            low, high = default[d] - stride[d], default[d] + stride[d]
            if not low < sizes[d] < high:
                raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be '
                                 f'between {low} and {high})')
    for d in range(spatial):
        if sizes[d] < 0:
            raise ValueError(f"max_unpooling: output_size must contain non-negative spatial "
                             f"dimensions, but got output_size[{d}]={sizes[d]}")
    return [int(s) for s in sizes]


def _max_unpool(input, indices, sizes, spatial):
    """Each input value written at its flat index in a zero (N, C, *sizes)
    volume: the partial inverse of max pooling.  PyTorch's checks, in order."""
    if indices.dtype != ember.int64:   # PyTorch's 3-D form does not name the type
        got = f" but got: {ember.nn.functional._type_name(indices.dtype)}" if spatial < 3 else ""
        raise RuntimeError(f"elements in indices should be type int64{got}")
    if input.dim() not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"Input to max_unpooling{spatial}d should be a {spatial + 1}d or "
                           f"{spatial + 2}d Tensor, but got a tensor with {input.dim()} "
                           f"dimensions.")
    if input.shape != indices.shape:
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape)}) but got indices tensor with shape: "
                           f"{list(indices.shape)}")
    for dim in range(1, input.dim()):
        if input.shape[dim] == 0:
            raise RuntimeError(f"max_unpooling{spatial}d_forward_out_cpu(): Expected input to "
                               f"have non-zero size for non-batch dimensions, but got "
                               f"{list(input.shape)} with dimension {dim} being empty.")
    unbatched = input.dim() == spatial + 1
    x = input.unsqueeze(0) if unbatched else input
    flat_indices = (indices.unsqueeze(0) if unbatched else indices).flatten(2)
    volume = math.prod(sizes)
    invalid = (flat_indices < 0) | (flat_indices >= volume)
    if flat_indices.numel() and invalid.any().item():
        bad = ember.masked_select(flat_indices, invalid)[0].item()
        raise RuntimeError(f"Found an invalid max index: {bad} (output volumes are of size "
                           f"{'x'.join(map(str, sizes))})")
    output = ember.zeros((x.shape[0], x.shape[1], volume), dtype=x.dtype)
    output = output.scatter(2, flat_indices, x.flatten(2)).reshape(*x.shape[:2], *sizes)
    return output.squeeze(0) if unbatched else output


def _unpool_arguments(kernel_size, stride, padding, n):
    as_tuple = (lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,) * n)
    kernel = as_tuple(kernel_size)
    return kernel, (kernel if stride is None else as_tuple(stride)), as_tuple(padding)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool1d (as PyTorch, through the 2-D form)."""
    kernel, stride, padding = _unpool_arguments(kernel_size, stride, padding, 1)
    sizes = _unpool_output_size(input, kernel, stride, padding, output_size)
    return _max_unpool(input.unsqueeze(-1), indices.unsqueeze(-1), sizes + [1], 2).squeeze(-1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool2d: zeros except at the indices."""
    kernel, stride, padding = _unpool_arguments(kernel_size, stride, padding, 2)
    sizes = _unpool_output_size(input, kernel, stride, padding, output_size)
    return _max_unpool(input, indices, sizes, 2)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of max_pool3d."""
    kernel, stride, padding = _unpool_arguments(kernel_size, stride, padding, 3)
    sizes = _unpool_output_size(input, kernel, stride, padding, output_size)
    return _max_unpool(input, indices, sizes, 3)
