"""What a call node may run, and what the compiler knows about it.

Note [Callees]
~~~~~~~~~~~~~~
A call node names what it runs by a *callee*: a qualified name such as
"ember.mul", "Tensor.t" (a method, self first), "F.linear", "operator.add",
"math.sqrt", "builtins.len", "attr.shape" (reading an attribute) or
"prim.list" (a helper below).  `resolve(name)` maps it to the callable
through one table built from those namespaces, and nothing else: a saved
program names its callees, and loading one can never reach a callable
outside the table (no getattr on arbitrary strings, no eval).

For each callee the compiler needs a few facts:
  * its printed kind ("aten::mul", "prim::ListConstruct"), TorchScript-style;
  * whether it is pure (deterministic, no side effect, no in-place write):
    CSE, DCE and constant folding only touch pure calls;
  * whether it is elementwise with a fused-kernel opcode (fusion.py);
  * whether its result aliases an input (views);
  * its result type, from its inputs' types (`result_types`).
"""

import builtins
import functools
import math
import operator
import re
import string

from .. import _C
from . import types as T

# ---------------------------------------------------------------------------
# prim helpers: small Python functions for what has no library function.


def _list(*items):
    return list(items)


def _tuple(*items):
    return tuple(items)


def _list_append(lst, item):
    lst.append(item)


def _tensor_to_bool(value):
    """`if t:` on a one-element tensor (TorchScript's aten::Bool)."""
    return builtins.bool(value)


# Note [Format strings in a program]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# An f-string compiles to prim.format(fmt, *values), and a program file
# holds fmt as data.  str.format would walk the fields' attribute and
# index chains ("{0.backward.__globals__[os].environ}"): from any tensor
# to any global.  So a format string may hold only plain positional
# fields -- "{}" or "{0}" -- with a conversion of !s, !r or !a and a
# standard format spec without nested fields, a width and precision of at
# most MAX_FORMAT_WIDTH; and prim.format does not call str.format: it
# applies each field itself (conversion, then format(value, spec), which
# reads no attribute of the value beyond its type's __format__).  The
# front end checks its f-strings with check_format_string, the loader
# checks the constants a file passes as format strings, and prim.format
# checks the string it is given at run time (it may be computed).

MAX_FORMAT_WIDTH = 10_000

_FORMAT_SPEC = re.compile(
    r"(?:.?[<>=^])?[-+ ]?z?#?0?(?P<width>[0-9]*)[,_]?"
    r"(?:\.(?P<precision>[0-9]+))?[bcdeEfFgGnosxX%]?", re.DOTALL)
_CONVERSIONS = {None: None, "s": builtins.str, "r": builtins.repr,
                "a": builtins.ascii}


def check_format_string(fmt):
    """The pieces of a format string a program may use, as a tuple of
    (literal text, field index or None, conversion or None, spec); raises
    ValueError for anything else (Note [Format strings in a program])."""
    if type(fmt) is not str:  # exactly str: the cache hashes it
        raise TypeError(f"a format string must be a str, not {type(fmt).__name__}")
    return _parse_format_string(fmt)


@functools.lru_cache(maxsize=256)
def _parse_format_string(fmt):
    pieces, automatic, numbered = [], 0, False
    for literal, field, spec, conversion in string.Formatter().parse(fmt):
        if field is None:
            pieces.append((literal, None, None, ""))
            continue
        if field == "":
            if numbered:
                raise ValueError("cannot switch from manual field specification "
                                 "to automatic field numbering")
            index, automatic = automatic, automatic + 1
        elif re.fullmatch(r"[0-9]{1,6}", field):
            if automatic:
                raise ValueError("cannot switch from automatic field numbering "
                                 "to manual field specification")
            index, numbered = int(field), True
        else:
            raise ValueError(f"format field {field!r}: a program may only use "
                             f"plain positional fields ('{{}}' or '{{0}}'), no "
                             f"names, attributes or indexing")
        if conversion not in _CONVERSIONS:
            raise ValueError(f"format field conversion !{conversion}: only !s, "
                             f"!r and !a are allowed")
        _check_format_spec(spec)
        pieces.append((literal, index, conversion, spec))
    return tuple(pieces)


def _check_format_spec(spec):
    match = _FORMAT_SPEC.fullmatch(spec)
    if match is None or "{" in spec or "}" in spec:
        raise ValueError(f"format spec {spec!r}: only a standard format spec "
                         f"without nested fields is allowed")
    for part in ("width", "precision"):
        digits = match.group(part)
        if digits and int(digits) > MAX_FORMAT_WIDTH:
            raise ValueError(f"format spec {spec!r}: {part} above "
                             f"{MAX_FORMAT_WIDTH}")


def _format(fmt, *args):
    """An f-string: fmt's fields filled from args, one by one (never
    str.format: Note [Format strings in a program])."""
    out = []
    for literal, index, conversion, spec in check_format_string(fmt):
        out.append(literal)
        if index is None:
            continue
        if index >= len(args):
            raise IndexError(f"Replacement index {index} out of range for "
                             f"positional args tuple")
        value = args[index]
        if conversion is not None:
            value = _CONVERSIONS[conversion](value)
        out.append(builtins.format(value, spec))
    return "".join(out)


def _unwrap_optional(value):
    if value is None:
        raise AssertionError("Unwrapping null optional")
    return value


def _range_length(start, stop, step):
    """How many values range(start, stop, step) has: a for loop's trip count."""
    if step == 0:
        raise ValueError("range() arg 3 must not be zero")
    return len(range(start, stop, step))


def _slice(start, stop, step):
    """`a:b:c` in an index (a builtins.slice; its parts are graph values)."""
    return slice(start, stop, step)


def _ellipsis():
    """`...` in an index."""
    return Ellipsis


def _list_setitem(lst, index, value):
    """`xs[i] = v` on a list (in place: named __setitem__, so is_inplace
    sees the write)."""
    lst[index] = value


def _print(*values):
    """`print(...)` in a script (TorchScript's prim::Print)."""
    builtins.print(*values)


PRIM_HELPERS = {
    "prim.print": (_print, "prim::Print"),
    "prim.__setitem__": (_list_setitem, "aten::_set_item"),
    "prim.slice": (_slice, "prim::SliceConstruct"),
    "prim.ellipsis": (_ellipsis, "prim::Ellipsis"),
    "prim.list": (_list, "prim::ListConstruct"),
    "prim.tuple": (_tuple, "prim::TupleConstruct"),
    "prim.list_append": (_list_append, "aten::append"),
    "prim.bool": (_tensor_to_bool, "aten::Bool"),
    "prim.format": (_format, "aten::format"),
    "prim.unwrap_optional": (_unwrap_optional, "prim::unchecked_unwrap_optional"),
    "prim.range_length": (_range_length, "aten::__range_length"),
}

OPERATOR_NAMES = (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul",
    "neg", "pos", "invert", "not_", "abs", "eq", "ne", "lt", "le", "gt", "ge",
    "and_", "or_", "xor", "lshift", "rshift", "getitem", "contains", "is_",
    "is_not", "truth", "iadd", "isub", "imul", "itruediv", "ifloordiv",
    "imod", "ipow", "imatmul", "iand", "ior", "ixor",
)

INPLACE_OPERATORS = frozenset({
    "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow",
    "imatmul", "iand", "ior", "ixor"})

# operator.X on tensors is the same op as ember.Y: how the kind is printed.
OPERATOR_KINDS = {
    "truediv": "div", "floordiv": "floor_divide", "mod": "remainder",
    "not_": "__not__", "and_": "__and__", "or_": "__or__", "xor": "__xor__",
    "invert": "bitwise_not", "lshift": "__lshift__", "rshift": "__rshift__",
    "getitem": "__getitem__", "contains": "__contains__", "is_": "__is__",
    "is_not": "__isnot__", "truth": "Bool",
}

MATH_FUNCTIONS = (
    "sqrt", "exp", "log", "log2", "log10", "log1p", "expm1", "sin", "cos",
    "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "floor",
    "ceil", "trunc", "fabs", "pow", "hypot", "isnan", "isinf", "isfinite",
    "copysign", "fmod", "erf", "erfc", "gamma", "lgamma", "degrees", "radians",
)
MATH_CONSTANTS = ("pi", "e", "tau", "inf", "nan")

BUILTIN_FUNCTIONS = ("len", "int", "float", "bool", "abs", "min", "max",
                     "round", "str")

# Tensor attributes readable in a script, and their types.
TENSOR_ATTRIBUTES = {
    "shape": T.ListType(T.Int), "ndim": T.Int, "dtype": T.Dtype,
    "requires_grad": T.Bool, "is_leaf": T.Bool, "T": T.Tensor,
    "is_cuda": T.Bool,
}

# Methods a script may not call: they leave the tensor world, mutate
# autograd state or hand out raw memory.
DENIED_METHODS = frozenset({
    "backward", "register_hook", "retain_grad", "requires_grad_", "numpy",
    "tolist", "data_ptr", "untyped_storage", "detach_", "type", "cpu",
    "new_tensor", "cuda", "pin_memory", "share_memory_",
})


# ember functions a script may not call: files, global state, foreign memory.
DENIED_FUNCTIONS = frozenset({
    "save", "load", "set_printoptions", "from_numpy", "from_dlpack",
    "manual_seed", "set_num_threads", "set_default_dtype", "set_grad_enabled",
    "seed", "set_rng_state", "compile", "set_default_device",
    "set_float32_matmul_precision", "use_deterministic_algorithms",
})


def _public_tensor_methods():
    from .._tensor import Tensor
    names = {}
    for name in dir(Tensor):
        if name.startswith("_") and name not in ("__getitem__", "__setitem__"):
            continue
        if name in DENIED_METHODS or name in TENSOR_ATTRIBUTES:
            continue
        attr = getattr(Tensor, name, None)
        if callable(attr) and not isinstance(attr, type):
            names[name] = attr
    return names


_TABLE = None


def callee_table():
    """{qualified name: callable}: everything a call node may run."""
    global _TABLE
    if _TABLE is not None:
        return _TABLE
    import ember
    from ..nn import functional as F
    table = {}
    for name in dir(ember):
        value = getattr(ember, name)
        if not name.startswith("_") and callable(value) \
                and not isinstance(value, type) and name not in DENIED_FUNCTIONS:
            table[f"ember.{name}"] = value
    for name, method in _public_tensor_methods().items():
        table[f"Tensor.{name}"] = method
    for name in TENSOR_ATTRIBUTES:
        table[f"attr.{name}"] = operator.attrgetter(name)
    for name in dir(F):
        value = getattr(F, name)
        if not name.startswith("_") and callable(value) \
                and not isinstance(value, type):   # F.tanh is ember.tanh itself
            table[f"F.{name}"] = value
    for name in OPERATOR_NAMES:
        table[f"operator.{name}"] = getattr(operator, name)
    for name in MATH_FUNCTIONS:
        table[f"math.{name}"] = getattr(math, name)
    for name in BUILTIN_FUNCTIONS:
        table[f"builtins.{name}"] = getattr(builtins, name)
    for name, (fn, _) in PRIM_HELPERS.items():
        table[name] = fn
    _TABLE = table
    return table


def resolve(callee):
    """The callable for a callee name; KeyError for anything not allowed."""
    table = callee_table()
    if callee not in table:
        raise KeyError(f"{callee!r} is not an operator a script may call")
    return table[callee]


def kind_of(callee):
    """The printed node kind: 'ember.mul' -> 'aten::mul'."""
    if callee in PRIM_HELPERS:
        return PRIM_HELPERS[callee][1]
    namespace, _, name = callee.partition(".")
    if namespace == "operator":
        name = OPERATOR_KINDS.get(name, name)
    elif namespace == "attr":
        return f"prim::{name}"
    elif namespace == "builtins" and name in ("int", "float", "bool", "str"):
        return f"aten::{name.capitalize()}"
    return f"aten::{name}"


def method_name(callee):
    return callee.partition(".")[2]


# ---------------------------------------------------------------------------
# Facts about callees

NONDETERMINISTIC = frozenset({
    "ember.rand", "ember.randn", "ember.randint", "ember.rand_like",
    "ember.randn_like", "F.dropout", "ember.empty", "ember.empty_like",
    "Tensor.new_empty",
    "prim.print",  # a side effect: never dropped, merged or folded
})

# Results that share memory with their first input.
VIEW_NAMES = frozenset({
    "view", "view_as", "reshape", "reshape_as", "t", "transpose", "permute",
    "squeeze", "unsqueeze", "expand", "expand_as", "narrow", "select",
    "diagonal", "flatten", "unfold", "as_strided", "detach", "T",
    "__getitem__", "getitem", "split", "chunk", "unbind", "tensor_split",
    "contiguous", "to", "float", "double", "long", "int", "bool", "short",
    "byte", "char", "real",
})

ELEMENTWISE_NAMES = frozenset({
    "add", "sub", "mul", "div", "truediv", "neg", "abs", "maximum",
    "minimum", "pow", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh",
    "sigmoid", "relu", "reciprocal", "square", "expm1", "log1p", "erf",
    "silu", "clamp", "subtract", "multiply", "divide", "negative",
    "true_divide", "absolute", "exp2", "log2", "log10", "tan", "sinh",
    "cosh", "asin", "acos", "atan", "erfc", "gelu",
})

# Operator aliases a fused kernel knows under its eager name.
ELEMENTWISE_ALIASES = {
    "truediv": "div", "subtract": "sub", "multiply": "mul", "divide": "div",
    "true_divide": "div", "negative": "neg", "absolute": "abs",
}


def is_inplace(callee, kwnames=()):
    """A call that writes into one of its inputs."""
    name = method_name(callee)
    if callee.startswith("operator.") and name in INPLACE_OPERATORS:
        return True  # x += y: in place on tensors (Tensor.__iadd__)
    return ("out" in kwnames or "inplace" in kwnames or name == "__setitem__"
            or callee == "prim.list_append"
            or (callee.startswith(("Tensor.", "ember."))
                and name.endswith("_") and not name.startswith("_")))


def is_pure(callee, kwnames=()):
    """Deterministic, no side effect, no write: safe to share, drop, fold."""
    return callee not in NONDETERMINISTIC and not is_inplace(callee, kwnames) \
        and not callee.startswith("builtins.str")


def is_view(callee):
    namespace, _, name = callee.partition(".")
    return namespace in ("Tensor", "ember", "operator", "attr") \
        and name in VIEW_NAMES


def elementwise_name(callee, kwnames=()):
    """The fused-kernel op name of a plain elementwise call, or None."""
    namespace, _, name = callee.partition(".")
    if namespace not in ("ember", "Tensor", "operator", "F") or kwnames:
        return None
    if name not in ELEMENTWISE_NAMES:
        return None
    return ELEMENTWISE_ALIASES.get(name, name)


# ---------------------------------------------------------------------------
# Result types

_INT_RESULT_METHODS = frozenset({"dim", "numel", "ndimension", "nelement",
                                 "element_size", "storage_offset",
                                 "get_num_threads"})
_BOOL_RESULT_METHODS = frozenset({"is_contiguous", "is_floating_point",
                                  "can_cast", "is_tensor"})
_TUPLE2_METHODS = frozenset({"sort", "topk", "kthvalue", "std_mean",
                             "var_mean", "aminmax"})
_LIST_METHODS = frozenset({"unbind", "split", "chunk", "tensor_split"})

_COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})


def _category(t):
    """0 bool, 1 int, 2 float, None unknown (for number promotion)."""
    if isinstance(t, T.BoolType):
        return 0
    if isinstance(t, T.IntType):
        return 1
    if isinstance(t, T.FloatType):
        return 2
    return None


def _number_result(name, a, b):
    if name in _COMPARISONS or name in ("not_", "is_", "is_not", "contains",
                                        "truth"):
        return T.Bool
    if name == "truediv":
        return T.Float
    cats = [_category(a), _category(b) if b is not None else 0]
    if 2 in cats:
        return T.Float  # float op number is a float
    if None in cats:
        return T.Number
    top = max(cats)
    if name in ("and_", "or_", "xor") and top == 0:
        return T.Bool
    if top == 2:
        return T.Float
    if name == "pow":
        return T.Number  # int ** negative int is a float
    return T.Int


def _dtype_category(dtype):
    if dtype is None:
        return None
    if dtype == _C.bool:
        return 0
    return 2 if dtype in (_C.float32, _C.float64) else 1


def elementwise_refinement(name, types):
    """TensorType of an elementwise op's result from its inputs' types,
    refined only where the rule is certain (Note [Types] in types.py)."""
    tensors = [t for t in types if isinstance(t, T.TensorType)]
    numbers = [t for t in types if T.is_number(t)]
    if not tensors or len(tensors) + len(numbers) != len(types):
        return T.Tensor
    dtypes = {t.dtype for t in tensors}
    ndims = [t.ndim for t in tensors]
    ndim = None if None in ndims else max(ndims)
    if len(dtypes) != 1 or None in dtypes:
        return T.TensorType(None, ndim)
    dtype = dtypes.pop()
    if name in _COMPARISONS:
        return T.TensorType(_C.bool, ndim)
    category = _dtype_category(dtype)
    for number in numbers:
        c = _category(number)
        if c is None or c > category:
            return T.TensorType(None, ndim)
    if name in ("div", "truediv", "true_divide", "divide") and category != 2:
        return T.TensorType(None, ndim)
    if name in ELEMENTWISE_NAMES and name not in (
            "add", "sub", "mul", "neg", "abs", "maximum", "minimum", "relu",
            "square", "clamp", "subtract", "multiply", "negative",
            "absolute") and category != 2:
        return T.TensorType(None, ndim)  # int -> default float
    if category == 0 and name in ("add", "sub", "mul", "square", "neg"):
        return T.TensorType(None, ndim)
    return T.TensorType(dtype, ndim)


_SAME_RANK_VIEWS = frozenset({"t", "transpose", "contiguous", "clone",
                              "detach", "T", "view_as", "expand_as"})
# nn layers whose result has their input's dtype and number of dimensions
# (max pooling is not here: return_indices=True gives a tuple)
_SAME_RANK_LAYERS = frozenset({"F.conv1d", "F.conv2d", "F.conv3d", "F.batch_norm",
                               "F.avg_pool1d",
                               "F.avg_pool2d", "F.adaptive_avg_pool1d",
                               "F.adaptive_avg_pool2d"})


def result_types(callee, input_types, kwnames=()):
    """The output types of a call (one per output), TorchScript's rules."""
    namespace, _, name = callee.partition(".")
    positional = input_types[:len(input_types) - len(kwnames)]
    first = positional[0] if positional else None
    if callee in ("prim.list",):
        elem = input_types[0] if input_types else T.Tensor
        for t in input_types[1:]:
            elem = T.unify(elem, t) or T.Any
        return [T.ListType(elem)]
    if callee == "prim.tuple":
        return [T.TupleType(input_types)]
    if callee == "prim.list_append":
        return [T.NoneT]
    if callee == "prim.range_length":
        return [T.Int]
    if callee in ("prim.bool", "builtins.bool"):
        return [T.Bool]
    if callee == "prim.format" or callee == "builtins.str":
        return [T.Str]
    if callee == "prim.unwrap_optional":
        t = input_types[0]
        return [t.elem if isinstance(t, T.OptionalType) else t]
    if namespace == "attr":
        return [TENSOR_ATTRIBUTES[name]]
    if namespace == "math":
        if name in ("floor", "ceil", "trunc"):
            return [T.Int]
        if name in ("isnan", "isinf", "isfinite"):
            return [T.Bool]
        return [T.Float]
    if namespace == "builtins":
        if name == "len":
            return [T.Int]
        if name in ("int", "round"):
            return [T.Int]
        if name == "float":
            return [T.Float]
        if name in ("abs", "min", "max"):
            args = input_types
            if len(args) == 1 and isinstance(args[0], T.ListType):
                return [args[0].elem]
            cat = [_category(t) for t in args]
            if None in cat:
                return [T.Number]
            return [T.Float if max(cat) == 2 else T.Int]
    if namespace == "operator":
        if name == "getitem":
            return [_getitem_type(input_types)]
        if name in ("is_", "is_not", "contains", "not_", "truth"):
            return [T.Bool]
        if not any(isinstance(t, T.TensorType) for t in positional):
            return [_number_result(name, positional[0],
                                   positional[1] if len(positional) > 1 else None)]
        return [elementwise_refinement(OPERATOR_KINDS.get(name, name),
                                       positional)]
    if callee in _SAME_RANK_LAYERS and isinstance(first, T.TensorType):
        return [first]
    if namespace in ("ember", "Tensor"):
        if name in _INT_RESULT_METHODS:
            return [T.Int]
        if name in _BOOL_RESULT_METHODS:
            return [T.Bool]
        if name == "item":
            return [T.Number]
        if name == "size":
            return [T.Int if len(positional) > 1 else T.ListType(T.Int)]
        if name == "stride":
            return [T.Int if len(positional) > 1 else T.ListType(T.Int)]
        if name in ("max", "min") and len(input_types) > 1 and not (
                len(positional) > 1
                and isinstance(positional[1], T.TensorType)):
            return [T.TupleType([T.Tensor, T.Tensor])]
        if name in _TUPLE2_METHODS:
            return [T.TupleType([T.Tensor, T.Tensor])]
        if name in _LIST_METHODS:
            return [T.ListType(T.Tensor)]
        if name in ("__setitem__",) or (name.endswith("_") and namespace == "Tensor"
                                        and name not in ("__getitem__",)):
            if name == "__setitem__":
                return [T.NoneT]
            return [first if isinstance(first, T.TensorType) else T.Tensor]
        if name in ELEMENTWISE_NAMES or name in _COMPARISONS:
            return [elementwise_refinement(name, positional)]
        if name in _SAME_RANK_VIEWS and isinstance(first, T.TensorType):
            return [first]
        return [T.Tensor]
    return [T.Tensor]


def _getitem_type(types):
    container, index = types[0], types[1]
    if isinstance(container, T.ListType):
        if isinstance(index, T.IntType):
            return container.elem
        return container
    if isinstance(container, T.TupleType):
        return T.Any  # the front end types constant tuple indices itself
    if isinstance(container, T.StrType):
        return T.Str
    return T.Tensor
