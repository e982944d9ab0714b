"""Convolution layers (PyTorch's torch.nn.modules.conv): Conv1d, Conv2d,
Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, with PyTorch's
parameters, init, reprs and padding modes."""

import math

import ember

from .. import functional as F
from .. import init
from ..parameter import Parameter, UninitializedParameter
from .lazy import LazyModuleMixin
from .module import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
           "LazyConvTranspose2d", "LazyConvTranspose3d"]

# A set, as PyTorch's, so the error message lists it in the same order.
_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


def _tuple(value, n):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


class _ConvNd(Module):
    """weight (out, in/groups, *kernel) for a convolution, (in, out/groups,
    *kernel) for a transposed one; both start kaiming_uniform_(a=sqrt(5))
    and the bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as PyTorch's."""

    _spatial = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros", output_padding=0,
                 device=None, dtype=None):
        super().__init__()
        n = self._spatial
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"{{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in _tuple(stride, n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _tuple(kernel_size, n)
        self.stride = _tuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _tuple(padding, n)
        self.dilation = _tuple(dilation, n)
        self.transposed = self._transposed
        self.output_padding = _tuple(output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        shape = ((in_channels, out_channels // groups) if self._transposed
                 else (out_channels, in_channels // groups)) + self.kernel_size
        self.weight = Parameter(ember.empty(shape, dtype=dtype))
        if bias:
            self.bias = Parameter(ember.empty(out_channels, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0,) * len(self.padding):
            text += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            text += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


class _Conv(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros", device=None,
                 dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, 0, device, dtype)
        self._reversed_padding_repeated_twice = tuple(self._explicit_padding())

    def _explicit_padding(self):
        """F.pad's argument for a non-zero padding mode: last dim first
        (PyTorch keeps it as _reversed_padding_repeated_twice)."""
        if self.padding == "valid":
            return [0, 0] * self._spatial
        if self.padding == "same":
            amounts = []
            for d, k in zip(reversed(self.dilation), reversed(self.kernel_size)):
                total = d * (k - 1)
                amounts += [total // 2, total - total // 2]
            return amounts
        return [p for p in reversed(self.padding) for _ in range(2)]

    @property
    def _conv_padding(self):
        """The convolution's own padding: none once F.pad has padded."""
        return self.padding if self.padding_mode == "zeros" else 0

    def forward(self, input):
        # ember.jit.script compiles this: both conditions are decided at
        # compile time (Note [Conditions decided at compile time] in
        # jit/frontend.py), and no variable changes type
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
        if self._spatial == 1:
            return F.conv1d(input, self.weight, self.bias, self.stride, self._conv_padding,
                            self.dilation, self.groups)
        if self._spatial == 3:
            return F.conv3d(input, self.weight, self.bias, self.stride, self._conv_padding,
                            self.dilation, self.groups)
        return F.conv2d(input, self.weight, self.bias, self.stride, self._conv_padding,
                        self.dilation, self.groups)


class Conv1d(_Conv):
    _spatial = 1


class Conv2d(_Conv):
    _spatial = 2


class Conv3d(_Conv):
    _spatial = 3


class _ConvTranspose(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f'{type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding, device, dtype)

    def _output_padding(self, input, output_size):
        """output_padding, or the one that makes the output `output_size`
        (its spatial sizes, or all of the output's), as PyTorch's."""
        if output_size is None:
            return self.output_padding
        n = self._spatial
        leading = 2 if input.dim() == n + 2 else 1
        if len(output_size) == leading + n:
            output_size = output_size[leading:]
        if len(output_size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.dim()}D input, output_size must "
                             f"have {n} or {leading + n} elements (got {len(output_size)})")
        smallest = [(input.shape[leading + d] - 1) * self.stride[d] - 2 * self.padding[d]
                    + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(n)]
        largest = [low + s - 1 for low, s in zip(smallest, self.stride)]
        if any(not low <= size <= high
               for size, low, high in zip(output_size, smallest, largest)):
            raise ValueError(f"requested an output size of {output_size}, but valid sizes "
                             f"range from {smallest} to {largest} (for an input of "
                             f"{input.size()[2:]})")
        return tuple(size - low for size, low in zip(output_size, smallest))

    def forward(self, input, output_size=None):
        conv = {1: F.conv_transpose1d, 2: F.conv_transpose2d,
                3: F.conv_transpose3d}[self._spatial]
        return conv(input, self.weight, self.bias, self.stride, self.padding,
                    self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    _spatial = 1


class ConvTranspose2d(_ConvTranspose):
    _spatial = 2


class ConvTranspose3d(_ConvTranspose):
    _spatial = 3


# ---- lazy convolutions --------------------------------------------------------

class _LazyConvXdMixin(LazyModuleMixin):
    """in_channels from the first input (its dim 1, or dim 0 unbatched)."""

    def _make_placeholders(self, out_channels, bias, device, dtype):
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        if not self.has_uninitialized_params():
            return
        self.in_channels = self._get_in_channels(input)
        if self.in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        with ember.no_grad():
            if self.transposed:
                shape = (self.in_channels, self.out_channels // self.groups)
            else:
                shape = (self.out_channels, self.in_channels // self.groups)
            self.weight.materialize(shape + self.kernel_size)
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()

    def _get_in_channels(self, input):
        unbatched = self._spatial + 1
        if input.dim() not in (unbatched, unbatched + 1):
            raise RuntimeError(
                f"Expected {unbatched}D (unbatched) or {unbatched + 1}D (batched) input "
                f"to {self.__class__.__name__}, but got input of size: {input.shape}")
        return input.shape[1] if input.dim() == unbatched + 1 else input.shape[0]


class _LazyConv(_LazyConvXdMixin):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        # in_channels = out_channels = 0 and no bias until the first input.
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False,
                         padding_mode, device=device, dtype=dtype)
        self._make_placeholders(out_channels, bias, device, dtype)


class _LazyConvTranspose(_LazyConvXdMixin):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False,
                         dilation, padding_mode, device=device, dtype=dtype)
        self._make_placeholders(out_channels, bias, device, dtype)


class LazyConv1d(_LazyConv, Conv1d):
    cls_to_become = Conv1d


class LazyConv2d(_LazyConv, Conv2d):
    cls_to_become = Conv2d


class LazyConv3d(_LazyConv, Conv3d):
    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTranspose, ConvTranspose1d):
    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTranspose, ConvTranspose2d):
    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose, ConvTranspose3d):
    cls_to_become = ConvTranspose3d

