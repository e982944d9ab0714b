"""The walkthrough's pictures, generated from the running code.

`make docs` runs `python docs/pictures.py`, which writes one `.dot` file and
its `.svg` rendering (Graphviz's `dot`) per picture into
`docs/walkthrough/pictures/`.  The chapters embed the SVGs; the DOT files are
committed too, and `docs/test_pictures.py` regenerates the DOT text and
compares it, so a picture that no longer matches the code fails the tests.

This module lives in docs/ rather than in the package: it draws the
walkthrough's figures and is no API.  Every number in a picture is read from
live objects, never typed in:

- `byte_map`: the THPVariable struct's fields and their byte offsets.  The
  field names and C types come from the struct in `c/python/THP.h` (the
  order); the offsets are found in a live tensor's memory (ctypes reads the
  object at `id(t)`): each object field by the address of the object set in
  it, `weakreflist` through `__weakrefoffset__`, the header size from
  `object.__basicsize__`, `output_nr` and `requires_grad` by their values,
  the total from `__basicsize__`.
- `ownership`: who holds a reference to whom, for a tensor with a view, a
  NumPy export and a DLPack capsule, and for a tensor over a NumPy array.
  The counts are read through ctypes mirrors of `THTensor` and `THStorage`
  (`c/th/THTensor.h`, `c/th/THStorage.h`), each mirror checked against what
  Python reports (ndim, numel, offset, nbytes, data pointer) before use.
  What the view, the NumPy export, the DLPack capsule and the NumPy buffer
  add is measured (the count before and after that owner is made); the
  allocator's name and whether it is counted are read from its struct.
- `stride_grids`: which storage elements `t`, `t[1]`, `t[:, 1]`, `t.t()` and
  an `expand` touch, from each view's real size, stride and offset.
- `register_lifetimes`: for a scripted function's bytecode, which
  instruction defines, reads and DROPs each register (the jit's own
  `flow_effects`, the rule its verifier uses).
- `chain_rule` and `autograd_mlp`: `ember.autograd.graph.to_dot` on real
  graphs; `ir_scale` and `ir_gelu`: `Graph.to_dot()` of `graph_for`.
"""

import ctypes
import gc
import itertools
import os
import pathlib
import re
import sys
import weakref

import numpy as np

import ember
from ember.autograd.graph import to_dot as autograd_to_dot
from ember.utils import _dot

ROOT = pathlib.Path(__file__).resolve().parent.parent
PICTURES = ROOT / "docs" / "walkthrough" / "pictures"

# ---------------------------------------------------------------------------
# (a) The THPVariable byte map


def _struct_fields(header, struct_name):
    """[(C type, field name)] of `typedef struct { ... } struct_name;`."""
    text = (ROOT / header).read_text()
    end = re.search(r"\}\s*" + struct_name + ";", text).start()
    start = text.index("{", text.rindex("typedef struct", 0, end))
    body = re.sub(r"/\*.*?\*/", "", text[start + 1:end], flags=re.S)
    fields = []
    if body.strip().startswith("PyObject_HEAD"):   # a macro, no semicolon
        fields += [("Py_ssize_t", "ob_refcnt"), ("PyTypeObject *", "ob_type")]
        body = body.strip().removeprefix("PyObject_HEAD")
    for declaration in body.split(";"):
        declaration = declaration.strip()
        if not declaration:
            continue
        ctype, name = re.match(r"(.*?[\s*])(\w+)(?:\[\w+\])?$", declaration).groups()
        fields.append((" ".join(ctype.split()), name))
    return fields


def _words(obj, size):
    """The pointer-sized words of obj's memory (size bytes from id(obj))."""
    return list((ctypes.c_size_t * (size // 8)).from_address(id(obj)))


def _find_word(obj, size, value):
    """The byte offset in obj's memory of the word equal to `value`."""
    hits = [8 * i for i, word in enumerate(_words(obj, size)) if word == value]
    if len(hits) != 1:
        raise RuntimeError(f"expected one word equal to {value:#x}, found {hits}")
    return hits[0]


def thpvariable_offsets():
    """{field: byte offset} measured in live tensors (module docstring)."""
    base = ember._C._TensorBase
    size = base.__basicsize__
    leaf = ember.ones(2, 3, requires_grad=True)
    leaf.grad = ember.zeros(2, 3)
    leaf.register_hook(lambda grad: grad)
    product = leaf * 2
    view = product.view(3, 2)
    second = leaf.unbind(0)[1]
    ref = weakref.ref(view)
    header = object.__basicsize__
    offsets = {"ob_refcnt": 0, "ob_type": _find_word(view, size, id(type(view)))}
    offsets["grad"] = _find_word(leaf, size, id(leaf.grad))
    offsets["grad_fn"] = _find_word(product, size, id(product.grad_fn))
    offsets["backward_hooks"] = _find_word(leaf, size, id(leaf._backward_hooks))
    offsets["autograd_meta"] = _find_word(view, size, id(view._autograd_meta))
    offsets["weakreflist"] = base.__weakrefoffset__
    assert _words(view, size)[base.__weakrefoffset__ // 8] == id(ref)
    # cdata is the one word left between the header and the object fields;
    # it points at a THTensor whose ndim (its second int) is the tensor's.
    offsets["cdata"] = header
    assert _thtensor(view).ndim == view.dim()
    after_pointers = max(offsets.values()) + 8
    int_at = ctypes.c_int.from_address(id(second) + after_pointers).value
    assert int_at == second.output_nr == 1, "output_nr is not after the pointers"
    offsets["output_nr"] = after_pointers
    flag_at = after_pointers + ctypes.sizeof(ctypes.c_int)
    assert ctypes.c_char.from_address(id(leaf) + flag_at).value == b"\x01"
    assert ctypes.c_char.from_address(id(view) + flag_at).value == b"\x01"
    offsets["requires_grad"] = flag_at
    del ref
    return offsets, size


def byte_map():
    fields = _struct_fields("c/python/THP.h", "THPVariable")
    offsets, size = thpvariable_offsets()
    names = [name for _, name in fields]
    if sorted(names) != sorted(offsets):
        raise RuntimeError(f"THPVariable's fields changed: {names}")
    ordered = sorted(fields, key=lambda field: offsets[field[1]])
    cells = []
    for index, (ctype, name) in enumerate(ordered):
        end = offsets[ordered[index + 1][1]] if index + 1 < len(ordered) else None
        width = (end if end is not None else _natural_end(ctype, offsets[name])) - offsets[name]
        colour = "#c5e1a5" if name.startswith("ob_") else "#eeeeee"
        cells.append(_cell(f"{offsets[name]}<br/>{name}<br/><i>{_html(ctype)}</i>"
                           f"<br/>{width} B", colour))
    last_type, last_name = ordered[-1]
    used = _natural_end(last_type, offsets[last_name])
    if used < size:
        cells.append(_cell(f"{used}<br/>padding<br/>{size - used} B", "#ffffff"))
    title = (f"THPVariable: {size} bytes (ember._C._TensorBase.__basicsize__), "
             f"header {object.__basicsize__} bytes (object.__basicsize__)")
    return _table_picture("byte_map", [cells], title)


def _natural_end(ctype, offset):
    sizes = {"int": 4, "char": 1}
    return offset + sizes.get(ctype, 8)


def _html(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cell(text, colour, width=48):
    return f'<td bgcolor="{colour}" width="{width}">{text}</td>'


def _table_picture(name, rows, title):
    """A picture of one HTML-like table, `title` above it as the graph's label."""
    body = "".join("<tr>" + "".join(row) + "</tr>" for row in rows)
    table = f'<table border="0" cellborder="1" cellspacing="0" cellpadding="4">{body}</table>'
    return _dot.digraph(name, [f"  label={_dot.quote(title)}; labelloc=\"t\";",
                               f"  table [shape=plaintext, label=<{table}>];"])


# ---------------------------------------------------------------------------
# (b) The ownership graph


class _THTensor(ctypes.Structure):
    """A mirror of c/th/THTensor.h's THTensor, up to version_counter."""
    _fields_ = [("refcount", ctypes.c_int), ("ndim", ctypes.c_int),
                ("dtype", ctypes.c_int), ("is_contiguous", ctypes.c_bool),
                ("numel", ctypes.c_int64), ("storage_offset", ctypes.c_int64),
                ("storage", ctypes.c_void_p), ("version_counter", ctypes.c_void_p)]


class _THStorage(ctypes.Structure):
    """A mirror of c/th/THStorage.h's THStorage, up to deleter_context."""
    _fields_ = [("refcount", ctypes.c_int), ("data", ctypes.c_void_p),
                ("nbytes", ctypes.c_int64), ("allocator", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("deleter_context", ctypes.c_void_p)]


class _THAllocator(ctypes.Structure):
    """A mirror of c/th/THAllocator.h's THAllocator, up to is_static."""
    _fields_ = [("malloc", ctypes.c_void_p), ("free", ctypes.c_void_p),
                ("release_context", ctypes.c_void_p), ("context", ctypes.c_void_p),
                ("name", ctypes.c_char_p), ("device", ctypes.c_int),
                ("refcount", ctypes.c_int), ("is_static", ctypes.c_int)]


def _cdata(obj):
    """The C pointer a THPVariable or THPStorage holds right after its header."""
    return ctypes.c_void_p.from_address(id(obj) + object.__basicsize__).value


def _thtensor(tensor):
    core = _THTensor.from_address(_cdata(tensor))
    if (core.ndim, core.numel, core.storage_offset) != (
            tensor.dim(), tensor.numel(), tensor.storage_offset()):
        raise RuntimeError("the THTensor mirror no longer matches c/th/THTensor.h")
    return core


def _thstorage(tensor):
    core = _THStorage.from_address(_thtensor(tensor).storage)
    storage = tensor.untyped_storage()
    if (core.data, core.nbytes) != (storage.data_ptr(), storage.nbytes()):
        raise RuntimeError("the THStorage mirror no longer matches c/th/THStorage.h")
    return core


def ownership():
    """Reference counts of a tensor with a view, a NumPy export and a
    DLPack capsule, and of a tensor over a NumPy array, read live."""
    t = ember.arange(6.)
    storage_counts = [_thstorage(t).refcount]
    view = t.view(2, 3)
    storage_counts.append(_thstorage(t).refcount)
    exported = t.numpy()
    storage_counts.append(_thstorage(t).refcount)
    tensor_counts = [_thtensor(t).refcount]
    capsule = t.__dlpack__()
    tensor_counts.append(_thtensor(t).refcount)
    assert type(exported.base) is ember.UntypedStorage
    assert _cdata(exported.base) == _thtensor(t).storage
    cpu = _thstorage(t)
    allocator = _THAllocator.from_address(cpu.allocator)
    array = np.zeros(4)
    array_refs = [sys.getrefcount(array)]
    wrapped = ember.from_numpy(array)
    array_refs.append(sys.getrefcount(array))
    foreign = _thstorage(wrapped)

    lines = []
    node = lambda dot_id, label, fill="#eeeeee", shape="box": lines.append(  # noqa: E731
        f"  {dot_id}{_dot.attrs(label=label, shape=shape, style='filled', fillcolor=fill)};")
    edge = lambda a, b, label, style="solid": lines.append(  # noqa: E731
        f"  {a} -> {b}{_dot.attrs(label=label, style=style)};")
    node("t", f"t: ember.Tensor (THPVariable)\nob_refcnt {sys.getrefcount(t) - 1}",
         "#c5e1a5", "ellipse")
    node("v", "view = t.view(2, 3)\n(THPVariable)", "#c5e1a5", "ellipse")
    node("tt", f"THTensor of t\nrefcount {tensor_counts[1]}")
    node("vt", f"THTensor of view\nrefcount {_thtensor(view).refcount}")
    node("s", f"THStorage\nrefcount {storage_counts[2]}\n{cpu.nbytes} bytes")
    counted = "static: not counted" if allocator.is_static else f"refcount {allocator.refcount}"
    node("alloc", f"THAllocator '{allocator.name.decode()}'\n({counted})", "#90caf9")
    node("np", "t.numpy(): ndarray\nbase = UntypedStorage (THPStorage)", "#ffcc80")
    node("dl", "t.__dlpack__(): capsule 'dltensor'\ncontext DLPackExport", "#ffcc80")
    edge("t", "tt", "cdata: +1 THTensor.refcount")
    edge("v", "vt", "cdata: +1")
    edge("dl", "tt", f"+{tensor_counts[1] - tensor_counts[0]} THTensor.refcount")
    edge("tt", "s", "storage: +1 THStorage.refcount")
    edge("vt", "s", f"storage: +{storage_counts[1] - storage_counts[0]}")
    edge("np", "s", f"base's cdata: +{storage_counts[2] - storage_counts[1]}")
    edge("s", "alloc", "allocator (frees data)")
    node("a", f"a = np.zeros(4): ndarray\nob_refcnt {array_refs[1] - 1}", "#ffcc80", "ellipse")
    node("w", "ember.from_numpy(a)\n(THPVariable)", "#c5e1a5", "ellipse")
    node("wt", f"THTensor\nrefcount {_thtensor(wrapped).refcount}")
    node("ws", f"THStorage\nrefcount {foreign.refcount}\nallocator NULL, deleter set"
         if not foreign.allocator and foreign.deleter else "THStorage")
    node("buf", "deleter context: Py_buffer\n(releases the buffer)", "#90caf9")
    edge("w", "wt", "cdata: +1")
    edge("wt", "ws", "storage: +1")
    edge("ws", "buf", "deleter_context: called once")
    edge("buf", "a", f"view.obj: +{array_refs[1] - array_refs[0]} ob_refcnt", "dashed")
    del capsule, exported, view, wrapped
    return _dot.digraph("ownership", lines)


# ---------------------------------------------------------------------------
# (c) Stride grids


def _touched(view):
    """{storage index: [positions in the view's row-major order]}."""
    cells = {}
    ranges = [range(size) for size in view.shape]
    for position, index in enumerate(itertools.product(*ranges)):
        element = view.storage_offset() + sum(i * s for i, s in zip(index, view.stride()))
        cells.setdefault(element, []).append(position)
    return cells


def stride_grids():
    t = ember.arange(6.).view(2, 3)
    views = [("t", t), ("t[1]", t[1]), ("t[:, 1]", t[:, 1]), ("t.t()", t.t()),
             ("t[:, :1].expand(2, 3)", t[:, :1].expand(2, 3))]
    nelements = t.untyped_storage().nbytes() // t.element_size()
    rows = [[_cell("<b>storage index</b>", "#ffffff")]
            + [_cell(f"<b>{i}</b>", "#ffffff") for i in range(nelements)]]
    for text, view in views:
        assert view.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
        touched = _touched(view)
        label = (f"{_html(text)}<br/>size {tuple(view.shape)} stride {view.stride()}"
                 f"<br/>offset {view.storage_offset()}")
        row = [_cell(label, "#ffffff")]
        for element in range(nelements):
            positions = touched.get(element)
            row.append(_cell(", ".join(map(str, positions)), "#ffcc80") if positions
                       else _cell("", "#f5f5f5"))
        rows.append(row)
    title = ("t = ember.arange(6.).view(2, 3): the view's elements, in row-major "
             "order, at the storage index each reads")
    return _table_picture("stride_grids", rows, title)


# ---------------------------------------------------------------------------
# (d) Register lifetimes


def scale(x, n: int):
    if n > 0:
        y = x * n
    else:
        y = -x
    return y.t().t() + 1


def _holding(program):
    """For each instruction, the registers that may hold a value when it
    starts (a forward dataflow over flow_effects: union over the paths)."""
    from ember.jit.bytecode import flow_effects
    holding = [set() for _ in program.instructions]
    holding[0] = set(range(program.nargs))
    work = [0]
    while work:
        pc = work.pop()
        for successor, written, dropped in flow_effects(program, pc)[1]:
            after = (holding[pc] - set(dropped)) | set(written)
            if successor < len(holding) and not after <= holding[successor]:
                holding[successor] |= after
                work.append(successor)
    return holding


def register_lifetimes(program):
    """A grid: one row per register, one column per instruction; D where an
    instruction writes the register, R where it reads it, X where a DROP
    empties it (from bytecode.flow_effects), shaded while it holds a value."""
    from ember.jit.bytecode import Op, flow_effects
    marks = {}
    for pc in range(len(program.instructions)):
        reads, successors = flow_effects(program, pc)
        for reg in reads:
            marks[reg, pc] = "R"
        for _, written, dropped in successors:
            for reg in written:
                marks[reg, pc] = "RD" if marks.get((reg, pc)) == "R" else "D"
            for reg in dropped:
                marks[reg, pc] = "X"
    holding = _holding(program)
    colours = {"D": "#a5d6a7", "R": "#90caf9", "RD": "#ce93d8", "X": "#ef9a9a"}
    header = [_cell("", "#ffffff")] + [
        _cell(f"<b>{pc}</b><br/>{Op(ins[0]).name}", "#ffffff")
        for pc, ins in enumerate(program.instructions)]
    rows = [header]
    names = program.arg_names or ()
    for reg in range(program.nregs):
        label = f"r{reg}" + (f" ({names[reg]})" if reg < len(names) else "")
        row = [_cell(label, "#ffffff")]
        for pc in range(len(program.instructions)):
            mark = marks.get((reg, pc), "")
            live = "#f1f8e9" if reg in holding[pc] else "#ffffff"
            row.append(_cell(mark, colours.get(mark, live)))
        rows.append(row)
    title = (f"registers of {program.name}: D defines, R reads, X is the DROP that "
             "ends the value; shaded where some path leaves it holding one")
    return _table_picture("register_lifetimes", rows, title)


def _scripted_scale():
    return ember.jit.script(scale)


# ---------------------------------------------------------------------------
# (e) Autograd graphs and IR graphs


def chain_rule():
    """loss = (c * c + 1) ** 2 written as three nodes: chapter 10's example."""
    c = ember.tensor(3.0, requires_grad=True)
    u = c * c
    v = u + 1
    loss = v * v
    return autograd_to_dot(loss, params={"c": c})


def autograd_mlp():
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(2, 4), ember.nn.Tanh(), ember.nn.Linear(4, 2))
    inputs = ember.randn(8, 2)
    targets = ember.zeros(8, dtype=ember.int64)
    loss = ember.nn.functional.cross_entropy(model(inputs), targets)
    return autograd_to_dot(loss, params=dict(model.named_parameters()))


def ir_scale():
    return _scripted_scale().graph_for(ember.ones(2, 2), 3).to_dot()


def gelu(x, w):
    h = x * w
    return 0.5 * h * (1.0 + (0.7978845608 * (h + 0.044715 * h * h * h)).tanh())


def ir_gelu():
    x = ember.ones(4, 4)
    return ember.jit.script(gelu).graph_for(x, x).to_dot()


def registers_scale():
    return register_lifetimes(_program_for(_scripted_scale(), ember.ones(2, 2), 3))


def _program_for(scripted, *args):
    """The bytecode Program that runs for `args` (code_for's, as an object)."""
    from ember.jit.function import argument_signature
    bound = scripted.parameters.bind(args, {})
    key = argument_signature(bound, ember._C.is_grad_enabled())
    compiled = scripted._specialisations.get(key) or scripted._specialise(key, bound)
    return compiled.program


PICTURES_BY_NAME = {
    "byte_map": byte_map,
    "ownership": ownership,
    "stride_grids": stride_grids,
    "register_lifetimes": registers_scale,
    "chain_rule": chain_rule,
    "autograd_mlp": autograd_mlp,
    "ir_scale": ir_scale,
    "ir_gelu": ir_gelu,
}


def generate(names=None):
    """{name: DOT text} of the pictures (all by default)."""
    gc.collect()
    return {name: PICTURES_BY_NAME[name]() for name in (names or PICTURES_BY_NAME)}


def write(directory=PICTURES, render=True):
    """Writes NAME.dot (and NAME.svg when `render`) for every picture."""
    os.makedirs(directory, exist_ok=True)
    for name, text in generate().items():
        path = pathlib.Path(directory) / f"{name}.dot"
        path.write_text(text)
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        if render:
            _dot.render_svg(text, path.with_suffix(".svg"))
            print(path.with_suffix(".svg").relative_to(ROOT)
                  if path.is_relative_to(ROOT) else path.with_suffix(".svg"))


if __name__ == "__main__":
    write(render="--no-svg" not in sys.argv[1:])
