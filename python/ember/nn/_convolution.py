"""Convolutions and padding for ember.nn.functional: PyTorch's argument forms
and messages in front of the C kernels (_C._conv2d, _C._conv3d and their
backward products, c/th/THConv.c, Note [Convolution as GEMM]).

A 1-D convolution is a 2-D one over a height-1 image; 2-D and 3-D ones
reach the same C code (Note [Three spatial dims, one code path] in
c/th/THConv.h) through the entry points of their rank (_products); a
transposed convolution runs the input-gradient product forward.

Note [Convolution's three products]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The C kernels compute three bilinear products over one geometry: the
convolution C(x, W), its input gradient I(g, W) and its weight gradient
V(g, x).  Each is the adjoint of the others in one argument:
<g, C(x, W)> = <I(g, W), x> = <V(g, x), W>.  So each product's gradient
is made of the other two, and with each wrapped as an autograd.Function
(Convolution, ConvolutionTranspose, ConvolutionWeight) a backward that
calls them through their Functions is itself differentiable, to any
order (double backward, as a gradient penalty needs).  Without
create_graph the backward calls the kernels directly.
"""

import ember
from ember import _C
from ember.autograd.function import Function

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "pad"]


# ---- argument forms --------------------------------------------------------------

def _ntuple(value, n):
    """An int or a 1-tuple repeated n times; an n-tuple as it is."""
    if isinstance(value, int):
        return (value,) * n
    value = tuple(int(v) for v in value)
    return value * n if len(value) == 1 else value


def _check_arity(spatial, **arguments):
    """Each tuple argument has one value or one per spatial dim."""
    for name, value in arguments.items():
        if isinstance(value, (tuple, list)) and len(value) not in (1, spatial):
            raise RuntimeError(f"expected {name} to be a single integer value or a list of "
                               f"{spatial} values to match the convolution dimensions, but "
                               f"got {name}={list(value)}")


def _single_as_pair(value):
    """A 1-D argument as the (1, value) of the height-1 2-D convolution."""
    if isinstance(value, (tuple, list)):
        (value,) = value
    return value


def _geometry(stride, padding, dilation, groups, spatial):
    """stride, padding and dilation as `spatial`-tuples (padding may stay a
    string), checked as PyTorch does."""
    stride, dilation = _ntuple(stride, spatial), _ntuple(dilation, spatial)
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if not isinstance(padding, str):
        padding = _ntuple(padding, spatial)
        if any(p < 0 for p in padding):
            raise RuntimeError("negative padding is not supported")
    return stride, padding, dilation


def _same_padding(weight, stride, dilation):
    """(symmetric padding, extra right/bottom padding) that keeps the size."""
    if any(s != 1 for s in stride):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    total = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
    return tuple(t // 2 for t in total), tuple(t - t // 2 * 2 for t in total)


def _check_conv(name, input, weight, bias, padding, dilation, groups, spatial):
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    batched = spatial + 2
    if input.dim() not in (batched - 1, batched):
        raise RuntimeError(f"Expected {batched - 1}D (unbatched) or {batched}D (batched) input "
                           f"to {name}, but got input of size: {list(input.shape)}")
    if weight.dim() != batched:
        raise RuntimeError(f"weight should have at least three dimensions")
    _check_weight_rows(weight, groups)
    if weight.shape[0] % groups != 0:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by "
                           f"{groups} at dimension 0, but got weight of size "
                           f"[{list(weight.shape)}] instead")
    channels = input.shape[1] if input.dim() == batched else input.shape[0]
    if channels != weight.shape[1] * groups:
        shown = list(input.shape) if input.dim() == batched else [1] + list(input.shape)
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, "
                           f"expected input{shown} to have {weight.shape[1] * groups} "
                           f"channels, but got {channels} channels instead")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != weight.shape[0]):
        raise RuntimeError(f"Given weight of size {list(weight.shape)}, expected bias to be "
                           f"1-dimensional with {weight.shape[0]} elements, but got bias of "
                           f"size {list(bias.shape)} instead")
    for t in (weight, bias):
        if t is not None and t.dtype != input.dtype:
            raise RuntimeError(f"expected scalar type {_type_name(input.dtype)} but found "
                               f"{_type_name(t.dtype)}")
    if input.dtype not in (ember.float32, ember.float64, ember.float16, ember.bfloat16):
        raise RuntimeError(f"\"{name}\" not implemented for '{_type_name(input.dtype)}': "
                           f"ember's convolutions run in floating point only")


def _check_weight_rows(weight, groups):
    if weight.shape[0] == 0:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least 1 at "
                           f"dimension 0, but got weight of size {list(weight.shape)} instead")


def _check_kernel_size(weight):
    """torch's refusal of a kernel with an empty spatial dim (a 1-D kernel
    arrives here as a height-1 2-D one, and torch names it so too)."""
    kernel = list(weight.shape[2:])
    if all(k > 0 for k in kernel):
        return
    if len(kernel) == 3:
        raise RuntimeError("kernel size should be greater than zero, but got: "
                           f"{kernel[0]} x {kernel[1]} x {kernel[2]} (TxHxW)")
    raise RuntimeError("kernel size should be greater than zero, but got kernel_height: "
                       f"{kernel[0]} kernel_width: {kernel[1]}")


def _check_transposed_weight(weight):
    """torch's transposed convolutions refuse an empty weight; in 2-D (and
    1-D, run as 2-D) an empty kernel is named first."""
    if weight.numel() > 0:
        return
    if weight.dim() == 5:
        raise RuntimeError("non-empty 5D (n_output_plane x n_input_plane x kernel_depth x "
                           "kernel_height x kernel_width) tensor expected for weight, but "
                           f"got: {list(weight.shape)}")
    _check_kernel_size(weight)
    raise RuntimeError("non-empty 2D or 4D weight tensor expected, but got: "
                       f"{list(weight.shape)}")


def _type_name(dtype):
    from .functional import _type_name as name_of
    return name_of(dtype)


def _check_kernel_fits(input, weight, padding, dilation):
    padded = [n + 2 * p for n, p in zip(input.shape[2:], padding)]
    kernel = [d * (k - 1) + 1 for d, k in zip(dilation, weight.shape[2:])]
    if any(k > n for k, n in zip(kernel, padded)):
        raise RuntimeError(
            f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
            f"Kernel size: ({' x '.join(map(str, kernel))}). Kernel size can't be greater "
            f"than actual input size")


# ---- the autograd Functions ------------------------------------------------------

def _remember(ctx, input, weight, bias, stride, padding, dilation, groups):
    """What both convolutions' backward needs: the operands and the ints the
    C products take after them."""
    ctx.save_for_backward(input, weight)
    ctx.geometry = (*stride, *padding, *dilation, groups)
    ctx.has_bias = bias is not None


def _bias_grad(ctx, grad):
    if not (ctx.has_bias and ctx.needs_input_grad[2]):
        return None
    # The spatial dims first (a contiguous run per sample and channel), then
    # the batch: reducing (0, 2, 3) at once is not one run, and THReduce
    # would copy grad channel-first to make it one (4x the time at 64x56x56).
    return grad.sum(tuple(range(2, grad.dim()))).sum(0)


# The C products by spatial dims: (forward, input gradient, weight gradient).
_PRODUCTS = {
    2: (_C._conv2d, _C._conv2d_backward_input, _C._conv2d_backward_weight),
    3: (_C._conv3d, _C._conv3d_backward_input, _C._conv3d_backward_weight),
}


def _products(operand):
    """The C products for an N x C x *spatial operand."""
    return _PRODUCTS[operand.dim() - 2]


class Convolution(Function):
    """out = conv2d/conv3d(input, weight) + bias on contiguous NC(D)HW
    tensors."""

    @staticmethod
    def forward(ctx, input, weight, bias, stride, padding, dilation, groups):
        _remember(ctx, input, weight, bias, stride, padding, dilation, groups)
        return _products(input)[0](input, weight, bias, *ctx.geometry)

    @staticmethod
    def backward(ctx, grad):
        input, weight = ctx.saved_tensors
        grad = grad.contiguous()
        needs = ctx.needs_input_grad
        grad_input = grad_weight = None
        if needs[0]:
            grad_input = _input_product(grad, weight, input.shape[2:], ctx.geometry)
        if needs[1]:
            grad_weight = _weight_product(grad, input, weight.shape[2:], ctx.geometry)
        return grad_input, grad_weight, _bias_grad(ctx, grad), None, None, None, None


class ConvolutionTranspose(Function):
    """out = conv_transpose2d/3d(input, weight) + bias, the output's spatial
    size given: the input-gradient product I(input, weight) run forward."""

    @staticmethod
    def forward(ctx, input, weight, bias, out_size, stride, padding, dilation, groups):
        _remember(ctx, input, weight, bias, stride, padding, dilation, groups)
        out = _products(input)[1](input, weight, *out_size, *ctx.geometry)
        if bias is None:
            return out
        return out.add_(bias.reshape(1, -1, *[1] * len(out_size)))

    @staticmethod
    def backward(ctx, grad):
        input, weight = ctx.saved_tensors
        grad = grad.contiguous()
        needs = ctx.needs_input_grad
        grad_input = grad_weight = None
        if needs[0]:
            grad_input = _conv_product(grad, weight, ctx.geometry)
        if needs[1]:
            grad_weight = _weight_product(input, grad, weight.shape[2:], ctx.geometry)
        return grad_input, grad_weight, _bias_grad(ctx, grad), None, None, None, None, None


class ConvolutionWeight(Function):
    """The weight-gradient product V(grad, input) (the kernel's spatial size
    given), as a Function so that a convolution's backward is
    differentiable (Note [Convolution's three products])."""

    @staticmethod
    def forward(ctx, grad, input, kernel_size, geometry):
        ctx.save_for_backward(grad, input)
        ctx.geometry = geometry
        return _products(input)[2](grad, input, *kernel_size, *geometry)

    @staticmethod
    def backward(ctx, grad_weight):
        grad, input = ctx.saved_tensors
        grad_weight = grad_weight.contiguous()
        needs = ctx.needs_input_grad
        grad_grad = grad_input = None
        if needs[0]:
            grad_grad = _conv_product(input, grad_weight, ctx.geometry)
        if needs[1]:
            grad_input = _input_product(grad, grad_weight, input.shape[2:], ctx.geometry)
        return grad_grad, grad_input, None, None


def _recording():
    """True inside a backward that builds a graph (create_graph=True)."""
    return ember.is_grad_enabled()


def _conv_product(input, weight, geometry):
    """C(input, weight), without bias."""
    if _recording():
        stride, padding, dilation, groups = _split_geometry(geometry)
        return Convolution.apply(input, weight, None, stride, padding, dilation, groups)
    return _products(input)[0](input, weight, None, *geometry)


def _input_product(grad, weight, input_size, geometry):
    """I(grad, weight) with the input's spatial size."""
    if _recording():
        stride, padding, dilation, groups = _split_geometry(geometry)
        return ConvolutionTranspose.apply(grad, weight, None, tuple(input_size), stride,
                                          padding, dilation, groups)
    return _products(grad)[1](grad, weight, *input_size, *geometry)


def _weight_product(grad, input, kernel_size, geometry):
    """V(grad, input) with the weight's kernel size."""
    if _recording():
        return ConvolutionWeight.apply(grad, input, tuple(kernel_size), geometry)
    return _products(input)[2](grad, input, *kernel_size, *geometry)


def _split_geometry(geometry):
    """(stride, padding, dilation, groups) from _remember's flat tuple."""
    n = (len(geometry) - 1) // 3
    return geometry[0:n], geometry[n:2 * n], geometry[2 * n:3 * n], geometry[-1]


def _contiguous(t):
    return None if t is None else t.contiguous()


def _in_compute_dtype(apply, input, weight, bias, *geometry):
    """apply() on contiguous operands; float16/bfloat16 ones run in float32
    and the result is rounded once, as the other operators do (the casts
    are recorded, so gradients come back in the operands' dtypes)."""
    low = input.dtype if input.dtype in (ember.float16, ember.bfloat16) else None
    if low is not None:
        input, weight = input.float(), weight.float()
        bias = None if bias is None else bias.float()
    out = apply(input.contiguous(), weight.contiguous(), _contiguous(bias), *geometry)
    return out if low is None else out.to(low)


# ---- the functions -------------------------------------------------------------------

def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _convnd("conv2d", input, weight, bias, stride, padding, dilation, groups, 2)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _convnd("conv1d", input, weight, bias, stride, padding, dilation, groups, 1)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _convnd("conv3d", input, weight, bias, stride, padding, dilation, groups, 3)


def _convnd(name, input, weight, bias, stride, padding, dilation, groups, spatial):
    _check_conv(name, input, weight, bias, padding, dilation, groups, spatial)
    if isinstance(padding, str) and padding not in ("same", "valid"):
        raise RuntimeError(f"Invalid padding string: '{padding}'")
    _check_arity(spatial, stride=stride, dilation=dilation,
                 **({} if isinstance(padding, str) else {"padding": padding}))
    unbatched = input.dim() == spatial + 1
    if unbatched:
        input = input.unsqueeze(0)
    if spatial == 1:    # a height-1 image and a height-1 kernel
        input, weight = input.unsqueeze(2), weight.unsqueeze(2)
        stride, dilation = (1, _single_as_pair(stride)), (1, _single_as_pair(dilation))
        if not isinstance(padding, str):
            padding = (0, _single_as_pair(padding))
    dims = input.dim() - 2   # the kernel's: a 1-D convolution runs as a 2-D one
    stride, padding, dilation = _geometry(stride, padding, dilation, groups, dims)
    if padding == "valid":
        padding = (0,) * dims
    elif padding == "same":
        padding, extra = _same_padding(weight, stride, dilation)
        if any(extra):  # the odd one of each dim's padding goes at its end
            input = pad(input, [amount for e in reversed(extra) for amount in (0, e)])
    _check_kernel_fits(input, weight, padding, dilation)
    _check_kernel_size(weight)
    out = _in_compute_dtype(Convolution.apply, input, weight, bias, stride, padding,
                            dilation, groups)
    if spatial == 1:
        out = out.squeeze(2)
    return out.squeeze(0) if unbatched else out


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    return _conv_transposend("conv_transpose2d", input, weight, bias, stride, padding,
                             output_padding, groups, dilation, 2)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    return _conv_transposend("conv_transpose1d", input, weight, bias, stride, padding,
                             output_padding, groups, dilation, 1)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    return _conv_transposend("conv_transpose3d", input, weight, bias, stride, padding,
                             output_padding, groups, dilation, 3)


# The dims PyTorch's output_padding message names, by spatial dims.
_DIM_NAMES = {2: ("height", "width"), 3: ("depth", "height", "width")}


def _conv_transposend(name, input, weight, bias, stride, padding, output_padding, groups,
                      dilation, spatial):
    batched = spatial + 2
    if input.dim() not in (batched - 1, batched):
        raise RuntimeError(f"Expected {batched - 1}D (unbatched) or {batched}D (batched) input "
                           f"to {name}, but got input of size: {list(input.shape)}")
    _check_arity(spatial, stride=stride, padding=padding, dilation=dilation,
                 output_padding=output_padding)
    unbatched = input.dim() == batched - 1
    if unbatched:
        input = input.unsqueeze(0)
    _check_weight_rows(weight, groups)
    channels = input.shape[1]
    if weight.shape[0] != channels:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected "
                           f"input{list(input.shape)} to have {weight.shape[0]} channels, but "
                           f"got {channels} channels instead")
    if spatial == 1:
        input, weight = input.unsqueeze(2), weight.unsqueeze(2)
        stride, dilation = (1, _single_as_pair(stride)), (1, _single_as_pair(dilation))
        padding = (0, _single_as_pair(padding))
        output_padding = (0, _single_as_pair(output_padding))
    _check_transposed_weight(weight)
    dims = input.dim() - 2   # the kernel's: a 1-D convolution runs as a 2-D one
    stride, padding, dilation = _geometry(stride, padding, dilation, groups, dims)
    output_padding = _ntuple(output_padding, dims)
    if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
        names = _DIM_NAMES[dims]
        listed = [f"{what}_{dim}: {v}"
                  for what, values in (("output_padding", output_padding),
                                       ("stride", stride), ("dilation", dilation))
                  for dim, v in zip(names, values)]
        raise RuntimeError("output padding must be smaller than either stride or "
                           "dilation, but got " + " ".join(listed))
    out_size = [(n - 1) * s - 2 * p + d * (k - 1) + op + 1 for n, s, p, d, k, op in
                zip(input.shape[2:], stride, padding, dilation, weight.shape[2:],
                    output_padding)]
    out = _in_compute_dtype(ConvolutionTranspose.apply, input, weight, bias, out_size,
                            stride, padding, dilation, groups)
    if spatial == 1:
        out = out.squeeze(2)
    return out.squeeze(0) if unbatched else out


# ---- padding ------------------------------------------------------------------------

def pad(input, pad, mode="constant", value=None):
    """Pads the last len(pad) // 2 dims: pad = (left, right, top, bottom, ...),
    last dim first, as PyTorch.  Modes: constant (negative amounts crop),
    reflect, replicate, circular."""
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.dim():
        raise RuntimeError("Padding length should be less than or equal to two times the "
                           "input dimension but got padding length "
                           f"{len(pad)} and input of dimension {input.dim()}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if mode != "constant" and value not in (None, 0, 0.0):
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    if mode != "constant" and not (input.dim() - 1 <= len(pad) // 2 + 1 <= input.dim()
                                   and len(pad) in (2, 4, 6)):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.dim()}D input tensor.\n"
            f"Supported combinations for non-constant padding:\n"
            f"  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            f"  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            f"  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    output = input
    for i in range(len(pad) // 2):
        dim = input.dim() - 1 - i
        before, after = int(pad[2 * i]), int(pad[2 * i + 1])
        if mode == "constant":
            output = _pad_constant(output, dim, before, after, 0.0 if value is None else value)
        else:
            output = output.index_select(dim, _pad_indices(mode, output.shape[dim], before,
                                                           after, dim, input))
    return output


def _pad_constant(input, dim, before, after, value):
    if before < 0:
        input = input.narrow(dim, -before, input.shape[dim] + before)
        before = 0
    if after < 0:
        input = input.narrow(dim, 0, input.shape[dim] + after)
        after = 0
    pieces = []
    for amount in (before, None, after):
        if amount is None:
            pieces.append(input)
        elif amount > 0:
            shape = list(input.shape)
            shape[dim] = amount
            pieces.append(ember.full(shape, value, dtype=input.dtype))
    return ember.cat(pieces, dim) if len(pieces) > 1 else input


def _pad_indices(mode, size, before, after, dim, original):
    """The source index of each output position along one dim."""
    if mode == "reflect" and (before >= size or after >= size):
        raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding "
                           f"input dimension, but got: padding ({before}, {after}) at "
                           f"dimension {dim} of input {list(original.shape)}")
    if mode == "circular" and (before > size or after > size):
        raise RuntimeError("Padding value causes wrapping around more than once.")
    indices = []
    for position in range(-before, size + after):
        if mode == "replicate":
            indices.append(min(max(position, 0), size - 1))
        elif mode == "circular":
            indices.append(position % size)
        else:   # reflect: mirror about the edge elements, which are not repeated
            period = 2 * (size - 1)
            folded = position % period if period else 0
            indices.append(folded if folded < size else period - folded)
    return ember.tensor(indices, dtype=ember.int64)
