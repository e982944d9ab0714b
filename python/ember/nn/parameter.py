"""ember.nn.Parameter: a tensor that a Module registers as a learnable weight.

A Parameter is an ember.Tensor of the Python subclass `Parameter`, made by
ember._C._make_subclass so that it shares the memory of the tensor it wraps
(as torch.Tensor._make_subclass does).  Assigning one to a Module attribute
registers it (see Module.__setattr__).  Results of operators on a Parameter
are plain ember.Tensors.
"""

import ember
from ember import _C

__all__ = ["Parameter"]


class Parameter(ember.Tensor):
    """A learnable tensor: `Parameter(data=None, requires_grad=True)`.

    `data` is shared, not copied; None gives an empty tensor of shape (0,).
    """

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = ember.empty(0)
        return _C._make_subclass(cls, data.detach(), requires_grad)

    def __init__(self, data=None, requires_grad=True):
        # Everything is done in __new__; the base __init__ takes the sizes.
        pass

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.data.clone(), self.requires_grad)
        memo[id(self)] = result
        return result

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.detach().clone(), self.requires_grad))


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)
