"""gradcheck and gradgradcheck: autograd's Jacobians against finite differences.

For a function f of inputs x_1..x_n, the analytical Jacobian comes from
backward: one autograd.grad call per output element, with a one-hot
grad_output, gives one row (a vector-Jacobian product).  The numerical
Jacobian comes from central differences, (f(x + eps e_j) - f(x - eps e_j))
/ 2 eps, one column per input element.  They must agree elementwise within
atol + rtol * |numerical|.  Use float64 inputs: in float32, eps = 1e-6 is
below the rounding noise.
"""

import numpy as np

from .. import _C
from .engine import grad as autograd_grad

_TensorBase = _C._TensorBase


class GradcheckError(RuntimeError):
    """A Jacobian mismatch found by gradcheck."""


def _as_tuple(x):
    return tuple(x) if isinstance(x, (list, tuple)) else (x,)


def _differentiable_outputs(outputs):
    return [o for o in outputs
            if isinstance(o, _TensorBase) and o.requires_grad and o.is_floating_point()]


def _floating_outputs(outputs):
    """The outputs both Jacobians cover: every floating tensor.  One that
    does not require grad has an analytical Jacobian of zeros, which the
    finite differences then check."""
    return [o for o in outputs if isinstance(o, _TensorBase) and o.is_floating_point()]


def _outputs_as_numpy(func, inputs):
    outputs = _as_tuple(func(*inputs))
    return [np.array(o.detach().numpy(), dtype=np.float64).reshape(-1)
            for o in outputs if isinstance(o, _TensorBase) and o.is_floating_point()]


def _numerical_jacobians(func, inputs, wrt, eps):
    """jacobians[i][k]: (numel of output k, numel of input wrt[i])."""
    jacobians = []
    for index in wrt:
        x = inputs[index]
        values = x.detach().numpy()   # shares x's memory, any strides
        columns = []
        for position in np.ndindex(values.shape):
            original = values[position]
            values[position] = original - eps
            minus = _outputs_as_numpy(func, inputs)
            values[position] = original + eps
            plus = _outputs_as_numpy(func, inputs)
            values[position] = original
            columns.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
        per_output = []
        for k in range(len(_outputs_as_numpy(func, inputs))):
            if columns:
                per_output.append(np.stack([c[k] for c in columns], axis=1))
            else:
                per_output.append(None)
        jacobians.append(per_output)
    return jacobians


def _analytical_jacobians(outputs, inputs, wrt):
    """The same layout, one backward per output element."""
    wrt_tensors = [inputs[i] for i in wrt]
    jacobians = [[] for _ in wrt]
    for output in outputs:
        rows = [np.zeros((output.numel(), t.numel())) for t in wrt_tensors]
        if not output.requires_grad:
            for i in range(len(wrt)):
                jacobians[i].append(rows[i])
            continue
        for j in range(output.numel()):
            one_hot = np.zeros(output.numel())
            one_hot[j] = 1.0
            grad_output = _C.from_numpy(one_hot.reshape(tuple(output.shape))).to(output.dtype)
            grads = autograd_grad(output, wrt_tensors, grad_output,
                                  retain_graph=True, allow_unused=True)
            for i, (g, t) in enumerate(zip(grads, wrt_tensors)):
                if g is None:
                    continue
                if g.shape != t.shape:
                    raise GradcheckError(
                        f"Gradient has a shape {tuple(g.shape)} but the input has "
                        f"{tuple(t.shape)}")
                rows[i][j] = np.asarray(g.detach().numpy(), dtype=np.float64).reshape(-1)
        for i in range(len(wrt)):
            jacobians[i].append(rows[i])
    return jacobians


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, fast_mode=False, **unused):
    """True when backward's Jacobian matches finite differences; otherwise
    raises GradcheckError (or returns False with raise_exception=False)."""
    inputs = _as_tuple(inputs)
    wrt = [i for i, x in enumerate(inputs) if isinstance(x, _TensorBase) and x.requires_grad]
    if not wrt:
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but none "
            "of the them have requires_grad=True.")
    outputs = _floating_outputs(_as_tuple(func(*inputs)))
    try:
        analytical = _analytical_jacobians(outputs, inputs, wrt)
        numerical = _numerical_jacobians(func, inputs, wrt, eps)
        for i, index in enumerate(wrt):
            for k, a in enumerate(analytical[i]):
                n = numerical[i][k] if k < len(numerical[i]) else None
                if n is None:
                    continue
                if not np.allclose(a, n, rtol=rtol, atol=atol):
                    raise GradcheckError(
                        f"Jacobian mismatch for output {k} with respect to input {index},\n"
                        f"numerical:{n}\nanalytical:{a}\n")
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, **unused):
    """gradcheck of the backward pass itself: second derivatives, through
    create_graph=True."""
    inputs = _as_tuple(inputs)
    outputs = _differentiable_outputs(_as_tuple(func(*inputs)))
    if grad_outputs is None:
        grad_outputs = tuple(
            _C.randn(*o.shape, dtype=o.dtype).requires_grad_() for o in outputs)
    else:
        grad_outputs = _as_tuple(grad_outputs)
    num_inputs = len(inputs)

    def first_derivatives(*args):
        primal, cotangents = args[:num_inputs], args[num_inputs:]
        outs = _differentiable_outputs(_as_tuple(func(*primal)))
        wrt = [x for x in primal if isinstance(x, _TensorBase) and x.requires_grad]
        grads = autograd_grad(outs, wrt, cotangents, create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_derivatives, inputs + tuple(grad_outputs), eps=eps, atol=atol,
                     rtol=rtol, raise_exception=raise_exception)
