"""Dropout layers: random zeroing while training, the identity in eval mode
(PyTorch's torch.nn.modules.dropout).  The channel-wise and alpha forms are
Note [Feature and alpha dropout] in ember/nn/functional.py."""

from .. import functional as F
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
           "FeatureAlphaDropout"]


class _DropoutNd(Module):
    __constants__ = ["p", "inplace"]

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of (N, C, L) or (C, L) inputs."""

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of (N, C, H, W) inputs (a 3-D input is read as
    (N, C, L), with PyTorch's warning)."""

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) inputs."""

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Dropout that keeps SELU's zero mean and unit variance.  As PyTorch's,
    it accepts `inplace` but never acts in place."""

    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(_DropoutNd):
    """AlphaDropout with one draw per (sample, channel)."""

    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training)
