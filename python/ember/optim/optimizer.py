"""ember.optim.Optimizer: the base class of the optimizers (PyTorch's).

An optimizer holds `param_groups`, a list of dicts each with "params" (a
list of tensors) and the hyper-parameters of that group, and `state`, a
dict keyed by parameter of per-parameter tensors (momentum buffers, ...).
state_dict() replaces each parameter by its index in the order of the
groups, so a state dict is independent of tensor identity:

    {"state": {0: {...}, 1: {...}},
     "param_groups": [{"lr": 0.1, ..., "params": [0, 1]}]}
"""

import functools
import warnings
from collections import defaultdict
from copy import deepcopy
from itertools import chain

import ember
from ember.nn.modules.module import _typename, _zero_grad

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """Singleton marking a hyper-parameter that has no default."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _use_grad(step):
    """Runs an optimizer's step(closure=None) with grad mode off (on only
    for differentiable=True optimizers, as PyTorch); the closure, which
    recomputes the loss, runs with grad enabled."""

    @functools.wraps(step)
    def wrapper(self, closure=None):
        loss = None
        if closure is not None:
            with ember.enable_grad():
                loss = closure()
        with ember.set_grad_enabled(bool(self.defaults.get("differentiable", False))):
            step(self)
        return loss

    del wrapper.__wrapped__  # inspect.signature: step(self, closure=None), PyTorch's
    return wrapper


def _get_scalar_dtype():
    """The dtype of scalar state such as state["step"]: float64 under a
    float64 default dtype, else float32 (PyTorch's rule)."""
    return ember.float64 if ember.get_default_dtype() == ember.float64 else ember.float32


def _scalar_state(value):
    """A 0-d tensor of the scalar dtype, e.g. state["step"] = _scalar_state(0.0)."""
    return ember.tensor(value, dtype=_get_scalar_dtype())


def _lerp_(start, end, weight):
    """start.lerp_(end, weight) as PyTorch's kernel computes it: from the
    nearer end, so that the result is exact at weight 0 and weight 1."""
    if abs(weight) < 0.5:
        return start.add_(end - start, alpha=weight)
    return start.copy_(end - (end - start).mul_(1 - weight))


def _check_lr(lr):
    if isinstance(lr, ember.Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def _check_fused(fused, foreach, differentiable):
    """PyTorch's checks of fused=True (which ember accepts and runs as the
    single-tensor loop, the same update)."""
    if fused:
        if differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        if foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


class Optimizer:
    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, ember.Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of "
                "Tensors or dicts, but got " + _typename(params))
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    def add_param_group(self, param_group):
        """Appends a group, filling the hyper-parameters it does not set
        from `defaults`.  Its params may be tensors or (name, tensor)
        pairs (as from Module.named_parameters()); names go to
        param_group["param_names"]."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, ember.Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but "
                "the ordering of tensors in sets will change between runs. Please use "
                "a list instead.")
        params, names = _split_names(list(params))
        param_group["params"] = params
        if names:
            param_group["param_names"] = names
        for param in params:
            if not isinstance(param, ember.Tensor):
                raise TypeError(
                    "optimizer can only optimize Tensors, but one of the params is "
                    + _typename(param))
            if not self.defaults.get("differentiable", None) and not (
                    param.is_leaf or param.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(
                    "parameter group didn't specify a value of required optimization "
                    f"parameter {name}")
            param_group.setdefault(name, default)
        if len(params) != len(set(params)):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in "
                "future, this will cause an error; see "
                "github.com/pytorch/pytorch/issues/40967 for more information",
                stacklevel=3)
        existing = set()
        for group in self.param_groups:
            existing.update(group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                kind = "with names" if "param_names" in param_group else "without names"
                raise ValueError(
                    "all optimizer param groups should be with/without names. "
                    f"cannot add param group {kind} to the optimizer")
        if not existing.isdisjoint(params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for param in group["params"]:
                _zero_grad(param, set_to_none)

    def step(self, closure=None):
        raise NotImplementedError

    # ---- state_dict ---------------------------------------------------------

    def state_dict(self):
        """{"state": {index: per-param state}, "param_groups": [...]}, the
        parameters replaced by their running index over the groups.  The
        state tensors are the optimizer's own (not copies), as in PyTorch."""
        index_of = {}
        packed_groups = []
        for group in self.param_groups:
            packed = {key: value for key, value in group.items() if key != "params"}
            for param in group["params"]:
                index_of.setdefault(id(param), len(index_of))
            packed["params"] = [index_of[id(param)] for param in group["params"]]
            packed_groups.append(packed)
        packed_state = {
            (index_of[id(key)] if isinstance(key, ember.Tensor) else key): value
            for key, value in self.state.items()}
        return {"state": packed_state, "param_groups": packed_groups}

    def load_state_dict(self, state_dict):
        """Restores hyper-parameters and per-parameter state saved by
        state_dict() for the same parameter layout.  Floating-point state
        tensors take their parameter's dtype; "step" is kept as saved."""
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError(
                "loaded state dict contains a parameter group that doesn't match the "
                "size of optimizer's group")
        param_of = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                            chain.from_iterable(g["params"] for g in groups)))
        state = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key in param_of:
                param = param_of[key]
                state[param] = _cast_state(param, value)
            else:
                state[key] = value
        for group, saved in zip(groups, saved_groups):
            saved["params"] = group["params"]
            if "param_names" in group and "param_names" not in saved:
                saved["param_names"] = group["param_names"]
        self.state = state
        self.param_groups = saved_groups

    def __repr__(self):
        text = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)


class _PerParameterOptimizer(Optimizer):
    """An optimizer whose update reads and writes one parameter (and its
    state) at a time: step() calls self._update(param, group) for every
    parameter that has a gradient.  foreach=True runs this same loop
    (PyTorch's foreach kernels compute the same update on lists of tensors)."""

    # Group flags that optimizers pickled by older versions may lack.
    _setstate_defaults = {"maximize": False}

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for key, default in self._setstate_defaults.items():
                group.setdefault(key, default)

    @_use_grad
    def step(self):
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is not None:
                    self._update(param, group)

    def _update(self, param, group):
        raise NotImplementedError

    def _lazy_state(self, param, buffers, scalars=(("step", 0.0),)):
        """self.state[param], filled on first use with the 0-d `scalars`
        (key, initial value) and zero tensors like param named `buffers`,
        in that order (the order of PyTorch's state_dict)."""
        state = self.state[param]
        if len(state) == 0:
            for key, value in scalars:
                state[key] = _scalar_state(value)
            for key in buffers:
                state[key] = ember.zeros_like(param)
        return state


def _update_gradient(param, group):
    """The gradient an update uses: negated for group["maximize"]; with a
    weight decay, either param shrunk in place by lr * weight_decay
    (group["decoupled_weight_decay"], AdamW's) or weight_decay * param
    added to the gradient (an L2 penalty)."""
    grad = -param.grad if group["maximize"] else param.grad
    weight_decay = group["weight_decay"]
    if weight_decay != 0:
        if group.get("decoupled_weight_decay", False):
            param.mul_(1 - group["lr"] * weight_decay)
        else:
            grad = grad.add(param, alpha=weight_decay)
    return grad


def _split_names(params):
    """(tensors, names) from a list of tensors or of (name, tensor) pairs."""
    named = [p for p in params if isinstance(p, tuple)]
    if not named:
        return params, []
    if len(named) != len(params):
        raise ValueError(
            "all optimizer params should be with/without names. Some param names are missing")
    return [tensor for _, tensor in named], [name for name, _ in named]


def _cast_state(param, value, key=None):
    """A loaded state value, its tensors converted to `param`'s dtype."""
    if isinstance(value, ember.Tensor):
        if key != "step" and param.is_floating_point():
            return value.to(param.dtype)
        return value
    if isinstance(value, dict):
        return {k: _cast_state(param, v, key=k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(param, v, key=key) for v in value)
    return value
