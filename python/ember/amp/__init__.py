"""ember.amp: automatic mixed precision, as PyTorch's torch.amp.

`autocast` runs matrix products in a 16-bit float type and precision-hungry
ops in float32; `GradScaler` scales the loss so half-precision gradients
stay in range.
"""

from .autocast_mode import (  # noqa: F401
    autocast, custom_bwd, custom_fwd, get_autocast_dtype, is_autocast_available,
    is_autocast_enabled)
from .grad_scaler import GradScaler  # noqa: F401

__all__ = ["autocast", "custom_fwd", "custom_bwd", "is_autocast_available",
           "GradScaler"]
