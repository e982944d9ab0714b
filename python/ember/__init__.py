"""ember: a small PyTorch-like tensor library with a hand-written C core.

The layers (see docs/architecture.md):
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
    randint_like,
    randperm,
    manual_seed,
    initial_seed,
    seed,
    Generator,
    default_generator,
    from_numpy,
    from_dlpack,
)

# The operators (ember.add, ember.sum, ember.matmul, ...) and the threading
# knobs: every public function of the C operator families, by name (see
# Note [Function and method from one implementation] in c/python/THP.h).
for _name in _C._public_functions:
    globals()[_name] = getattr(_C, _name)
del _name

# Functions written over the operators (ember.isclose, ember.meshgrid, ...).
from ._functions import (  # noqa: E402,F401
    isclose, allclose, equal, meshgrid, take_along_dim, diff, kron, cdist, tril_indices,
    triu_indices, flatten, unflatten, block_diag, cartesian_prod, rot90, vander, polygamma,
    as_tensor)

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

_C._set_python_types(Tensor, device("cpu"), device("cuda", 0))

from . import autograd  # noqa: E402  (registers the derivative formulas)
from . import random  # noqa: E402,F401  (ember.random, as torch.random)
from .random import get_rng_state, set_rng_state, normal, manual_seed  # noqa: E402,F401
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
from . import onnx  # noqa: E402,F401  (ember.onnx.export; the onnx package loads on use)
from . import amp, cuda, accelerator, backends  # noqa: E402,F401
from .amp import autocast, is_autocast_enabled, get_autocast_dtype  # noqa: E402,F401
from . import serialization  # noqa: E402,F401
from ._compile import compile  # noqa: E402,F401
from ._global_flags import (  # noqa: E402,F401
    set_default_device, get_default_device, set_float32_matmul_precision,
    get_float32_matmul_precision, use_deterministic_algorithms,
    are_deterministic_algorithms_enabled, is_deterministic_algorithms_warn_only_enabled)
from ._legacy import LEGACY_TYPES as _LEGACY_TYPES  # noqa: E402
globals().update(_LEGACY_TYPES)   # ember.FloatTensor, ember.LongTensor, ...

from . import linalg  # noqa: E402  (ember.linalg, over LAPACK through NumPy)
from ._einsum import einsum, einsum_path  # noqa: E402,F401

# PyTorch's top-level linear algebra: ember.det, Tensor.det(), ember.inverse, ...
for _name, _function in linalg.TOP_LEVEL.items():
    globals()[_name] = _function
    setattr(Tensor, _name, _function)
del _name, _function

# PyTorch's function forms of methods, aliases, broadcasting helpers and
# composed reductions (ember.transpose, ember.broadcast_tensors, ember.median, ...).
from ._function_forms import _FUNCTIONS  # noqa: E402
globals().update({name: function for name, function in _FUNCTIONS.items()
                  if name not in globals()})   # the C operators' own forms come first
from ._dtype_info import finfo, iinfo  # noqa: E402,F401

from . import distributed, multiprocessing, utils  # noqa: E402,F401  (ember.utils.data as in torch)
from . import distributions  # noqa: E402,F401
