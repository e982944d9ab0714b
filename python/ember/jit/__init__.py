"""ember.jit: a script compiler from Python source to a bytecode VM.

(Pipeline: Note [The graph IR] in ir.py and the walkthrough chapter.)
"""
