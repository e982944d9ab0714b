"""The pass pipeline: `optimize(graph)` and `explain(graph)`.

Order (TorchScript's executor order, notes 2.6): type propagation, then
constant folding, peephole, CSE and DCE repeated to a fixed point (at most
MAX_ROUNDS rounds), then loop unrolling followed by the same fixed point
again, and fusion last (skipped with fuse=False, as when autograd needs
the unfused ops).  fold_conv_bn (Note [Folding batch norm into a
convolution]) runs in the fixed point, before DCE: it fires only on the
constant weights of a frozen module (ember.jit.freeze).  Every pass
mutates the graph in place.

Bisecting a wrong rewrite
~~~~~~~~~~~~~~~~~~~~~~~~~
The environment variable EMBER_JIT_OPT_LIMIT (like PyTorch's
PYTORCH_JIT_OPT_LIMIT) limits how many rewrites each named pass may make
in one optimize() call:

    EMBER_JIT_OPT_LIMIT="peephole=2,cse=0"

allows the first two peephole rewrites and no CSE; passes not named are
unlimited.  The format is comma-separated `pass=N` items, N >= 0; pass
names are constant_fold, peephole, cse, dce, unroll, fusion and
fold_conv_bn; anything
else is a ValueError.  Halve N until the wrong result goes away: the last
allowed rewrite is the culprit, and explain() names it.
"""

from .constant_fold import constant_fold
from .cse import cse
from .dce import dce
from .fold_conv_bn import fold_conv_bn
from .fusion import fusion
from .log import RewriteLog
from .peephole import peephole
from .type_propagation import propagate_types
from .unroll import unroll

MAX_ROUNDS = 8

CLEANUP = (("constant_fold", constant_fold), ("peephole", peephole),
           ("cse", cse), ("fold_conv_bn", fold_conv_bn), ("dce", dce))


def optimize(graph, log=None, fuse=True, on_change=None):
    """Runs the pipeline on `graph` (in place) and returns it.

    on_change(pass_name, graph, messages), if given, is called after every
    pass that changed the graph, with the rewrites it logged."""
    log = log if log is not None else RewriteLog()

    def run(name, pass_fn):
        before = len(log.entries)
        changed = pass_fn(graph, log)
        if changed and on_change is not None:
            on_change(name, graph, [m for _, m in log.entries[before:]])
        return changed

    def fixed_point():
        for _ in range(MAX_ROUNDS):
            changed = run("propagate_types", propagate_types)
            for name, pass_fn in CLEANUP:
                changed |= run(name, pass_fn)
            if not changed:
                return

    fixed_point()
    if run("unroll", unroll):
        fixed_point()
    if fuse and run("fusion", fusion):
        run("dce", dce)     # constants only the fused ops read
    return graph


def explain(graph, fuse=True, log=None):
    """The graph before, then after every pass that changed something, each
    headed by a one-line summary of the rewrites.  The graph itself is not
    modified (a copy is optimised)."""
    sections = [f"== input ==\n{graph}"]

    def record(name, changed_graph, messages):
        if name == "propagate_types":
            summary = "refined tensor types"
        elif len(messages) > 4:
            summary = "; ".join(messages[:3]) + f"; ... ({len(messages)} rewrites)"
        else:
            summary = "; ".join(messages) or "changed"
        sections.append(f"== {name}: {summary} ==\n{changed_graph}")

    optimize(graph.copy(), log=log, fuse=fuse, on_change=record)
    return "\n".join(sections)
