"""The old spectral normalisation (PyTorch's torch.nn.utils.spectral_norm).

    w = w_orig / sigma(w_orig),   sigma = u . (W v)

where W is w_orig reshaped to a matrix (the rows along `dim`) and u, v
estimate its leading singular vectors.  `spectral_norm(module)` renames the
parameter `weight` to `weight_orig`, keeps u and v as the buffers
`weight_u` and `weight_v`, and registers a forward pre-hook that sets the
plain attribute `module.weight` before every forward.

Note [Power iteration only in training]: in training mode each forward
first improves u and v in place by `n_power_iterations` steps of the power
method (without gradient), then clones them, so that the backward of sigma
sees the values the forward used even if the buffers change again.  In eval
mode u and v are read as stored: the weight is the one the last training
forward saw.  The gradient flows through W in sigma, never through u, v.
"""

import ember
import ember.nn.functional as F

from ..parameter import Parameter, UninitializedParameter

__all__ = ["SpectralNorm", "SpectralNormLoadStateDictPreHook",
           "SpectralNormStateDictHook", "spectral_norm", "remove_spectral_norm"]


class SpectralNorm:
    """The forward pre-hook that spectral_norm registers."""

    # The version stamped into state_dict metadata: 1 saves weight_v too.
    _version = 1

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        self.name = name
        self.dim = dim
        if n_power_iterations <= 0:
            raise ValueError(
                "Expected n_power_iterations to be positive, but "
                f"got n_power_iterations={n_power_iterations}")
        self.n_power_iterations = n_power_iterations
        self.eps = eps

    def reshape_weight_to_matrix(self, weight):
        """`weight` as a matrix whose rows run along self.dim."""
        if self.dim != 0:
            weight = weight.permute(
                self.dim, *[d for d in range(weight.dim()) if d != self.dim])
        return weight.reshape(weight.size(0), -1)

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with ember.no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(ember.mv(weight_mat.t(), u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(ember.mv(weight_mat, v), dim=0, eps=self.eps))
                u = u.clone()
                v = v.clone()
        sigma = ember.dot(u, ember.mv(weight_mat, v))
        return weight / sigma

    def remove(self, module):
        with ember.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name,
                self.compute_weight(module, do_power_iteration=module.training))

    def _solve_v_and_rescale(self, weight_mat, u, target_sigma):
        """A v with u^T W v = target_sigma, for checkpoints (version 0)
        that saved the weight and u but not v."""
        v = weight_mat.t().mm(weight_mat).pinverse().mm(weight_mat.t()).mm(
            u.unsqueeze(1)).squeeze(1)
        return v.mul_(target_sigma / ember.dot(u, ember.mv(weight_mat, v)))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(
                    f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        if weight is None:
            raise ValueError(
                f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
        if isinstance(weight, UninitializedParameter):
            raise ValueError(
                "The module passed to `SpectralNorm` can't have uninitialized parameters. "
                "Make sure to run the dummy forward before applying spectral normalization")
        with ember.no_grad():
            height, width = fn.reshape_weight_to_matrix(weight).size()
            u = F.normalize(weight.new_empty(height).normal_(0, 1), dim=0, eps=fn.eps)
            v = F.normalize(weight.new_empty(width).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        # A plain attribute until the first forward replaces it.
        setattr(module, fn.name, weight.data)
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        module._register_state_dict_hook(SpectralNormStateDictHook(fn))
        module._register_load_state_dict_pre_hook(SpectralNormLoadStateDictPreHook(fn))
        return fn


class SpectralNormLoadStateDictPreHook:
    """Reads checkpoints saved before version 1 (weight, weight_orig and
    weight_u, no weight_v): recovers sigma and solves for v."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, state_dict, prefix, local_metadata, strict,
                 missing_keys, unexpected_keys, error_msgs):
        fn = self.fn
        version = local_metadata.get("spectral_norm", {}).get(fn.name + ".version", None)
        if version is not None and version >= 1:
            return
        weight_key = prefix + fn.name
        if version is None and weight_key not in state_dict and all(
                weight_key + suffix in state_dict for suffix in ("_orig", "_u", "_v")):
            return  # a version-1 dict whose metadata was lost
        missing = [weight_key + suffix for suffix in ("_orig", "", "_u")
                   if weight_key + suffix not in state_dict]
        if missing:
            if strict:
                missing_keys.extend(missing)
            return
        with ember.no_grad():
            weight_orig = state_dict[weight_key + "_orig"]
            weight = state_dict.pop(weight_key)
            sigma = (weight_orig / weight).mean()
            weight_mat = fn.reshape_weight_to_matrix(weight_orig)
            u = state_dict[weight_key + "_u"]
            state_dict[weight_key + "_v"] = fn._solve_v_and_rescale(weight_mat, u, sigma)


class SpectralNormStateDictHook:
    """Stamps `spectral_norm: {"<name>.version": 1}` into the metadata."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, module, state_dict, prefix, local_metadata):
        versions = local_metadata.setdefault("spectral_norm", {})
        key = self.fn.name + ".version"
        if key in versions:
            raise RuntimeError(f"Unexpected key in metadata['spectral_norm']: {key}")
        versions[key] = self.fn._version


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Reparametrises `module.<name>` by its spectral norm (see the module
    docstring); dim defaults to 1 for transposed convolutions (whose
    output channels are dimension 1), else 0."""
    if dim is None:
        from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
        transposed = (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)
        dim = 1 if isinstance(module, transposed) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    """Makes `name` an ordinary parameter again, w_orig / sigma."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            break
    else:
        raise ValueError(f"spectral_norm of '{name}' not found in {module}")
    for registry, kind in (("_state_dict_hooks", SpectralNormStateDictHook),
                           ("_load_state_dict_pre_hooks", SpectralNormLoadStateDictPreHook)):
        hooks = module._hooks(registry)
        for key, hook in hooks.items():
            if isinstance(hook, kind) and hook.fn.name == name:
                del hooks[key]
                break
    return module
