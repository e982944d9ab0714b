"""ember.einsum and ember.einsum_path.

Note [einsum as batched GEMMs]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
An equation names each operand dim by a letter ("bhqd,bhkd->bhqk"; `...`
stands for the dims no letter names, aligned from the right and broadcast
across operands).  einsum runs in three steps, each made of differentiable
ember ops, so gradients (and double backward) need no formula of their own:

  1. per operand: a letter repeated on it takes the diagonal; a dim of
     size 1 where another operand has more is squeezed (it broadcasts);
     a letter no other operand and not the output has is summed away;
  2. operands are contracted two at a time, greedily: each step takes the
     pair whose product removes the most elements (opt_einsum's "greedy"
     cost: size(result) - size(a) - size(b)).  A pair becomes one `bmm`:
     the letters both keep are the batch, the letters both have and nothing
     later needs are summed in the product (K), and each side's own letters
     are its rows (M) or columns (N).  The operands are permuted views
     reshaped to (batch, M, K) @ (batch, K, N), which copies nothing when
     the layout allows it (bmm takes strides);
  3. the last operand is summed, permuted and expanded into the output.

einsum_path(equation, *operands) shows the order step 2 chooses.

Note [Compiled einsum]
~~~~~~~~~~~~~~~~~~~~~~
Which ops the steps take depends only on the equation and the operands'
shapes, and parsing and planning cost more than the ops on small tensors.
So the steps run once per (equation, shapes) on _Symbol placeholders,
which carry a shape and record each tensor method called on them; einsum
then replays the recorded program on the real operands (a few Tensor
method calls).  Errors are raised while recording, so they are PyTorch's
whether or not the program is cached.
"""

import math

_ELLIPSIS = "..."


# ---- parsing -------------------------------------------------------------------------

def _check_letters(equation):
    for index, char in enumerate(equation):
        if not (char.isascii() and char.isalpha()) and char not in ".,-> ":
            raise RuntimeError(
                f"einsum(): invalid subscript given at index {index} in the equation "
                "string, subscripts must be in [a-zA-Z]")
    arrow = equation.find("->")
    if arrow >= 0 and ("-" in equation[arrow + 2:] or ">" in equation[arrow + 2:]):
        at = equation.index("-" if "-" in equation[arrow + 2:] else ">", arrow + 2)
        raise RuntimeError(
            f"einsum(): invalid subscript given at index {at} in the equation "
            "string, subscripts must be in [a-zA-Z]")


def _split_term(term, operand_index):
    """(letters before ..., letters after ..., has ellipsis) of one term."""
    if "." not in term:
        return list(term), [], False
    start = term.find(_ELLIPSIS)
    if start < 0 or "." in term[:start]:
        raise RuntimeError(
            f"einsum(): found '.' for operand {operand_index} that is not part of any ellipsis")
    rest = term[start + 3:]
    if "." in rest:
        raise RuntimeError(
            f"einsum(): found '.' for operand {operand_index} for which an ellipsis was "
            "already found")
    return list(term[:start]), list(rest), True


def _operand_labels(term, operand, index):
    """One label per dim: letters, and ('...', k) for the k-th ellipsis dim
    counted from the right."""
    head, tail, ellipsis = _split_term(term, index)
    named = len(head) + len(tail)
    if not ellipsis and named != operand.dim():
        raise RuntimeError(
            f"einsum(): the number of subscripts in the equation ({named}) does not match "
            f"the number of dimensions ({operand.dim()}) for operand {index} and no "
            "ellipsis was given")
    if named > operand.dim():
        raise RuntimeError(
            f"einsum(): the number of subscripts in the equation ({named}) is more than the "
            f"number of dimensions ({operand.dim()}) for operand {index}")
    middle = operand.dim() - named
    return head + [(_ELLIPSIS, middle - 1 - k) for k in range(middle)] + tail


def _parse(equation, operands):
    """(labels per operand, output labels)."""
    _check_letters(equation)  # indices in messages count the spaces
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) > len(operands):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(terms) < len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    labels = [_operand_labels(t, op, i) for i, (t, op) in enumerate(zip(terms, operands))]
    ellipsis_dims = max((len([x for x in ls if type(x) is tuple]) for ls in labels), default=0)
    ellipsis = [(_ELLIPSIS, k) for k in reversed(range(ellipsis_dims))]
    if not arrow:
        counts = {}
        for ls in labels:
            for label in ls:
                counts[label] = counts.get(label, 0) + 1
        letters = sorted(x for x, n in counts.items() if type(x) is str and n == 1)
        return labels, ellipsis + letters
    return labels, _output_labels(rhs, labels, ellipsis)


def _output_labels(rhs, labels, ellipsis):
    head, tail, has_ellipsis = _split_term(rhs, "output")
    seen = set()
    for letter in head + tail:
        if letter in seen:
            raise RuntimeError(f"einsum(): output subscript {letter} appears more than once "
                               "in the output")
        if not any(letter in ls for ls in labels):
            raise RuntimeError(f"einsum(): output subscript {letter} does not appear in the "
                               "equation for any input operand")
        seen.add(letter)
    return head + (ellipsis if has_ellipsis else []) + tail


def _label_sizes(labels, operands):
    """Each label's size; 1 broadcasts against any other size."""
    sizes = {}
    for index, (ls, op) in enumerate(zip(labels, operands)):
        seen = {}
        for label, size in zip(ls, op.shape):
            if label in seen and seen[label] != size:
                raise RuntimeError(f"einsum(): subscript {label} is repeated for operand "
                                   f"{index} but the sizes don't match, {size} != {seen[label]}")
            seen[label] = size
            previous = sizes.get(label, 1)
            if size != 1 and previous != 1 and size != previous:
                name = label if type(label) is str else "..."
                raise RuntimeError(
                    f"einsum(): subscript {name} has size {size} for operand {index} which "
                    f"does not broadcast with previously seen size {previous}")
            sizes[label] = max(previous, size)
    return sizes


# ---- step 1: one operand on its own ------------------------------------------------------

def _take_diagonals(operand, labels):
    """A label repeated on one operand keeps only its diagonal (moved last)."""
    labels = list(labels)
    while len(set(labels)) < len(labels):
        label = next(x for x in labels if labels.count(x) > 1)
        first = labels.index(label)
        second = labels.index(label, first + 1)
        operand = operand.diagonal(0, first, second)
        labels = [x for i, x in enumerate(labels) if i not in (first, second)] + [label]
    return operand, labels


def _sum_out(operand, labels, drop):
    dims = tuple(i for i, label in enumerate(labels) if label in drop)
    if not dims:
        return operand, labels
    return operand.sum(dims), [x for x in labels if x not in drop]


def _prepare(operand, labels, sizes):
    operand, labels = _take_diagonals(operand, labels)
    broadcast = [i for i, x in enumerate(labels) if operand.shape[i] == 1 and sizes[x] != 1]
    for i in reversed(broadcast):
        operand = operand.squeeze(i)
    return operand, [x for i, x in enumerate(labels) if i not in broadcast]


# ---- step 2: the greedy pairwise order ---------------------------------------------------

def _size(labels, sizes):
    return math.prod(sizes[x] for x in labels)


def _pair_result(a, b, needed):
    """The labels the product of two operands keeps, in bmm order:
    batch, a's own, b's own."""
    batch = [x for x in a if x in b and x in needed]
    return (batch + [x for x in a if x not in b and x in needed]
            + [x for x in b if x not in a and x in needed])


def _plan(labels, output, sizes):
    """The greedy order: a list of (i, j, labels of their product); each
    step removes operands i < j and appends their product."""
    labels = [list(ls) for ls in labels]
    steps = []
    while len(labels) > 1:
        best = None
        for i in range(len(labels)):
            for j in range(i + 1, len(labels)):
                needed = set(output).union(*(ls for k, ls in enumerate(labels) if k not in (i, j)))
                result = _pair_result(labels[i], labels[j], needed)
                size = _size(result, sizes)
                cost = (size - _size(labels[i], sizes) - _size(labels[j], sizes), size)
                if best is None or cost < best[0]:
                    best = (cost, i, j, result)
        _, i, j, result = best
        steps.append((i, j, result))
        labels = [ls for k, ls in enumerate(labels) if k not in (i, j)] + [result]
    return steps


def _contract(a, a_labels, b, b_labels, result):
    """One step: a (batch, M, K) @ b (batch, K, N) product."""
    kept = set(result)
    a, a_labels = _sum_out(a, a_labels, {x for x in a_labels if x not in kept and x not in b_labels})
    b, b_labels = _sum_out(b, b_labels, {x for x in b_labels if x not in kept and x not in a_labels})
    batch = [x for x in result if x in a_labels and x in b_labels]
    rows = [x for x in result if x in a_labels and x not in b_labels]
    cols = [x for x in result if x in b_labels and x not in a_labels]
    summed = [x for x in a_labels if x in b_labels and x not in kept]
    a = a.permute([a_labels.index(x) for x in batch + rows + summed])
    b = b.permute([b_labels.index(x) for x in batch + summed + cols])
    batch_shape = tuple(a.shape[:len(batch)])
    m = math.prod(a.shape[len(batch):len(batch) + len(rows)])
    n = math.prod(b.shape[len(batch) + len(summed):])
    k = math.prod(a.shape[len(batch) + len(rows):])
    count = math.prod(batch_shape)
    product = a.reshape(count, m, k).bmm(b.reshape(count, k, n))
    shape = batch_shape + tuple(a.shape[len(batch):len(batch) + len(rows)]) \
        + tuple(b.shape[len(batch) + len(summed):])
    return product.reshape(shape)


# ---- recording and replaying the steps (Note [Compiled einsum]) ------------------------

class _Symbol:
    """A placeholder for a tensor: its shape, and its slot in the program."""

    __slots__ = ("shape", "slot", "program")

    def __init__(self, shape, slot, program):
        self.shape, self.slot, self.program = tuple(shape), slot, program

    def dim(self):
        return len(self.shape)

    def _record(self, method, args, shape, other=None):
        self.program.append((self.slot, method, args, None if other is None else other.slot))
        return _Symbol(shape, self.program.slots(), self.program)

    def diagonal(self, offset, dim1, dim2):
        kept = tuple(n for i, n in enumerate(self.shape) if i not in (dim1, dim2))
        return self._record("diagonal", (offset, dim1, dim2), kept + (self.shape[dim1],))

    def squeeze(self, dim):
        return self._record("squeeze", (dim,), self.shape[:dim] + self.shape[dim + 1:])

    def unsqueeze(self, dim):  # einsum only appends a dim (dim=-1)
        return self._record("unsqueeze", (dim,), self.shape + (1,))

    def sum(self, dims):
        return self._record("sum", (dims,),
                            tuple(n for i, n in enumerate(self.shape) if i not in dims))

    def permute(self, order):
        return self._record("permute", (order,), tuple(self.shape[i] for i in order))

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        return self._record("reshape", (shape,), shape)

    def expand(self, *sizes):
        return self._record("expand", sizes, sizes)

    def bmm(self, other):
        return self._record("bmm", (), self.shape[:2] + other.shape[2:], other)


class _Program(list):
    """(slot, method, args, other slot) steps; slot i < number of operands
    is operand i, and step j writes slot operands + j."""

    def __init__(self, operands):
        super().__init__()
        self.operands = operands

    def slots(self):
        return self.operands + len(self) - 1

    def run(self, tensors, result):
        values = list(tensors)
        for slot, method, args, other in self:
            target = values[slot]
            if other is None:
                values.append(getattr(target, method)(*args))
            else:
                values.append(getattr(target, method)(values[other], *args))
        if result < self.operands:  # nothing to do: a new alias, as PyTorch returns
            return values[result].view_as(values[result])
        return values[result]


_programs = {}
_MAX_PROGRAMS = 512


def _compile(equation, shapes):
    """The recorded program of einsum(equation) on operands of `shapes`,
    and the slot of its result."""
    key = (equation, shapes)
    compiled = _programs.get(key)
    if compiled is None:
        program = _Program(len(shapes))
        symbols = [_Symbol(shape, i, program) for i, shape in enumerate(shapes)]
        result = _evaluate(equation, symbols)
        if len(_programs) >= _MAX_PROGRAMS:
            _programs.clear()
        compiled = _programs[key] = (program, result.slot)
    return compiled


# ---- the public functions ------------------------------------------------------------

def _operands(operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        return list(operands[0])
    return list(operands)


def _setup(equation, operands):
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    labels, output = _parse(equation, operands)
    sizes = _label_sizes(labels, operands)
    prepared = [_prepare(op, ls, sizes) for op, ls in zip(operands, labels)]
    # Letters only one operand has and the output lacks are summed first.
    counts = {}
    for _, ls in prepared:
        for label in set(ls):
            counts[label] = counts.get(label, 0) + 1
    private = {x for x, n in counts.items() if n == 1 and x not in output}
    prepared = [_sum_out(op, ls, private) for op, ls in prepared]
    return prepared, output, sizes


def _subscript(n):
    if n is Ellipsis:
        return _ELLIPSIS
    if 0 <= n < 52:
        return chr(ord("A") + n) if n < 26 else chr(ord("a") + n - 26)
    raise ValueError("einsum(): subscript in subscript list is not within the valid range [0, 52)")


def _from_sublists(args):
    """einsum(op0, sublist0, op1, sublist1, ..., [output sublist]) as an
    equation and its operands: subscripts 0-25 are A-Z, 26-51 a-z."""
    pairs = len(args) // 2
    operands = list(args[0:2 * pairs:2])
    equation = ",".join("".join(map(_subscript, s)) for s in args[1:2 * pairs:2])
    if len(args) % 2:
        equation += "->" + "".join(map(_subscript, args[-1]))
    return equation, operands


def einsum(*args):
    """Sums of products over the dims an equation names (PyTorch's
    torch.einsum; Note [einsum as batched GEMMs]).  The operands come as
    separate arguments or as one list after the equation, or interleaved
    with their subscript lists: einsum(a, [0, 1], b, [1, 2], [0, 2])."""
    if len(args) < 2:
        raise ValueError("einsum(): must specify the equation string and at least one operand, "
                         "or at least one operand and its subscripts list")
    if isinstance(args[0], str):
        equation, operands = args[0], _operands(args[1:])
    else:
        equation, operands = _from_sublists(args)
    program, result = _compile(equation, tuple(tuple(op.shape) for op in operands))
    return program.run(operands, result)


def _evaluate(equation, operands):
    """The three steps on `operands` (placeholders, when compiling)."""
    prepared, output, sizes = _setup(equation, operands)
    tensors = [op for op, _ in prepared]
    labels = [ls for _, ls in prepared]
    for i, j, result in _plan(labels, output, sizes):
        product = _contract(tensors[i], labels[i], tensors[j], labels[j], result)
        tensors = [t for k, t in enumerate(tensors) if k not in (i, j)] + [product]
        labels = [ls for k, ls in enumerate(labels) if k not in (i, j)] + [result]
    return _to_output(tensors[0], labels[0], output, sizes)


def _to_output(operand, labels, output, sizes):
    operand, labels = _sum_out(operand, labels, {x for x in labels if x not in output})
    missing = [x for x in output if x not in labels]  # broadcast size-1 dims
    for label in missing:
        operand = operand.unsqueeze(-1)
        labels = labels + [label]
    operand = operand.permute([labels.index(x) for x in output]) if output else operand
    if missing:
        operand = operand.expand(*(sizes[x] for x in output))
    return operand


def _label_text(label):
    return label if type(label) is str else "."


def einsum_path(equation, *operands):
    """The pairwise order ember.einsum contracts in, as NumPy's einsum_path
    shows its own: (path, report).  `path` is ["einsum_path", (i, j), ...]
    (positions in the shrinking operand list); `report` prints one line per
    step with its sub-equation and the size of its product."""
    program = _Program(0)  # shapes suffice: placeholders, nothing computed
    symbols = [_Symbol(op.shape, i, program) for i, op in enumerate(_operands(operands))]
    prepared, output, sizes = _setup(equation, symbols)
    labels = [ls for _, ls in prepared]
    path = ["einsum_path"]
    lines = [f"  Equation: {equation}", f"  Operands after their own sums: "
             + ", ".join("".join(map(_label_text, ls)) or "(scalar)" for ls in labels),
             "  step  pair     contraction                     product size"]
    for number, (i, j, result) in enumerate(_plan(labels, output, sizes), 1):
        text = (f"{''.join(map(_label_text, labels[i]))},{''.join(map(_label_text, labels[j]))}"
                f"->{''.join(map(_label_text, result))}")
        lines.append(f"  {number:<5} {str((i, j)):<8} {text:<31} {_size(result, sizes)}")
        path.append((i, j))
        labels = [ls for k, ls in enumerate(labels) if k not in (i, j)] + [result]
    return path, "\n".join(lines)

