"""ember.amp.autocast: run the ops that tolerate it in lower precision.

Inside `with ember.autocast(device_type="cpu", dtype=ember.bfloat16):`
matrix products run in bfloat16 (fast, and their float32 accumulation
keeps them accurate), while ops that need range or precision (losses,
reductions of products, factorisations) run in float32, whatever their
inputs.  The lists are PyTorch's CPU autocast lists, restricted to the ops
ember has (the C boundary's hook: Note [The autocast hook] in
c/python/Autograd.c; Python-level functions such as the losses use
`autocast_policy`).  Casts are ordinary differentiable ops, so gradients
flow back to float32 parameters in float32.

Eligible tensors are floating point and not float64, as PyTorch's: a
float64 tensor is left as it is.  Unlike PyTorch, casts of the same
parameter are not cached within a region (cache_enabled is accepted).
"""

import functools
import threading
import warnings

from .. import _C

__all__ = ["autocast", "is_autocast_available", "custom_fwd", "custom_bwd",
           "autocast_policy"]

# PyTorch's CPU lists (aten/src/ATen/autocast_mode.cpp), by ember's op
# names; "__matmul__" is the @ operator's slot.
LOWER_PRECISION_FP = (
    "conv1d", "conv2d", "conv3d", "bmm", "mm", "linalg_vecdot", "baddbmm", "addmm",
    "addbmm", "linear", "matmul", "__matmul__", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "prelu", "scaled_dot_product_attention",
)
FP32 = (
    "avg_pool3d", "binary_cross_entropy", "grid_sampler", "polar", "prod", "quantile",
    "nanquantile", "stft", "cdist", "trace", "view_as_complex", "cholesky",
    "cholesky_inverse", "cholesky_solve", "inverse", "lu_solve", "orgqr", "ormqr",
    "pinverse", "max_pool3d", "max_unpool2d", "max_unpool3d", "adaptive_avg_pool3d",
    "reflection_pad1d", "reflection_pad2d", "replication_pad1d", "replication_pad2d",
    "replication_pad3d", "mse_loss", "cosine_embedding_loss", "nll_loss",
    "nll_loss2d", "hinge_embedding_loss", "poisson_nll_loss", "smooth_l1_loss",
    "cross_entropy", "l1_loss", "huber_loss", "margin_ranking_loss",
    "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss", "ctc_loss",
    "kl_div", "multilabel_margin_loss", "binary_cross_entropy_with_logits",
)
PROMOTE = ("stack", "cat", "index_copy")

_POLICIES = {**{name: "lower" for name in LOWER_PRECISION_FP},
             **{name: "fp32" for name in FP32},
             **{name: "promote" for name in PROMOTE}}

_DEFAULT_DTYPE = {"cpu": "bfloat16", "cuda": "float16"}
_CPU_DTYPES = ("bfloat16", "float16")


def is_autocast_available(device_type):
    return device_type in _DEFAULT_DTYPE


class _ThreadState(threading.local):
    def __init__(self):
        self.enabled = {"cpu": False, "cuda": False}
        self.dtype = {}     # device type -> the lower-precision dtype


_state = _ThreadState()


def is_autocast_enabled(device_type="cuda"):
    return _state.enabled.get(device_type, False)


def get_autocast_dtype(device_type):
    if device_type not in _DEFAULT_DTYPE:
        raise RuntimeError(f"unsupported autocast device_type '{device_type}'")
    return _state.dtype.get(device_type) or getattr(_C, _DEFAULT_DTYPE[device_type])


class autocast:
    """Context manager (and decorator) enabling autocast for `device_type`."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: "
                             f"`{type(device_type)}`")
        if not is_autocast_available(device_type):
            raise RuntimeError(f"User specified an unsupported autocast device_type "
                               f"'{device_type}'")
        self.device = device_type
        self.fast_dtype = dtype if dtype is not None else get_autocast_dtype(device_type)
        self._enabled = bool(enabled)
        self._cache_enabled = cache_enabled
        if device_type == "cuda" and self._enabled:
            from .. import cuda
            if not cuda.is_available():
                warnings.warn("User provided device_type of 'cuda', but CUDA is not "
                              "available. Disabling")
                self._enabled = False
        if device_type == "cpu" and self._enabled and \
                str(self.fast_dtype).removeprefix("ember.") not in _CPU_DTYPES:
            warnings.warn(f"In CPU autocast, but the target dtype is not supported. "
                          f"Disabling autocast.\nCPU Autocast only supports dtype of "
                          f"ember.bfloat16, ember.float16 currently.")
            self._enabled = False

    def __enter__(self):
        self._saved = (_state.enabled[self.device], _state.dtype.get(self.device))
        _state.enabled[self.device] = self._enabled
        _state.dtype[self.device] = self.fast_dtype
        _install_hook()
        return self

    def __exit__(self, *exc_info):
        _state.enabled[self.device], _state.dtype[self.device] = self._saved
        _install_hook()
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def autocast_wrapper(*args, **kwargs):
            with autocast(self.device, dtype=self.fast_dtype, enabled=self._enabled,
                          cache_enabled=self._cache_enabled):
                return func(*args, **kwargs)
        return autocast_wrapper


def _install_hook():
    """The C hook is on exactly while some device's autocast is enabled
    (only the CPU can be, today)."""
    _C._set_autocast_hook(_hook if _state.enabled["cpu"] else None)


def _hook(what, policy, args, kwnames):
    """The C boundary's call: `what` (an op or a slot's name) with its
    arguments cast as `policy` says; the hook is off while this runs."""
    n_keywords = 0 if kwnames is None else len(kwnames)
    positional = args[:len(args) - n_keywords]
    keywords = dict(zip(kwnames or (), args[len(args) - n_keywords:]))
    positional, keywords = _cast_arguments(policy, positional, keywords)
    if isinstance(what, str):   # a number slot such as "__matmul__"
        return getattr(type(positional[0]), what)(*positional, **keywords)
    return what(*positional, **keywords)


def _is_eligible(value):
    from .._tensor import Tensor
    return (isinstance(value, Tensor) and value.is_floating_point()
            and value.dtype != _C.float64)


def _target_dtype(policy, positional, keywords):
    if policy == "lower":
        return get_autocast_dtype("cpu")
    if policy == "fp32":
        return _C.float32
    widest = None   # "promote": the widest floating dtype among the inputs
    for value in _leaves(list(positional) + list(keywords.values())):
        if _is_eligible(value):
            widest = value.dtype if widest is None else _C.promote_types(widest, value.dtype)
    return widest


def _leaves(values):
    for value in values:
        if isinstance(value, (list, tuple)):
            yield from _leaves(value)
        else:
            yield value


def _cast_arguments(policy, positional, keywords):
    dtype = _target_dtype(policy, positional, keywords)
    if dtype is None:
        return positional, keywords

    def cast(value):
        if isinstance(value, (list, tuple)):
            return type(value)(cast(item) for item in value)
        if _is_eligible(value) and value.dtype != dtype:
            return value.to(dtype)
        return value

    return [cast(v) for v in positional], {k: cast(v) for k, v in keywords.items()}


def autocast_policy(name):
    """Decorator for a Python-level op named `name`: under autocast it runs
    with its arguments cast as the op's policy says (the C ops get this
    from the boundary's hook)."""
    policy = _POLICIES[name]

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if not _state.enabled["cpu"]:
                return fn(*args, **kwargs)
            args, kwargs = _cast_arguments(policy, args, kwargs)
            with autocast("cpu", enabled=False):
                return fn(*args, **kwargs)
        return wrapper
    return decorate


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """For a custom autograd.Function's forward: with cast_inputs, runs it
    with autocast off and its floating inputs cast to cast_inputs."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type,
                                 cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        args[0]._fwd_used_autocast = is_autocast_enabled(device_type)
        args[0]._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None or not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)

        def cast(value):
            if isinstance(value, (list, tuple)):
                return type(value)(cast(item) for item in value)
            return value.to(cast_inputs) if _is_eligible(value) else value

        with autocast(device_type, enabled=False):
            return fwd(*[cast(a) for a in args], **{k: cast(v) for k, v in kwargs.items()})
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """For a custom autograd.Function's backward: runs it with the autocast
    state its forward ran with."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        with autocast(device_type, enabled=args[0]._fwd_used_autocast,
                      dtype=args[0]._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd


_C._set_autocast_policies(_POLICIES)
