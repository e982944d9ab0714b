"""The autograd graph: nodes, edges and saved tensors.

Note [The graph]
~~~~~~~~~~~~~~~~
Each recorded operation creates one Node (a subclass per formula, named as
PyTorch names them: MulBackward0).  A node points *backwards*, at the
producers of its inputs, through `_edges`: one entry per differentiable
input, in the order `apply` returns their gradients.  An entry is

    (node, output_nr)   the input was output `output_nr` of `node`;
    (tensor, 0)         the input is a leaf that requires grad: the gradient
                        accumulates into tensor.grad (PyTorch puts an
                        AccumulateGrad node here; `next_functions` shows one);
    None                the input needs no gradient.

A tensor knows its producer through `grad_fn` and `output_nr` (C fields of
THPVariable, set by `_C._set_history`).  The tensor -> node reference is
strong and node -> tensor references are limited to saved tensors, which
the engine drops after backward (Note [Saved tensors]).

Note [Saved tensors]
~~~~~~~~~~~~~~~~~~~~
A formula that needs a forward value in backward saves it with
`node.save(...)`.  Saving records each tensor's version counter; reading
them back with `node.unpack_saved()` checks the counters and raises
PyTorch's "modified by an inplace operation" error when a saved tensor was
written in place in between.  An op's own output is saved through
`SavedOutput`, which keeps a detached alias (no tensor -> node -> tensor
cycle) and, when backward itself is recorded (create_graph=True), gives the
formula an alias whose history is this node, so second derivatives see it.
"""

import collections
import itertools
import re
import weakref

from .. import _C

_TensorBase = _C._TensorBase
_set_history = _C._set_history
_is_grad_enabled = _C.is_grad_enabled
_versions = _C._versions

# Outputs of custom Functions that share memory with an input, and views of
# them, by id: writing into them in place is refused (check_inplace), as
# PyTorch does, since it would change the input behind the custom backward.
# A plain dict of weak references (empty in most programs: the recording
# path's check is one truth test); an entry goes when its tensor dies.
custom_function_views = {}


def add_custom_function_view(tensor):
    key = id(tensor)
    custom_function_views[key] = weakref.ref(
        tensor, lambda _, key=key: custom_function_views.pop(key, None))


def is_custom_function_view(tensor):
    ref = custom_function_views.get(id(tensor))
    return ref is not None and ref() is tensor

# Creation order of nodes: the engine runs ready nodes newest first, as
# PyTorch's engine does.
_next_sequence_nr = itertools.count().__next__

_FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access "
    "saved tensors after they have already been freed). Saved intermediate "
    "values of the graph are freed when you call .backward() or "
    "autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors "
    "after calling backward.")


# edges_of(*inputs): the tuple of their edges, in C (the recording path's
# hot loop): (grad_fn, output_nr), (leaf, 0), or None for each input.
edges_of = _C._edges


def edge_of(obj):
    """The graph edge for one input: (grad_fn, output_nr), (leaf, 0) or None."""
    return edges_of(obj)[0]


class SavedOutput:
    """An op's output saved for its own backward (Note [Saved tensors])."""

    __slots__ = ("data", "output_nr")

    def __init__(self, output, output_nr=0):
        self.data = output.detach()  # shares memory and version counter
        self.output_nr = output_nr

    @property
    def _version(self):
        return self.data._version


class Node:
    """One recorded operation; subclasses define `apply(*grads)`.

    `apply` receives one gradient per forward output (None for an output
    no gradient reached, only possible when `num_outputs > 1`) and returns
    a tuple with one gradient (or None) per edge.
    """

    __slots__ = ("_edges", "_sequence_nr", "_saved", "_versions", "_hooks",
                 "__weakref__")
    num_outputs = 1

    def __init__(self, edges):
        self._edges = edges
        self._sequence_nr = _next_sequence_nr()
        self._saved = ()
        self._versions = ()
        self._hooks = None

    # ---- saved tensors ----

    def save(self, *values):
        """Saves tensors (or plain values) for backward, recording versions."""
        self._saved = values
        self._versions = _versions(*values)

    def unpack_saved(self):
        """The saved values, after the version check (Note [Saved tensors])."""
        saved = self._saved
        if saved is None:
            raise RuntimeError(_FREED_MESSAGE)
        result = []
        for value, version in zip(saved, self._versions):
            if version is not None:
                if value._version != version:
                    raise RuntimeError(self._modified_message(value, version))
                if type(value) is SavedOutput:
                    value = self._unpack_output(value)
            result.append(value)
        return result

    def _unpack_output(self, saved):
        if not _is_grad_enabled():
            return saved.data
        alias = saved.data.detach()
        _set_history(alias, self, saved.output_nr)
        return alias

    def _modified_message(self, value, version):
        tensor = value.data if type(value) is SavedOutput else value
        # PyTorch names the producer without the "Backward0" suffix.
        where = ""
        if type(value) is SavedOutput:
            where = f", which is output {value.output_nr} of {_op_name(self)},"
        elif tensor.grad_fn is not None:
            where = f", which is output {tensor.output_nr} of {_op_name(tensor.grad_fn)},"
        sizes = ", ".join(str(s) for s in tensor.shape)
        return (
            "one of the variables needed for gradient computation has been "
            f"modified by an inplace operation: [{tensor.type()} [{sizes}]]"
            f"{where} is at version {tensor._version}; expected version "
            f"{version} instead.")  # PyTorch's hint names anomaly mode: not in ember

    def _release(self):
        """Drops the saved tensors (after a backward without retain_graph)."""
        if self._saved:
            self._saved = None

    # ---- introspection (PyTorch's API) ----

    def name(self):
        return type(self).__name__

    @property
    def next_functions(self):
        return tuple(_display_edge(e) for e in self._edges)

    @property
    def metadata(self):
        hooks = self._get_hooks()
        if hooks.metadata is None:
            hooks.metadata = {}
        return hooks.metadata

    def __repr__(self):
        return f"<{type(self).__name__} object at {id(self):#x}>"

    # ---- hooks ----

    def _get_hooks(self):
        if self._hooks is None:
            self._hooks = _NodeHooks()
        return self._hooks

    def register_hook(self, fn):
        """fn(grad_inputs, grad_outputs) after apply; may return new grad_inputs."""
        return _HookHandle(self._get_hooks().post, fn)

    def register_prehook(self, fn):
        """fn(grad_outputs) before apply; may return new grad_outputs."""
        return _HookHandle(self._get_hooks().pre, fn)

    def _register_tensor_hook(self, output_nr, fn):
        return _HookHandle(self._get_hooks().tensor.setdefault(output_nr, []), fn)

    def apply(self, *grads):  # pragma: no cover - every formula overrides it
        raise NotImplementedError(f"{type(self).__name__}.apply")


def _op_name(node):
    # ExpBackward0 -> Exp, PowBackward1 -> Pow1 (PyTorch's spelling).
    return re.sub(r"Backward(?:0$)?", "", type(node).__name__)


class _NodeHooks:
    __slots__ = ("pre", "post", "tensor", "retain", "metadata")

    def __init__(self):
        self.pre = []
        self.post = []
        self.tensor = {}   # output_nr -> [hook(grad)]
        self.retain = {}   # output_nr -> weakref to the tensor retaining grad
        self.metadata = None


class _HookHandle:
    """What register_hook returns: `handle.remove()` unregisters."""

    __slots__ = ("_hooks", "_fn")

    def __init__(self, hooks, fn):
        hooks.append(fn)
        self._hooks = hooks
        self._fn = fn

    def remove(self):
        try:
            self._hooks.remove(self._fn)
        except ValueError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class AccumulateGrad:
    """The node PyTorch shows for a leaf in `next_functions`: its `variable`
    is the leaf whose .grad backward accumulates into."""

    __slots__ = ("variable",)

    def __init__(self, variable):
        self.variable = variable

    def name(self):
        return "torch::autograd::AccumulateGrad"

    next_functions = ()

    def __eq__(self, other):
        return type(other) is AccumulateGrad and other.variable is self.variable

    def __hash__(self):
        return id(self.variable)

    def __repr__(self):
        return f"<AccumulateGrad object at {id(self.variable):#x}>"


def _display_edge(edge):
    if edge is None:
        return (None, 0)
    target, output_nr = edge
    if isinstance(target, _TensorBase):
        return (AccumulateGrad(target), 0)
    return (target, output_nr)


def record(node, output, output_nr=0):
    """Makes `output` the `output_nr`-th result of `node`; returns output."""
    _set_history(output, node, output_nr)
    return output


def format_graph(root):
    """The graph behind `root` (a tensor or a node) as an indented tree,
    newest node first; a node reached again is printed once and referred
    to by its number afterwards.  Walks with an explicit stack, so a long
    chain does not hit the recursion limit."""
    if isinstance(root, _TensorBase):
        root = root.grad_fn if root.grad_fn is not None else AccumulateGrad(root)
    numbers = {}
    lines = []
    stack = [(root, "", "")]
    while stack:
        node, lead, child_lead = stack.pop()
        key = node.variable if type(node) is AccumulateGrad else node
        label = _describe(node)
        if id(key) in numbers:
            lines.append(f"{lead}{label} (#{numbers[id(key)]}, see above)")
            continue
        numbers[id(key)] = len(numbers) + 1
        lines.append(f"{lead}#{numbers[id(key)]} {label}")
        children = [target for target, _ in node.next_functions if target is not None]
        for i, child in reversed(list(enumerate(children))):
            last = i == len(children) - 1
            stack.append((child, child_lead + ("└── " if last else "├── "),
                          child_lead + ("    " if last else "│   ")))
    return "\n".join(lines)


def _describe(node):
    if type(node) is AccumulateGrad:
        leaf = node.variable
        return f"AccumulateGrad {list(leaf.shape)} {str(leaf.dtype).removeprefix('ember.')}"
    return type(node).__name__


# ---------------------------------------------------------------------------
# Pictures: the graph as Graphviz DOT (what torchviz's make_dot draws for
# PyTorch), so the walkthrough and the tour can show it.


def to_dot(root, params=None):
    """The autograd graph behind `root` (a tensor) as DOT text.

    Drawn from `root` down to the leaves, edges in the direction gradients
    flow (from a node to the `next_functions` it feeds):

    - `root` itself, labelled with its shape;
    - one box per node, named as `grad_fn` prints it (`MulBackward0`),
      with each tensor it saved for backward hanging off it (its shape);
    - one `AccumulateGrad` box per leaf, labelled with the leaf's shape and,
      when `params` (e.g. `dict(model.named_parameters())`) names it, its name.

    Node ids are given in visit order (breadth first, inputs in edge order),
    so the same computation gives the same text."""
    from ..utils import _dot
    if not isinstance(root, _TensorBase):
        raise TypeError(f"to_dot expects a tensor, got {type(root).__name__}")
    names = {id(value): name for name, value in (params or {}).items()}
    drawing = _GraphDrawing(_dot, names)
    top = drawing.add("t0", _tensor_label(root, names), shape="ellipse",
                      style="filled", fillcolor="#c5e1a5")
    start = root.grad_fn if root.grad_fn is not None else (
        AccumulateGrad(root) if root.requires_grad else None)
    if start is not None:
        drawing.edge(top, drawing.visit_all(start))
    return _dot.digraph("autograd", drawing.lines)


def to_svg(root, path=None, params=None):
    """`to_dot(root, params)` rendered by Graphviz's `dot -Tsvg`: returns the
    SVG text and writes it to `path` when given."""
    from ..utils import _dot
    return _dot.render_svg(to_dot(root, params), path)


class _GraphDrawing:
    """Numbers nodes as it meets them and collects the DOT lines."""

    def __init__(self, dot, names):
        self.dot = dot
        self.names = names
        self.ids = {}       # id(node or leaf) -> DOT id
        self.lines = []
        self.count = 0

    def add(self, dot_id, label, **style):
        self.lines.append(f"  {dot_id}{self.dot.attrs(label=label, **style)};")
        return dot_id

    def edge(self, source, target, **style):
        self.lines.append(f"  {source} -> {target}{self.dot.attrs(**style)};")

    def visit_all(self, start):
        """Draws everything reachable from `start`; returns start's DOT id."""
        first = self.node_id(start)
        queue = collections.deque([start])
        while queue:
            node = queue.popleft()
            for target, _ in node.next_functions:
                if target is None:
                    continue
                is_new = self._key(target) not in self.ids
                self.edge(self.ids[self._key(node)], self.node_id(target))
                if is_new:
                    queue.append(target)
        return first

    @staticmethod
    def _key(node):
        return id(node.variable) if type(node) is AccumulateGrad else id(node)

    def node_id(self, node):
        """The DOT id of `node`, drawing it (and its saved tensors) the
        first time it is met."""
        key = self._key(node)
        if key in self.ids:
            return self.ids[key]
        self.count += 1
        dot_id = self.ids[key] = f"n{self.count}"
        if type(node) is AccumulateGrad:
            label = "AccumulateGrad\n" + _tensor_label(node.variable, self.names)
            self.add(dot_id, label, shape="box", style="filled", fillcolor="#90caf9")
            return dot_id
        self.add(dot_id, type(node).__name__, shape="box", style="filled",
                 fillcolor="#eeeeee")
        for index, value in enumerate(node._saved or ()):
            tensor = value.data if type(value) is SavedOutput else value
            if not isinstance(tensor, _TensorBase):
                continue
            what = "saved output" if type(value) is SavedOutput else f"saved {index}"
            saved_id = self.add(f"{dot_id}_s{index}",
                                f"{what}\n{_shape_text(tensor)}", shape="box",
                                style="filled", fillcolor="#ffcc80")
            self.edge(saved_id, dot_id, style="dashed", arrowhead="none")
        return dot_id


def _shape_text(tensor):
    return f"{list(tensor.shape)} {str(tensor.dtype).removeprefix('ember.')}"


def _tensor_label(tensor, names):
    name = names.get(id(tensor))
    return f"{name}\n{_shape_text(tensor)}" if name else _shape_text(tensor)
