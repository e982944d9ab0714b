"""The backward engine: runs the recorded graph from outputs to leaves.

Note [How the engine walks the graph]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Recursion would hit Python's recursion limit on long chains, so the engine
is two loops over explicit containers, as PyTorch's C++ engine is:

1. Dependencies.  A depth-first walk with a list as the stack counts, for
   every node and leaf reachable from the roots, how many edges point at it.
2. Execution.  Gradients arriving for a node are summed in its input
   buffer; a node runs when its count drops to zero, i.e. when every
   producer of its gradient has run.  Ready nodes wait in a heap ordered
   newest first (PyTorch's order).  A leaf's buffer, once complete, goes
   through the leaf's hooks and accumulates into `.grad` (or, for
   autograd.grad, is captured instead).

A leaf's post-accumulate-grad hooks run right after its .grad is updated,
on a .grad of its own (Note [Adopting gradients]); callbacks queued during
the walk (queue_callback) run once it is over.

Gradients that never arrive (an unused output of split, say) are None.  A
node whose every gradient is None is not run; its edges still count down so
the rest of the graph proceeds.  After a node runs, its saved tensors are
released unless retain_graph was asked for.
"""

import heapq
import sys

from .. import _C
from .graph import Node, edge_of

_TensorBase = _C._TensorBase
_set_grad_enabled = _C._set_grad_enabled
_is_grad_enabled = _C.is_grad_enabled
_owns_its_memory = _C._owns_its_memory


def _as_tuple(obj):
    if isinstance(obj, _TensorBase):
        return (obj,)
    return tuple(obj)


def _make_root_grads(outputs, grad_outputs, create_graph):
    grads = []
    for i, (out, grad) in enumerate(zip(outputs, grad_outputs)):
        if grad is None:
            if not out.requires_grad:
                grads.append(None)
                continue
            if out.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if not out.is_floating_point():
                raise RuntimeError(
                    "grad can be implicitly created only for real scalar outputs "
                    f"but got {out.dtype}")
            grads.append(_C.ones_like(out))
        elif isinstance(grad, _TensorBase):
            if grad.shape != out.shape:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {grad.shape} "
                    f"and output[{i}] has a shape of {out.shape}.")
            if out.is_floating_point() != grad.is_floating_point():
                raise TypeError(
                    f"For grad_output[{i}], expected a floating point tensor like "
                    f"output[{i}] ({out.dtype}) but got {grad.dtype}")
            grads.append(grad if create_graph else grad.detach())
        else:
            raise TypeError(
                "gradients can be either Tensors or None, but got "
                f"{type(grad).__name__}")
    return grads


def _root_edges(outputs):
    edges = []
    for i, out in enumerate(outputs):
        if not isinstance(out, _TensorBase):
            raise TypeError(f"expected a tensor at position {i}, got {type(out).__name__}")
        edge = edge_of(out)
        if edge is None:
            raise RuntimeError(
                f"element {i} of tensors does not require grad and does not have a grad_fn")
        edges.append(edge)
    return edges


def _count_dependencies(root_edges, parents=None):
    """Edges pointing at each node and leaf reachable from the roots.  With
    a `parents` dict, also records target -> [nodes whose edges point at it]."""
    dependencies = {}
    stack = []
    for target, _ in root_edges:
        if target not in dependencies:
            dependencies[target] = 0
            if not isinstance(target, _TensorBase):
                stack.append(target)
    while stack:
        node = stack.pop()
        for edge in node._edges:
            if edge is None:
                continue
            target = edge[0]
            if parents is not None:
                parents.setdefault(target, []).append(node)
            count = dependencies.get(target)
            if count is None:
                dependencies[target] = 1
                if not isinstance(target, _TensorBase):
                    stack.append(target)
            else:
                dependencies[target] = count + 1
    return dependencies


def _needed_nodes(parents, targets):
    """The nodes with a path to one of `targets` (nodes or leaves), going
    up the parent links from the targets."""
    needed = set()
    stack = list(targets)
    while stack:
        node = stack.pop()
        if node in needed:
            continue
        needed.add(node)
        stack.extend(parents.get(node, ()))
    return needed


class _GraphTask:
    """The state of one backward call (PyTorch's GraphTask)."""

    def __init__(self, keep_graph, create_graph, accumulate, captures, only_inputs):
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        self.accumulate = accumulate    # write leaves' .grad
        self.captures = captures        # {(target, nr): index} for autograd.grad
        self.captured = [None] * len(captures) if captures else None
        self.only_inputs = only_inputs  # backward(inputs=...): accumulate into these only
        self.prune_to = None            # targets: run only nodes leading there
        self.needed = None              # the nodes that do, once computed
        self.adopted = []               # (leaf, grad): see _own_adopted_grad
        self.final_callbacks = []       # queue_callback's, run when the walk ends

    # ---- leaves ----

    def finish_leaf(self, leaf, grad):
        """`grad`'s only reference in the engine is this call's: the caller
        passes it straight out of the leaf's buffer (Note [Adopting
        gradients])."""
        if grad is None:
            return
        hooks = leaf._backward_hooks
        if hooks:
            grad = _run_leaf_hooks(hooks, grad)
        if self.captures:
            index = self.captures.get((leaf, 0))
            if index is not None:
                self.captured[index] = grad
            return
        if self.only_inputs is not None and id(leaf) not in self.only_inputs:
            return
        if self.accumulate:
            grad = _accumulate_grad(leaf, grad, self.create_graph, self.adopted)
            post_hooks = getattr(leaf, "_post_accumulate_grad_hooks", None)
            if post_hooks:
                if grad is not None:  # a hook may write .grad in place
                    # Settled now: what the hooks keep of .grad is theirs.
                    self.adopted.pop()
                    _own_adopted_grad(leaf, grad)
                for hook in tuple(post_hooks):
                    hook(leaf)

    # ---- nodes ----

    def run_node(self, node, grads):
        """Runs one node with its summed gradients; returns one gradient
        per edge, or None when it is pruned.  The buffer holds a gradient
        for at least one output, or it would not exist."""
        hooks = node._hooks
        if hooks is not None:
            grads = _run_pre_hooks(node, hooks, grads)
        if self.captures:
            for nr, grad in enumerate(grads):
                index = self.captures.get((node, nr))
                if index is not None:
                    self.captured[index] = grad
        if self.needed is not None and node not in self.needed:
            return None
        results = node.apply(*grads)
        if hooks is not None and hooks.post:
            for hook in tuple(hooks.post):
                replaced = hook(results, grads)
                if replaced is not None:
                    results = tuple(replaced)
        if not self.keep_graph and node._saved:
            node._saved = None
        return results


def _run_pre_hooks(node, hooks, grads):
    grads = list(grads)
    for nr, tensor_hooks in hooks.tensor.items():
        if grads[nr] is None:
            continue
        for hook in tuple(tensor_hooks):
            result = hook(grads[nr])
            if result is not None:
                grads[nr] = result
    for nr, tensor_ref in hooks.retain.items():
        tensor = tensor_ref()
        if tensor is not None and grads[nr] is not None:
            old = tensor.grad
            tensor.grad = grads[nr].clone() if old is None else old + grads[nr]
    for hook in tuple(hooks.pre):
        result = hook(tuple(grads))
        if result is not None:
            grads = list(result)
    return grads


def _run_leaf_hooks(hooks, grad):
    for hook in tuple(hooks):
        result = hook(grad)
        if result is not None:
            grad = result
    return grad


def _accumulate_grad(leaf, grad, create_graph, adopted):
    """PyTorch's AccumulateGrad: leaf.grad = grad, or += grad.  Returns the
    gradient when the leaf adopted it (Note [Adopting gradients]), else None."""
    if grad.dtype != leaf.dtype:
        grad = grad.to(leaf.dtype)
    if grad.shape != leaf.shape:
        raise RuntimeError(
            f"Function returned an invalid gradient - got {list(grad.shape)} but "
            f"expected shape compatible with {list(leaf.shape)}")
    old = leaf.grad
    if old is None and create_graph:
        # A copy, as PyTorch's: the gradient may be another leaf's or a
        # node's input in the graph being built, and is recorded (CopyBackwards).
        leaf.grad = _copy_in_layout(leaf, grad)
    elif old is None:
        leaf.grad = grad
        adopted.append((leaf, grad))
        return grad
    elif create_graph or old.requires_grad:
        leaf.grad = old + grad
    else:
        old.add_(grad)
    return None


def _add_to_buffer(buffers, target, nr, grad):
    """Sums `grad` into the input buffer of `target` (a node, or a leaf with
    one slot) at output `nr`."""
    buffer = buffers.get(target)
    if buffer is None:
        num_outputs = 1 if isinstance(target, _TensorBase) else target.num_outputs
        buffer = buffers[target] = [None] * num_outputs
        buffer[nr] = grad
    elif buffer[nr] is None:
        buffer[nr] = grad
    else:
        buffer[nr] = buffer[nr] + grad


def _execute(root_edges, root_grads, task):
    if task.prune_to is None:
        dependencies = _count_dependencies(root_edges)
    else:
        parents = {}
        dependencies = _count_dependencies(root_edges, parents)
        task.needed = _needed_nodes(parents, task.prune_to)
    buffers = {}
    for (target, nr), grad in zip(root_edges, root_grads):
        if grad is not None:
            _add_to_buffer(buffers, target, nr, grad)

    ready = []
    for target, _ in root_edges:
        if dependencies.get(target) == 0:
            dependencies[target] = -1  # queued once even if it is two roots
            if isinstance(target, _TensorBase):
                task.finish_leaf(target, buffers.pop(target, [None])[0])
            else:
                heapq.heappush(ready, (-target._sequence_nr, target))

    # The loop below is the engine's hot path (Note [How the engine walks
    # the graph]); plain nodes (no hooks, no pruning) run inline.
    plain = not task.captures and task.needed is None
    keep_graph = task.keep_graph
    heappop, heappush = heapq.heappop, heapq.heappush
    while ready:
        node = heappop(ready)[1]
        grads = buffers.pop(node, None)
        if grads is None:
            results = ()
        elif plain and node._hooks is None:
            results = node.apply(*grads)
            if not keep_graph and node._saved:
                node._saved = None
        else:
            results = task.run_node(node, grads) or ()
        edges = node._edges
        if not results:  # not run (pruned, or no gradient arrived)
            results = (None,) * len(edges)
        finished_leaves = None
        for edge, grad in zip(edges, results):
            if edge is None:
                continue
            target, nr = edge
            if grad is not None:
                _add_to_buffer(buffers, target, nr, grad)
            remaining = dependencies[target] - 1
            dependencies[target] = remaining
            if remaining == 0:
                if isinstance(target, _TensorBase):
                    if finished_leaves is None:
                        finished_leaves = [target]
                    else:
                        finished_leaves.append(target)
                else:
                    heappush(ready, (-target._sequence_nr, target))
        if finished_leaves is not None:
            # Only the leaves' buffers hold their gradients now (Note
            # [Adopting gradients]).
            grads = results = grad = None
            for leaf in finished_leaves:
                task.finish_leaf(leaf, buffers.pop(leaf, [None])[0])


# What sys.getrefcount says of an adopted gradient inside _own_adopted_grad
# when only its leaf has it: the leaf's .grad, the caller's variable, the
# parameter, getrefcount's argument: 4 on CPython 3.11-3.13.  (The caller
# has taken its (leaf, grad) pair off the adopted list: a pair left there
# would count.)  Measured once, by the same calls, rather than assumed: an
# interpreter that borrows more references (or takes more) would
# otherwise see a shared gradient as the leaf's own (or copy every one).
_adopted_sole_refcount = None


def _references_seen_by_the_check(grad):
    return sys.getrefcount(grad)   # as in _own_adopted_grad


def _measure_adopted_sole_refcount():
    leaf, grad = _C.empty((1,)), _C.empty((1,))
    leaf.grad = grad
    return _references_seen_by_the_check(grad)


def _own_adopted_grad(leaf, grad):
    """Note [Adopting gradients]: a leaf's first gradient is stored without a
    copy, as PyTorch's AccumulateGrad steals it.  That is only right if
    nothing else sees that memory: a formula may hand the same tensor (or a
    view of it) to two leaves, and the caller's `gradient` argument may be
    it.  A gradient still shared once the engine's own references are gone
    is replaced by a copy, so that an in-place write to one .grad (a later
    accumulation, a post-accumulate-grad hook) cannot change another
    tensor.  The engine's references are gone at the end of the walk, and,
    for a leaf with post-accumulate-grad hooks, before they run: the walk
    finishes a node's leaves only after dropping its own references to the
    node's gradients, and hands each leaf's gradient over from its buffer
    (PyTorch checks the same way, by the use count, when it adopts).  A
    gradient laid out differently from its leaf is copied into the leaf's
    layout, as PyTorch's AccumulateGrad does; so is every first gradient
    under create_graph, where the graph being built may hold it."""
    global _adopted_sole_refcount
    if leaf.grad is not grad:
        return
    if _adopted_sole_refcount is None:
        _adopted_sole_refcount = _measure_adopted_sole_refcount()
    if (sys.getrefcount(grad) > _adopted_sole_refcount or not _owns_its_memory(grad)
            or grad.stride() != leaf.stride()):
        leaf.grad = _copy_in_layout(leaf, grad)


def _copy_in_layout(leaf, grad):
    """A copy of `grad` laid out as `leaf` (an expanded gradient, with
    stride 0, could not take in-place accumulation later)."""
    copy = _C.empty_like(leaf)
    copy.copy_(grad)
    return copy


def _unshare_adopted_grads(adopted):
    # Last first, each pair off the list before its check, so that a
    # gradient two leaves adopted is copied once, for the later one.
    while adopted:
        leaf, grad = adopted.pop()
        _own_adopted_grad(leaf, grad)


# The graph tasks now running, innermost last (a hook may call backward).
_running_tasks = []


def queue_callback(callback):
    """Runs `callback()` once the current backward has walked the whole
    graph (PyTorch's Variable._execution_engine.queue_callback); a
    gradient hook uses it to act after every gradient is in, as
    DistributedDataParallel waits for its all-reduces."""
    if not _running_tasks:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    _running_tasks[-1].final_callbacks.append(callback)


def _run_final_callbacks(task):
    # A callback may queue another one: run until none are left.
    callbacks = task.final_callbacks
    while callbacks:
        callbacks.pop(0)()


def _run(root_edges, root_grads, task):
    was_enabled = _is_grad_enabled()
    _set_grad_enabled(task.create_graph)
    _running_tasks.append(task)
    try:
        _execute(root_edges, root_grads, task)
        _run_final_callbacks(task)
    finally:
        _running_tasks.pop()
        task.final_callbacks.clear()
        _set_grad_enabled(was_enabled)
    root_grads.clear()
    _unshare_adopted_grads(task.adopted)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             grad_variables=None, inputs=None):
    """Accumulates d(tensors)/d(leaf) into the .grad of every leaf (or of `inputs`)."""
    tensors = _as_tuple(tensors)
    if grad_tensors is None:
        grad_tensors = grad_variables
    if grad_tensors is None:
        grad_tensors = (None,) * len(tensors)
    else:
        grad_tensors = _as_tuple(grad_tensors) if not isinstance(grad_tensors, (list, tuple)) \
            else tuple(grad_tensors)
    if len(grad_tensors) != len(tensors):
        raise RuntimeError(
            f"got {len(grad_tensors)} tensors and {len(tensors)} gradients")
    if retain_graph is None:
        retain_graph = create_graph
    only_inputs = None
    if inputs is not None:
        inputs = _as_tuple(inputs)
        if not inputs:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
        only_inputs = {id(t) for t in inputs}
    root_edges = _root_edges(tensors)
    root_grads = _make_root_grads(tensors, grad_tensors, create_graph)
    task = _GraphTask(retain_graph, create_graph, True, None, only_inputs)
    if inputs is not None:
        for t in inputs:
            if not t.requires_grad:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
        task.prune_to = [edge_of(t)[0] for t in inputs]
        _run_non_leaf_inputs(inputs, task)
    _run(root_edges, root_grads, task)


def _run_non_leaf_inputs(inputs, task):
    """backward(inputs=[non_leaf]): their gradient goes into .grad as if retained."""
    for t in inputs:
        if t.grad_fn is not None:
            t.retain_grad()


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False,
         materialize_grads=False):
    """d(outputs)/d(inputs), returned instead of accumulated into .grad."""
    if is_grads_batched:
        raise NotImplementedError("is_grads_batched=True is not supported")
    if allow_unused is None:
        allow_unused = materialize_grads
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    else:
        grad_outputs = _as_tuple(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(
            f"grad requires one grad_output per output: got {len(grad_outputs)} "
            f"grad_outputs and {len(outputs)} outputs")
    if retain_graph is None:
        retain_graph = create_graph
    captures = {}
    for i, t in enumerate(inputs):
        if not isinstance(t, _TensorBase):
            raise TypeError(f"grad(): inputs must be tensors, got {type(t).__name__}")
        edge = edge_of(t)
        if edge is None:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        captures.setdefault(edge, i)
    root_edges = _root_edges(outputs)
    root_grads = _make_root_grads(outputs, grad_outputs, create_graph)
    task = _GraphTask(retain_graph, create_graph, False, captures, None)
    task.prune_to = [edge[0] for edge in captures]
    _run(root_edges, root_grads, task)
    results = []
    for i, t in enumerate(inputs):
        g = task.captured[captures[edge_of(t)]]
        if g is None:
            if materialize_grads:
                g = _C.zeros_like(t)
            elif not allow_unused:
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used "
                    "in the graph. Set allow_unused=True if this is the desired behavior.")
        elif g.dtype != t.dtype:
            g = g.to(t.dtype)
        results.append(g)
    return tuple(results)


__all__ = ["backward", "grad", "Node"]
