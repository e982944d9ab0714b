"""A guided tour of ember's internals: `python -m ember.tour`.

Each section prints what it shows: tensors and storages, references and
the cyclic GC, views, NumPy sharing, allocators, operators, autograd and the
script compiler, and names the walkthrough chapter (docs/walkthrough/) and
the source file to read next.  `--list` lists the sections, `--chapter N`
runs section N only, and the autograd and script-compiler sections save a
picture of their graph (DOT, and SVG when Graphviz's `dot` is installed) in
the current directory or `--out DIR`.
"""

import argparse
import dataclasses
import gc
import math
import os
import sys
import textwrap
import weakref

import numpy as np

import ember


def _say(text):
    print(textwrap.dedent(text).strip("\n"))


def _show(label, value):
    print(f"  {label:<26} {value}")


def chapter_tensor():
    _say("""
        A tensor is (storage, storage_offset, sizes, strides, dtype).  The
        storage is a plain block of bytes; sizes and strides (counted in
        elements) say where element (i, j, ...) lives in it.
    """)
    t = ember.arange(12, dtype=ember.float32).view(3, 4)
    print(t)
    storage = t.untyped_storage()
    _show("t.shape", t.shape)
    _show("t.stride()", t.stride())
    _show("t.storage_offset()", t.storage_offset())
    _show("t.dtype", t.dtype)
    _show("storage", storage)
    _show("storage.nbytes()", storage.nbytes())
    _show("t.data_ptr()", hex(t.data_ptr()))
    print()


def chapter_references():
    _say("""
        Every Python object carries a reference count; the tensor object is
        freed the moment it drops to zero.  sys.getrefcount shows it (one
        more than you expect: its own argument is a reference too).  Counting
        cannot free a cycle, so the tensor type also supports the cyclic GC
        (tp_traverse/tp_clear): a hook whose closure refers to its own tensor
        is such a cycle.
    """)
    t = ember.zeros(3)
    _show("sys.getrefcount(t)", sys.getrefcount(t))
    alias = t
    _show("after alias = t", sys.getrefcount(t))
    del alias
    _show("after del alias", sys.getrefcount(t))
    # Automatic collections would break the cycle at a moment of their own
    # choosing; the tour runs one itself, so it pauses them.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        x = ember.ones(3, requires_grad=True)
        _hook_that_reads(x)
        ref = weakref.ref(x)
        del x
        print(">>> x.register_hook(lambda grad: grad * x.sum())  # x -> hook -> x")
        print(">>> del x")
        _show("tensor still alive?", ref() is not None)
        _show("objects gc.collect() freed", gc.collect() > 0)
        _show("tensor still alive?", ref() is not None)
    finally:
        if was_enabled:
            gc.enable()
    print()


def _hook_that_reads(tensor):
    # The closure's cell holds `tensor`; the tensor holds the hook: a cycle
    # that outlives every name for the tensor.
    tensor.register_hook(lambda grad: grad * tensor.sum())


def chapter_views():
    _say("""
        Transposing swaps two strides; slicing moves the offset and scales a
        stride.  The bytes stay where they are.
    """)
    t = ember.arange(12, dtype=ember.float32).view(3, 4)
    col = t.t()[1:3]
    print("t.t()[1:3] =")
    print(col)
    _show("view sizes / strides", f"{tuple(col.shape)} / {col.stride()}")
    _show("view storage_offset()", col.storage_offset())
    same = col.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    _show("same storage as t?", same)
    _show("view is_contiguous()?", col.is_contiguous())
    col[0, 0] = 100.0
    _show("t[0, 1] after col[0,0]=100", t[0, 1].item())
    _show("t._version (shared)", t._version)
    print()


def chapter_numpy():
    _say("""
        ember.from_numpy(a) wraps a's memory through the buffer protocol:
        the tensor's storage points at a's bytes and holds a's buffer until
        the storage dies.
    """)
    a = np.ones(3)
    t = ember.from_numpy(a)
    print(">>> a = np.ones(3); t = ember.from_numpy(a)")
    a += 1.0
    print(">>> a += 1.0     # in place: writes the shared memory")
    _show("t", t)
    a = a + 1.0
    print(">>> a = a + 1.0  # a NEW array; the name a moves to it")
    _show("a", a)
    _show("t (unchanged)", t)
    back = t.numpy()
    _show("type(t.numpy().base)  # the storage: it keeps the memory alive",
          type(back.base).__name__)
    back[0] = -1.0
    _show("t after back[0] = -1", t)
    print()


def chapter_allocators():
    _say("""
        Every byte ember allocates comes from the allocator installed for
        the device, which keeps statistics.  Allocators can be written in
        Python: here a counting one is installed for a moment.
    """)
    before = ember.memory.stats()
    big = ember.empty(1000, 1000)
    during = ember.memory.stats()
    _show("allocated_bytes before", before["allocated_bytes"])
    _show("after empty(1000, 1000)", during["allocated_bytes"])
    del big
    _show("after del", ember.memory.stats()["allocated_bytes"])
    _show("peak_allocated_bytes", ember.memory.stats()["peak_allocated_bytes"])
    counting = ember.memory.CountingAllocator()
    with ember.memory.use_allocator(counting):
        x = ember.zeros(256)
        _show("inside use_allocator", counting)
    del x
    _show("after del x", counting)
    print()


def chapter_operators():
    _say("""
        `a + b` goes straight from the tensor type's nb_add slot to a C
        kernel.  Shapes broadcast as in NumPy, dtypes promote as in PyTorch
        (a Python number only lifts the category), and large kernels split
        over threads with the GIL released.
    """)
    col = ember.arange(3, dtype=ember.int32).view(3, 1)
    row = ember.tensor([10, 20], dtype=ember.int32)
    print("col + row =")
    print(col + row)
    _show("int32 tensor + 2.5 ->", (col + 2.5).dtype)
    _show("int32 tensor / 2 ->", (col / 2).dtype)
    _show("(col > 0).dtype", (col > 0).dtype)
    try:
        ember.ones(2, 3) + ember.ones(4)
    except RuntimeError as error:
        _show("(2,3) + (4,)", f"RuntimeError: {error}")
    m = ember.randn(64, 64)
    probs = (m @ m.t()).softmax(dim=1)    # GEMM, then a stable softmax
    _show("softmax row sums", probs.sum(dim=1)[:3])
    _show("argmax of rows 0..2", probs.max(dim=1).indices[:3].tolist())
    _show("get_num_threads()", ember.get_num_threads())
    print()


def two_spirals(points_per_class=200, noise=0.15):
    """Two interleaved spirals in the plane, drawn with ember's generator
    (seed it with ember.manual_seed): features (2N, 2), labels (2N,)."""
    radius = ember.linspace(0.3, 3.0, points_per_class)
    angle = 1.75 * radius
    features, labels = [], []
    for label, offset in enumerate((0.0, math.pi)):
        xy = ember.stack([radius * (angle + offset).cos(), radius * (angle + offset).sin()], 1)
        features.append(xy + noise * ember.randn(points_per_class, 2))
        labels.append(ember.full((points_per_class,), label, dtype=ember.int64))
    return ember.cat(features), ember.cat(labels)


def chapter_autograd(steps=400):
    import tqdm as tqdm_module
    from tqdm import tqdm

    from ember import nn
    from ember.autograd.graph import format_graph, to_dot

    _say("""
        An operator whose input requires grad records a node (MulBackward0,
        ...) that points back at its inputs' nodes.  backward() walks that
        graph from the loss to the leaves, newest node first, and adds each
        parameter's gradient into .grad.  Here a small MLP learns two
        interleaved spirals.
    """)
    x = ember.tensor([3.0], requires_grad=True)
    y = x * x * x
    y.backward()
    _show("d(x^3)/dx at x=3", x.grad.item())

    ember.manual_seed(0)
    inputs, targets = two_spirals()
    model = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                          nn.Linear(64, 2))
    optimizer = ember.optim.Adam(model.parameters(), lr=0.01)
    print(model)
    # No monitor thread: it would outlive the tour as a daemon (the leak gates
    # see its start-up block at exit), and the bar refreshes on its own.
    tqdm_module.tqdm.monitor_interval = 0
    # The bar redraws itself in place on a terminal; into a file or a pipe
    # it would write hundreds of lines, so it shows only on a terminal.
    progress = tqdm(range(steps), desc="training", file=sys.stdout, ncols=72,
                    mininterval=0.25, ascii=True, disable=not sys.stdout.isatty())
    for _ in progress:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        progress.set_postfix(loss=f"{loss.item():.4f}", refresh=False)
    progress.close()
    with ember.no_grad():
        accuracy = (model(inputs).argmax(dim=1) == targets).float().mean().item()
    _show("final loss", f"{loss.item():.4f}")
    _show("training accuracy", f"{accuracy:.1%}")
    print("The graph of one training step (the loss at the top, parameters at the leaves):")
    loss = nn.functional.cross_entropy(model(inputs), targets)
    print(format_graph(loss))
    _save_picture("autograd_graph", to_dot(loss, params=dict(model.named_parameters())))
    print()


def scaled_gelu(x, w):
    """The function the script-compiler section scripts."""
    y = x.t().t()                # the article's peephole: t(t(x)) is x
    h = y * w
    return 0.5 * h * (1.0 + (0.7978845608 * (h + 0.044715 * h * h * h)).tanh())


def _best_ms(fn, repeat=5):
    import time
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def chapter_jit():
    _say("""
        ember.jit.script reads a function's source with Python's own ast and
        emits a typed SSA graph.  Each call's argument types pick (and
        cache) a specialisation: the graph refined to those dtypes and
        ranks, optimised pass by pass, lowered to register bytecode, and run
        by a VM in C.  Chains of elementwise ops become one fused kernel that
        makes a single pass over memory.
    """)
    scripted = ember.jit.script(scaled_gelu)
    print("The graph as written (f.graph):")
    print(scripted.graph)
    x = ember.randn(512, 512)
    w = ember.randn(512, 512)
    print("What each pass changed for float32 matrices (ember.jit.explain):")
    steps = [line for line in ember.jit.explain(scripted, x, w, file=_Discard()).splitlines()
             if line.startswith("== ")]
    for line in steps:
        print("  " + line.strip("= "))
    print("\nThe graph that runs (f.graph_for(x, w)): t(t(x)) is gone and the "
          "elementwise chain is one FusionGroup:")
    print(scripted.graph_for(x, w))
    _save_picture("ir_graph", scripted.graph_for(x, w).to_dot())
    print("Its bytecode (FUSED runs the kernel; its guard falls back to the "
          "unfused calls below it for other dtypes or autograd):")
    print(scripted.code_for(x, w))
    eager, compiled = scaled_gelu(x, w), scripted(x, w)
    _show("largest difference", f"{(eager - compiled).abs().max().item():.2e}")
    eager_ms = _best_ms(lambda: scaled_gelu(x, w))
    script_ms = _best_ms(lambda: scripted(x, w))
    _show("eager", f"{eager_ms:.3f} ms")
    _show("scripted", f"{script_ms:.3f} ms ({eager_ms / script_ms:.1f}x faster)")
    print()


class _Discard:
    def write(self, text):
        return len(text)

    def flush(self):
        pass


def _save_picture(name, dot_text):
    """Writes NAME.dot, and NAME.svg when Graphviz's dot is installed, into
    the output directory; prints where."""
    from ember.utils import _dot
    path = os.path.join(_output_dir, name + ".dot")
    with open(path, "w", encoding="utf-8") as f:
        f.write(dot_text)
    try:
        _dot.render_svg(dot_text, path[:-4] + ".svg")
    except RuntimeError as error:
        print(f"Saved the picture as {path} (no SVG: {error})")
    else:
        print(f"Saved the picture as {path[:-4]}.svg (and its DOT source {path})")


_output_dir = "."


@dataclasses.dataclass(frozen=True)
class Section:
    title: str
    run: object
    chapter: str          # the walkthrough chapter (docs/walkthrough/)
    source: str           # where the code it shows lives


CHAPTERS = [
    Section("A tensor is a view of a storage", chapter_tensor,
            "5. Storages and allocators", "c/th/THTensor.h, c/th/THStorage.h"),
    Section("References and the cyclic GC", chapter_references,
            "3. Reference counts and 4. The cyclic GC", "c/python/Variable.c"),
    Section("Views share the storage and never copy", chapter_views,
            "6. Sizes, strides and views", "c/th/THTensor.c"),
    Section("Zero-copy NumPy", chapter_numpy, "7. Zero-copy", "c/python/Numpy.c"),
    Section("Allocators and their statistics", chapter_allocators,
            "5. Storages and allocators", "c/th/THAllocator.c, python/ember/memory.py"),
    Section("Operators: broadcasting, promotion, threads", chapter_operators,
            "8. Operators", "c/python/Pointwise.c, c/th/THIter.c"),
    Section("Autograd: a graph recorded as you compute, walked backwards",
            chapter_autograd, "10. Autograd", "python/ember/autograd/"),
    Section("The script compiler: source -> graph -> passes -> bytecode -> VM",
            chapter_jit, "12. The script compiler", "python/ember/jit/, c/python/JitVM.c"),
]


def _run(number):
    section = CHAPTERS[number - 1]
    print(f"== {number}. {section.title} ==")
    print(f"   (walkthrough ch. {section.chapter}; source: {section.source})")
    section.run()


def _parser():
    parser = argparse.ArgumentParser(
        prog="python -m ember.tour", description="A guided tour of ember's internals.")
    parser.add_argument("--list", action="store_true", help="list the sections and exit")
    parser.add_argument("--chapter", type=int, metavar="N",
                        help="run section N only (numbers as --list shows them)")
    parser.add_argument("--out", default=".", metavar="DIR",
                        help="where to save the pictures (default: the current directory)")
    return parser


def main(argv=None):
    global _output_dir
    args = _parser().parse_args(argv)
    if args.list:
        for number, section in enumerate(CHAPTERS, 1):
            print(f"{number:2d}. {section.title}")
            print(f"    walkthrough ch. {section.chapter}; source: {section.source}")
        return 0
    if args.chapter is not None and not 1 <= args.chapter <= len(CHAPTERS):
        print(f"--chapter: expected 1 to {len(CHAPTERS)}, got {args.chapter}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    _output_dir = args.out
    numbers = [args.chapter] if args.chapter is not None else range(1, len(CHAPTERS) + 1)
    for number in numbers:
        _run(number)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
