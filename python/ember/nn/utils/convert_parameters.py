"""One flat vector from many parameters, and back."""

import ember

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters):
    """The parameters' elements laid end to end (a new tensor, differentiable)."""
    return ember.cat([param.reshape(-1) for param in parameters])


def vector_to_parameters(vec, parameters):
    """Copies consecutive slices of `vec` into the parameters (their .data)."""
    if not isinstance(vec, ember.Tensor):
        raise TypeError(f"expected ember.Tensor, but got: {type(vec).__name__}")
    pointer = 0
    for param in parameters:
        count = param.numel()
        param.data = vec[pointer:pointer + count].view_as(param).data
        pointer += count
