"""The static types of the script IR.

Every Value in a graph has one of these types.  They follow TorchScript's
(its language reference lists them): Tensor, int, float, bool, str, None,
List[T], Tuple[T1, ...], Optional[T], plus `number` (an int or a float,
what `Tensor.item()` gives) and `dtype`.

A TensorType may be *refined* with what is known about the tensor: its dtype
and number of dimensions.  The front end only knows "Tensor"; a compiled
specialisation (Note [Specialisation] in function.py) refines the inputs from
the arguments of a call, and type propagation carries the refinement through
the ops it understands.  Passes that are exact only for some dtypes (the
`x + 0 -> x` family) or ranks (`t(t(x)) -> x`) read the refinement.
"""


class JitType:
    """Base class.  Types are immutable values, compared by structure."""

    __slots__ = ()

    def _key(self):
        return ()

    def __eq__(self, other):
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self):
        return hash((type(self).__name__, self._key()))

    def __repr__(self):
        return str(self)

    def is_subtype_of(self, other):
        """Whether a value of this type may stand where `other` is expected."""
        if isinstance(other, AnyType) or self == other:
            return True
        if isinstance(other, OptionalType):
            return isinstance(self, NoneType) or self.is_subtype_of(other.elem)
        if isinstance(other, NumberType):
            return isinstance(self, (IntType, FloatType, NumberType, BoolType))
        if isinstance(other, FloatType):
            return isinstance(self, IntType)  # an int is accepted for a float
        if isinstance(other, TensorType) and isinstance(self, TensorType):
            return True  # refinements never make a tensor unacceptable
        if isinstance(other, ListType) and isinstance(self, ListType):
            return self.elem.is_subtype_of(other.elem) and (
                self.elem == other.elem or isinstance(other.elem, TensorType))
        if isinstance(other, TupleType) and isinstance(self, TupleType):
            return len(self.elems) == len(other.elems) and all(
                a.is_subtype_of(b) for a, b in zip(self.elems, other.elems))
        return False


class _Simple(JitType):
    __slots__ = ()
    name = "?"

    def __str__(self):
        return self.name


class IntType(_Simple):
    __slots__ = ()
    name = "int"


class FloatType(_Simple):
    __slots__ = ()
    name = "float"


class BoolType(_Simple):
    __slots__ = ()
    name = "bool"


class StrType(_Simple):
    __slots__ = ()
    name = "str"


class NoneType(_Simple):
    __slots__ = ()
    name = "NoneType"


class NumberType(_Simple):
    """An int or a float, decided at run time (Tensor.item())."""
    __slots__ = ()
    name = "number"


class DtypeType(_Simple):
    __slots__ = ()
    name = "dtype"


class AnyType(_Simple):
    __slots__ = ()
    name = "Any"


class TensorType(JitType):
    """A tensor, optionally refined by dtype (an ember.dtype) and ndim."""

    __slots__ = ("dtype", "ndim")

    def __init__(self, dtype=None, ndim=None):
        self.dtype = dtype
        self.ndim = ndim

    def _key(self):
        return (str(self.dtype), self.ndim)

    @property
    def is_refined(self):
        return self.dtype is not None or self.ndim is not None

    def with_refinement(self, dtype=None, ndim=None):
        return TensorType(dtype, ndim)

    def __str__(self):
        if not self.is_refined:
            return "Tensor"
        parts = []
        if self.dtype is not None:
            parts.append(str(self.dtype).replace("ember.", ""))
        if self.ndim is not None:
            parts.append(f"{self.ndim}d")
        return f"Tensor({', '.join(parts)})"


class ListType(JitType):
    __slots__ = ("elem",)

    def __init__(self, elem):
        self.elem = elem

    def _key(self):
        return (self.elem,)

    def __str__(self):
        return f"List[{self.elem}]"


class TupleType(JitType):
    __slots__ = ("elems",)

    def __init__(self, elems):
        self.elems = tuple(elems)

    def _key(self):
        return self.elems

    def __str__(self):
        return f"Tuple[{', '.join(map(str, self.elems))}]"


class OptionalType(JitType):
    __slots__ = ("elem",)

    def __init__(self, elem):
        self.elem = elem

    def _key(self):
        return (self.elem,)

    def __str__(self):
        return f"Optional[{self.elem}]"


Int = IntType()
Float = FloatType()
Bool = BoolType()
Str = StrType()
NoneT = NoneType()
Number = NumberType()
Dtype = DtypeType()
Any = AnyType()
Tensor = TensorType()


def is_tensor(t):
    return isinstance(t, TensorType)


def is_number(t):
    return isinstance(t, (IntType, FloatType, BoolType, NumberType))


def unify(a, b):
    """The type two values merged at an If or Loop take, or None."""
    if a == b:
        return a
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return TensorType(a.dtype if a.dtype == b.dtype else None,
                          a.ndim if a.ndim == b.ndim else None)
    if isinstance(a, NoneType) and not isinstance(b, NoneType):
        return b if isinstance(b, OptionalType) else OptionalType(b)
    if isinstance(b, NoneType) and not isinstance(a, NoneType):
        return a if isinstance(a, OptionalType) else OptionalType(a)
    if isinstance(a, OptionalType) and b.is_subtype_of(a):
        return a
    if isinstance(b, OptionalType) and a.is_subtype_of(b):
        return b
    if isinstance(a, ListType) and isinstance(b, ListType):
        elem = unify(a.elem, b.elem)
        return ListType(elem) if elem is not None else None
    if isinstance(a, TupleType) and isinstance(b, TupleType) \
            and len(a.elems) == len(b.elems):
        elems = [unify(x, y) for x, y in zip(a.elems, b.elems)]
        return None if None in elems else TupleType(elems)
    return None


def type_of_value(value):
    """The JitType of a Python value given to a script (or None)."""
    from .._tensor import Tensor as _Tensor
    from .. import dtype as _dtype
    if isinstance(value, _Tensor):
        return TensorType(value.dtype, value.dim())
    if isinstance(value, bool):
        return Bool
    if isinstance(value, int):
        return Int
    if isinstance(value, float):
        return Float
    if isinstance(value, str):
        return Str
    if value is None:
        return NoneT
    if isinstance(value, _dtype):
        return Dtype
    if isinstance(value, tuple):
        elems = [type_of_value(v) for v in value]
        return None if None in elems else TupleType(elems)
    if isinstance(value, list):
        if not value:
            return None
        elems = [type_of_value(v) for v in value]
        elem = elems[0]
        for other in elems[1:]:
            elem = unify(elem, other) if elem is not None else None
        return ListType(elem) if elem is not None else None
    return None


def parse_type(text):
    """'List[Tuple[int, Tensor]]' -> the type (inverse of str())."""
    text = text.strip()
    simple = {"int": Int, "float": Float, "bool": Bool, "str": Str,
              "NoneType": NoneT, "number": Number, "dtype": Dtype,
              "Any": Any, "Tensor": Tensor}
    if text in simple:
        return simple[text]
    head, _, rest = text.partition("[")
    if not rest.endswith("]"):
        if head.startswith("Tensor(") and head.endswith(")"):
            return _parse_refined_tensor(head[len("Tensor("):-1])
        raise ValueError(f"unknown type {text!r}")
    args = _split_type_args(rest[:-1])
    if head == "List" and len(args) == 1:
        return ListType(parse_type(args[0]))
    if head == "Optional" and len(args) == 1:
        return OptionalType(parse_type(args[0]))
    if head == "Tuple":
        return TupleType([parse_type(a) for a in args if a.strip()])
    raise ValueError(f"unknown type {text!r}")


def _parse_refined_tensor(inner):
    from .. import _C
    dtype = ndim = None
    for part in (p.strip() for p in inner.split(",")):
        if part.endswith("d") and part[:-1].isdigit():
            ndim = int(part[:-1])
        elif isinstance(getattr(_C, part, None), _C.dtype):
            dtype = getattr(_C, part)
        else:
            raise ValueError(f"unknown tensor refinement {part!r}")
    return TensorType(dtype, ndim)


def _split_type_args(text):
    args, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(text[start:i])
            start = i + 1
    args.append(text[start:])
    return args
