"""ember.jit: a script compiler from Python source to a bytecode VM.

    @ember.jit.script
    def f(x, y):
        return (x * y).sum()

The pipeline (the walkthrough's chapter 12 follows one function through it):

    source --ast--> frontend.py --> typed SSA graph (ir.py)      f.graph
          --> passes/ (constant folding, peephole, CSE, DCE,
              unrolling, fusion; specialised per argument types)  explain(f)
          --> lowering.py --> register bytecode (bytecode.py)   f.code
          --> the VM in C (c/python/JitVM.c), fused groups run by the
              blocked interpreter of c/th/THFused.c

`trace(fn, inputs)` records one eager run into the same IR instead;
`save`/`load` write and read a program as data (safetensors + JSON, no
pickle).
"""

import sys

from .ir import ScriptError
from .function import ScriptFunction, ScriptModule, freeze, script
from .trace import TracerWarning, is_tracing, trace


def explain(fn, *example_inputs, file=None):
    """Prints the graph of a scripted function after every pass, with what
    each pass changed, and returns the text.

    With example inputs the graph is first specialised to their types, as a
    call with them would be (Note [Specialisation] in function.py); this is
    what lets dtype- and rank-dependent rewrites fire.  For a module from
    `freeze` it starts from the graph with the weights as constants, before
    the passes freezing ran, so the conv-batch_norm fold shows."""
    from .passes import manager
    from . import types as T
    from .._tensor import Tensor
    graph = getattr(fn, "_graph_before_freezing_passes", None) or fn.graph
    graph = graph.copy()
    if example_inputs:
        function = getattr(fn, "_function", fn)
        if isinstance(fn, ScriptModule):
            example_inputs = tuple(fn._state()) + tuple(example_inputs)
        args = function.parameters.bind(example_inputs, {})
        for value, arg in zip(graph.inputs, args):
            if isinstance(arg, Tensor):
                value.type = T.TensorType(arg.dtype, arg.dim())
    text = manager.explain(graph)
    print(text, file=file or sys.stdout)
    return text


def save(fn, f):
    """Writes a scripted function's program to `f` (serialization.py)."""
    from .serialization import save_program
    save_program(fn, f)


def load(f):
    """Reads a program written by `save`; runs without the source."""
    from .serialization import load_program
    return load_program(f)


__all__ = ["script", "freeze", "trace", "is_tracing", "explain", "save", "load", "ScriptFunction",
           "ScriptModule", "ScriptError", "TracerWarning"]
