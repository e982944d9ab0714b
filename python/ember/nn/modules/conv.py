"""Convolution layers (PyTorch's torch.nn.modules.conv): Conv1d, Conv2d,
ConvTranspose1d, ConvTranspose2d, with PyTorch's parameters, init, reprs
and padding modes."""

import math

import ember

from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]

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
        return F.conv2d(input, self.weight, self.bias, self.stride, self._conv_padding,
                        self.dilation, self.groups)


class Conv1d(_Conv):
    _spatial = 1


class Conv2d(_Conv):
    _spatial = 2


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
        """output_padding, or the one that makes the output `output_size`."""
        if output_size is None:
            return self.output_padding
        n = self._spatial
        output_size = list(output_size)[-n:]
        padding = []
        for i in range(n):
            size = input.shape[input.dim() - n + i]
            smallest = ((size - 1) * self.stride[i] - 2 * self.padding[i]
                        + self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            if not smallest <= output_size[i] < smallest + self.stride[i]:
                raise ValueError(f"requested an output size of {output_size}, but valid "
                                 f"sizes range from {smallest} to "
                                 f"{smallest + self.stride[i] - 1} (for an input of "
                                 f"{list(input.shape[2:])})")
            padding.append(output_size[i] - smallest)
        return tuple(padding)

    def forward(self, input, output_size=None):
        conv = F.conv_transpose1d if self._spatial == 1 else F.conv_transpose2d
        return conv(input, self.weight, self.bias, self.stride, self.padding,
                    self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    _spatial = 1


class ConvTranspose2d(_ConvTranspose):
    _spatial = 2
