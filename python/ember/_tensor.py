"""ember.Tensor: the public tensor class.

The data and every hot method live in C (ember._C._TensorBase, see
c/python/Variable.c); this subclass adds what is better written in Python,
such as printing.  C creates instances of this class directly (it is
registered with ember._C._set_python_types), so `type(t) is ember.Tensor`
for every tensor, including views.
"""

import numpy as np

from . import _C
from ._tensor_str import summary_edges, tensor_repr


def _summary_rows(t, edges, dim):
    """The rows of `t` a summarised repr prints (see summary_edges).

    Narrowed views all the way down, copied (by cat) only once every
    dimension is small, so a huge expanded tensor costs a few elements.
    """
    if dim == t.dim():
        return t
    edge = edges[dim]
    if edge is None:
        return _summary_rows(t, edges, dim + 1)
    n = t.shape[dim]
    head = _summary_rows(t.narrow(dim, 0, edge + 1), edges, dim + 1)
    tail = _summary_rows(t.narrow(dim, n - edge, edge), edges, dim + 1)
    return _C.cat([head, tail], dim)


class Tensor(_C._TensorBase):
    # NumPy defers to our reflected operators rather than converting us.
    __array_priority__ = 1000

    def __repr__(self, *, tensor_contents=None):
        # Printing reads the values, so a CUDA tensor is copied to the host
        # first (through its device's launcher, which raises without one).
        shown = self.detach()
        if self.is_cuda:
            shown = shown.cpu()
        edges = summary_edges(shown.shape)
        if edges is not None:
            shown = _summary_rows(shown, edges, 0)
        if shown.dtype in (_C.float16, _C.bfloat16):
            shown = shown.float()  # exact; NumPy has no bfloat16
        values = np.asarray(shown)
        grad_fn = self.grad_fn
        grad_fn_name = None if grad_fn is None else type(grad_fn).__name__
        return tensor_repr(
            values,
            str(self.dtype).removeprefix("ember."),
            requires_grad=self.requires_grad,
            grad_fn_name=grad_fn_name,
            default_float=str(_C.get_default_dtype()).removeprefix("ember."),
            summarize=edges is not None,
            shape=tuple(self.shape),
            device=str(self.device) if self.is_cuda else None,
        )

    __str__ = __repr__

    def __format__(self, spec):
        if self.dim() == 0:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        if not self.is_leaf:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol at the moment.  If you were attempting to deepcopy a "
                "module, this may be because of a torch.nn.utils.weight_norm usage, see "
                "https://github.com/pytorch/pytorch/pull/103001")
        from .autograd.grad_mode import no_grad
        with no_grad():
            result = self.clone()
        result.requires_grad = self.requires_grad
        if self.grad is not None:
            result.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, protocol):
        # Pickle by value (a NumPy copy), never by address.
        return (_rebuild_tensor, (self.detach().numpy().copy(), self.requires_grad))

    def share_memory_(self):
        """Moves the storage into shared memory in place (a no-op if it is
        there already): every view of it sees the move.  Returns self."""
        self.untyped_storage().share_memory_()
        return self

    def is_shared(self):
        return self.untyped_storage().is_shared()

    def type(self, dtype=None, non_blocking=False):
        """The legacy type name ('ember.FloatTensor'), or a cast to `dtype`:
        a dtype, a legacy class (ember.LongTensor) or its name (the
        'torch.' spelling is accepted too)."""
        from ._legacy import dtype_of_type_name, legacy_type_of
        if dtype is None:
            return "ember." + legacy_type_of(self.dtype).__name__
        if isinstance(dtype, str):
            dtype = dtype_of_type_name(dtype)
        elif not isinstance(dtype, _C.dtype):
            dtype = dtype.dtype   # a legacy class
        return self.to(dtype)

    def type_as(self, other):
        """This tensor cast to `other`'s type (itself when it has it already)."""
        if not isinstance(other, _C._TensorBase):
            raise TypeError(f"type_as(): argument 'other' (position 1) must be Tensor, "
                            f"not {type(other).__name__}")
        return self.to(other.dtype)

    # The new_* factories take this tensor's dtype and device unless told
    # otherwise, as PyTorch's do.
    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        return _C.tensor(data, dtype=dtype or self.dtype, device=device or self.device,
                         requires_grad=requires_grad)

    def new_empty(self, *size, dtype=None, device=None):
        return _C.empty(*size, dtype=dtype or self.dtype, device=device or self.device)

    def new_zeros(self, *size, dtype=None, device=None):
        return _C.zeros(*size, dtype=dtype or self.dtype, device=device or self.device)

    def new_ones(self, *size, dtype=None, device=None):
        return _C.ones(*size, dtype=dtype or self.dtype, device=device or self.device)

    def new_full(self, size, fill_value, dtype=None, device=None):
        return _C.full(size, fill_value, dtype=dtype or self.dtype,
                       device=device or self.device)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None, non_blocking=False):
        return self.to("cuda" if device is None else device)

    @property
    def __cuda_array_interface__(self):
        """Version 3 of Numba's CUDA array interface, for CUDA tensors: CuPy,
        Numba and PyTorch read a tensor's device memory through it without a
        copy (AttributeError for a CPU tensor, so hasattr() says False)."""
        from .cuda._interop import cuda_array_interface
        return cuda_array_interface(self)

    def is_pinned(self, device=None):
        """False: page-locked host memory needs an accelerator, and ember has none yet."""
        return False

    def pin_memory(self, device=None):
        # Page-locked host memory exists for fast copies to an accelerator;
        # with none available PyTorch raises this same error.
        raise RuntimeError("Cannot access accelerator device when none is available.")


def _rebuild_tensor(array, requires_grad):
    return _C.tensor(array, requires_grad=requires_grad)


# ---- autograd methods (python/ember/autograd) ----------------------------------

def _backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates the gradient of this tensor into the leaves' .grad."""
    from .autograd import engine
    engine.backward(self, gradient, retain_graph, create_graph, inputs=inputs)


def _register_hook(self, hook):
    """hook(grad) runs when this tensor's gradient is computed; returning a
    tensor replaces the gradient.  Returns a handle with .remove()."""
    from .autograd.graph import _HookHandle
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is not None:
        return self.grad_fn._register_tensor_hook(self.output_nr, hook)
    hooks = self._backward_hooks
    if hooks is None:
        hooks = self._backward_hooks = []
    return _HookHandle(hooks, hook)


def _register_post_accumulate_grad_hook(self, hook):
    """hook(tensor) runs after backward has accumulated this leaf's
    gradient into its .grad.  Returns a handle with .remove()."""
    from .autograd.graph import _HookHandle
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is not None:
        raise RuntimeError(
            "post accumulate grad hooks cannot be registered on non-leaf tensors")
    hooks = getattr(self, "_post_accumulate_grad_hooks", None)
    if hooks is None:
        hooks = self._post_accumulate_grad_hooks = []
    return _HookHandle(hooks, hook)


def _retain_grad(self):
    """Keep .grad for this non-leaf tensor after backward (a no-op on leaves)."""
    if not self.requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if self.grad_fn is None:
        return
    import weakref
    self.grad_fn._get_hooks().retain[self.output_nr] = weakref.ref(self)


def _retains_grad(self):
    grad_fn = self.grad_fn
    if grad_fn is None or grad_fn._hooks is None:
        return False
    ref = grad_fn._hooks.retain.get(self.output_nr)
    return ref is not None and ref() is self


Tensor.backward = _backward
Tensor.register_hook = _register_hook
Tensor.retain_grad = _retain_grad
Tensor.register_post_accumulate_grad_hook = _register_post_accumulate_grad_hook
Tensor.retains_grad = property(_retains_grad)


def _contiguous_strides(shape):
    """The element strides of a dense row-major tensor of `shape`
    (what `ember.empty(shape).stride()` gives; a 0 size counts as 1)."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))
