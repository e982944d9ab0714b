"""ember.autograd: reverse-mode automatic differentiation, in Python.

The modules (the layer PyTorch calls VariableType; see
docs/walkthrough/10-autograd.md):
    grad_mode.py   no_grad / enable_grad / set_grad_enabled / inference_mode
    graph.py       Node, edges, saved tensors (Note [The graph])
    engine.py      backward() and grad() (Note [How the engine walks the graph])
    function.py    custom Function
    formulas/      one handler + Node class per differentiable operator
    gradcheck.py   finite-difference checks
The C operators call into formulas/ only when grad mode is on and an input
requires grad (Note [The autograd boundary], c/python/Autograd.c).
"""

from .grad_mode import (  # noqa: F401
    no_grad, enable_grad, set_grad_enabled, inference_mode, is_grad_enabled,
    is_inference_mode_enabled)
from .graph import Node  # noqa: F401
from .engine import backward, grad  # noqa: F401
from .function import Function, FunctionCtx, once_differentiable  # noqa: F401
from . import formulas  # noqa: F401  (registers every operator's handler)
from .gradcheck import gradcheck, gradgradcheck  # noqa: F401
from . import graph  # noqa: F401
