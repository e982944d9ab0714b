"""The old weight normalisation (PyTorch's torch.nn.utils.weight_norm).

    w = g * v / ||v||

`weight_norm(module, "weight", dim)` replaces the parameter `weight` by two
parameters, `weight_g` (the magnitude, the norm of `weight` over every
dimension but `dim`) and `weight_v` (the direction, `weight` itself), and a
forward pre-hook that recomputes `module.weight` (a plain attribute, not a
parameter) from them before every forward.  The newer API is
nn.utils.parametrizations.weight_norm.
"""

import warnings

import ember

from ..parameter import Parameter, UninitializedParameter

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]


def norm_except_dim(v, pow=2, dim=0):
    """The `pow`-norm of `v` over every dimension but `dim`, kept as size-1
    dimensions (so it broadcasts against `v`).  dim=-1 is PyTorch's code
    for "no dimension kept": the norm of the whole tensor, a 0-d tensor;
    any other negative dim counts from the end."""
    if dim == -1:
        return ember.linalg.vector_norm(v, pow)
    dim = dim % v.dim()
    others = tuple(d for d in range(v.dim()) if d != dim)
    return ember.linalg.vector_norm(v, pow, dim=others, keepdim=True)


def _weight_norm(v, g, dim=0):
    """PyTorch's torch._weight_norm: v * (g / ||v||), the norm over every
    dimension but `dim` (the whole tensor for dim=-1)."""
    return v * (g / norm_except_dim(v, 2, dim))


class WeightNorm:
    """The forward pre-hook that weight_norm registers; it also knows how
    to compute the weight and how to undo itself."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return _weight_norm(v, g, self.dim)

    @staticmethod
    def apply(module, name, dim):
        warnings.warn(
            "`torch.nn.utils.weight_norm` is deprecated in favor of "
            "`torch.nn.utils.parametrizations.weight_norm`.",
            FutureWarning, stacklevel=3)
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(
                    f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        if isinstance(weight, UninitializedParameter):
            raise ValueError(
                "The module passed to `WeightNorm` can't have uninitialized parameters. "
                "Make sure to run the dummy forward before applying weight normalization")
        # The weight leaves the parameters; g and v take its place.
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).data))
        module.register_parameter(name + "_v", Parameter(weight.data))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Reparametrises `module.<name>` as g * v / ||v|| (see the module
    docstring); dim=None normalises over the whole tensor."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Folds g and v back into one ordinary parameter `name`."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
