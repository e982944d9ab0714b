"""ember.nn.functional: the functional forms of layers and activations.

Each name here is the C operator itself (no Python wrapper in between), under
the name PyTorch gives it in torch.nn.functional.
"""

from .. import _C

one_hot = _C._one_hot
relu = _C.relu
gelu = _C.gelu
silu = _C.silu
sigmoid = _C.sigmoid
tanh = _C.tanh
softmax = _C.softmax
log_softmax = _C.log_softmax

__all__ = ["one_hot", "relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax"]
