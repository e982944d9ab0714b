"""Optimisation passes over the graph IR (python/ember/jit/ir.py).

Each pass is a function `pass(graph, log=None) -> bool` that rewrites the
graph in place and says whether it changed it; `log` (a log.RewriteLog)
records every rewrite and enforces EMBER_JIT_OPT_LIMIT.  manager.py runs
them in order: optimize(graph) and explain(graph).
"""

from .constant_fold import constant_fold
from .cse import cse
from .dce import dce
from .fusion import build_kernel, fusion, kernel_program
from .lint import GraphLintError, lint_graph
from .log import RewriteLog, parse_opt_limit
from .manager import explain, optimize
from .peephole import peephole
from .type_propagation import propagate_types
from .unroll import unroll

__all__ = ["GraphLintError", "lint_graph", "constant_fold", "cse", "dce", "fusion", "build_kernel",
           "kernel_program", "RewriteLog", "parse_opt_limit", "explain",
           "optimize", "peephole", "propagate_types", "unroll"]
