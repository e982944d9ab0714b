"""ember: a small PyTorch-like tensor library with a hand-written C core.

The layers (see DESIGN.md):
    python/ember/   this package: the public API, printing, memory, the tour
    ember._C        the CPython extension: THPVariable, THPStorage, ...
    c/th            the pure-C core: THTensor, THStorage, THAllocator
"""

import sys as _sys
import types as _types

from . import _C
from ._device import device
from ._tensor import Tensor
from ._tensor_str import set_printoptions
from . import memory
from .serialization import save, load

from ._C import (  # noqa: F401  (re-exported)
    Size,
    UntypedStorage,
    dtype,
    bool,
    uint8,
    int8,
    int16,
    int32,
    int64,
    float16,
    bfloat16,
    float32,
    float64,
    get_default_dtype,
    set_default_dtype,
    tensor,
    empty,
    zeros,
    ones,
    full,
    arange,
    linspace,
    eye,
    empty_like,
    zeros_like,
    ones_like,
    full_like,
    rand,
    randn,
    rand_like,
    randn_like,
    randint,
    manual_seed,
    initial_seed,
    from_numpy,
    from_dlpack,
)

# The operators (ember.add, ember.sum, ember.matmul, ...) and the threading
# knobs: every public function of the C operator families, by name (see
# Note [Function and method from one implementation] in c/python/THP.h).
for _name in _C._public_functions:
    globals()[_name] = getattr(_C, _name)
del _name

# ember.return_types: the named (values, indices) tuples of max(dim), sort,
# topk, ... (Note [Named result tuples] in c/python/ReturnTypes.c).
return_types = _types.ModuleType("ember.return_types")
return_types.__dict__.update(_C.return_types)
_sys.modules["ember.return_types"] = return_types

# PyTorch's aliases for the dtypes.
float = float32
double = float64
half = float16
long = int64
int = int32
short = int16

_C._set_python_types(Tensor, device("cpu"))

from . import autograd  # noqa: E402  (registers the derivative formulas)
from .autograd.grad_mode import (  # noqa: E402,F401
    no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled,
    is_inference_mode_enabled)

__version__ = "0.1.0"


def is_tensor(obj):
    """True for ember tensors (and subclasses)."""
    return isinstance(obj, Tensor)


def numel(input):
    return input.numel()

from . import nn, optim  # noqa: E402,F401  (ember.nn, ember.optim as in torch)
from . import jit  # noqa: E402,F401  (ember.jit.script, trace, save, load)
