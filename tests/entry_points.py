"""The C entry points of ember, and a valid call for each: shared by the
generated proof suites (test_reentrancy.py, test_threads.py,
test_api_fuzz.py).

The set of entry points comes from the extension's own tables, never from a
list written here: every operator function (`_C._public_functions`), every
C factory re-exported by `ember`, every tensor method that is an operator
(`op_method`) or a C method (`method_descriptor`), and the type slots.  A
new operator is therefore covered without touching this file: if it has no
argument template below it is called through the generic probes (a tensor,
two tensors, a tensor and a dim, ...), and test_reentrancy checks that only a
few entry points depend on them.

A template is a `Call` whose arguments are placeholders:

    T(3, 4)            a fresh float32 tensor of that shape (deterministic data)
    T(3, 4, dtype=..)  another dtype ("int64", "bool", ...)
    IDX(3, high=4)     an int64 index tensor with values in [0, high)
    MASK(3, 4)         a bool tensor
    PROB(3, 4)         a float32 tensor of probabilities in [0, 1)
    Int(1)             a number the entry point reads with __index__ (a dim,
                       a count, a size); a probe position
    Float(2.5)         a scalar it reads with __float__; a probe position
    Sizes([2, 3])      a sequence of ints (sizes, dims); a probe position,
                       and each item is one too
    Tensors([T.., T..]) a list of tensors (cat, stack, index_put_'s indices):
                       the list an evil item may clear

`materialize` turns a template into real arguments, either plain (the
reference call) or with one probe position replaced by an evil object built
by the caller.
"""

import contextlib
import json
import os
import subprocess
import sys

import numpy as np

import ember
from ember import _C

# ---- placeholders --------------------------------------------------------------


class T:
    def __init__(self, *shape, dtype="float32", kind="normal", high=None):
        self.shape, self.dtype, self.kind, self.high = shape, dtype, kind, high

    def __repr__(self):
        extra = "" if self.kind == "normal" else f", {self.kind}"
        return f"T{self.shape}:{self.dtype}{extra}"


def IDX(*shape, high):
    return T(*shape, dtype="int64", kind="index", high=high)


def MASK(*shape):
    return T(*shape, dtype="bool", kind="mask")


def PROB(*shape):
    return T(*shape, kind="prob")


class Int:
    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"Int({self.value})"


class Float:
    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"Float({self.value})"


class Sizes:
    def __init__(self, values, container=list):
        self.values, self.container = list(values), container

    def __repr__(self):
        return f"Sizes({self.values})"


class Tensors:
    def __init__(self, items):
        self.items = list(items)

    def __repr__(self):
        return f"Tensors({self.items})"


class Call:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs

    def __repr__(self):
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return "(" + ", ".join(parts) + ")"

    def probe_positions(self):
        """Every place an evil object can go: ('arg', i) / ('kw', name),
        optionally followed by an item index for a Sizes."""
        positions = []
        slots = [("arg", i, a) for i, a in enumerate(self.args)]
        slots += [("kw", k, v) for k, v in self.kwargs.items()]
        for where, key, value in slots:
            if isinstance(value, (Int, Float)):
                positions.append((where, key, None))
            elif isinstance(value, Sizes):
                positions.append((where, key, None))            # the whole sequence
                if value.values:
                    positions.append((where, key, 0))           # its first item
        return positions


# ---- the argument templates ------------------------------------------------------

M = T(3, 4)
M2 = T(3, 4)
IM = T(3, 4, dtype="int64")
IM2 = T(3, 4, dtype="int64")

_BINARY_FLOAT = """add sub subtract mul multiply div divide true_divide floor_divide remainder
    fmod pow atan2 arctan2 eq ne not_equal lt less le less_equal gt greater ge
    greater_equal logical_and logical_or logical_xor maximum minimum hypot copysign
    logaddexp logaddexp2 xlogy""".split()
_BINARY_INT = """bitwise_and bitwise_or bitwise_xor bitwise_left_shift
    bitwise_right_shift""".split()
_UNARY = """neg negative abs absolute sign positive exp exp2 expm1 log log2 log10 log1p
    sqrt rsqrt reciprocal sin cos tan asin acos atan asinh acosh atanh sinh cosh tanh
    sigmoid erf erfc
    silu frac floor ceil trunc relu square isnan isinf isfinite isposinf isneginf
    lgamma digamma _trigamma erfinv sinc _gelu_derivative _gelu_tanh_derivative
    contiguous clone detach detach_ zero_ t fliplr flipud msort nonzero argwhere
    bool byte char short int long float double""".split()
_UNARY_INT = ["bitwise_not"]
_UNARY_ANY = ["logical_not"]
_REDUCE_DIMS = "sum mean amax amin logsumexp count_nonzero".split()
_REDUCE_DIM = """prod argmax argmin all any softmax log_softmax cumsum cumprod logcumsumexp
    cummax cummin""".split()

TEMPLATES = {}


def _add(names, *calls):
    for name in names.split() if isinstance(names, str) else names:
        TEMPLATES.setdefault(name, []).extend(calls)


# PyTorch has no Scalar overload of these: `other` is always a tensor.
_BINARY_TENSOR_OTHER = "atan2 arctan2 maximum minimum hypot logaddexp logaddexp2".split()
for _name in _BINARY_FLOAT:
    _add([_name], Call(M, M2), Call(M, T(4), out=T(3, 4)))
    if _name not in _BINARY_TENSOR_OTHER:
        _add([_name], Call(M, Float(2.5)))
_add("add sub subtract", Call(M, M2, alpha=Float(2.0)))
_add("div divide", Call(M, M2, rounding_mode="floor"))
for _name in _BINARY_INT:
    _add([_name], Call(IM, IM2), Call(IM, Int(2)))
for _name in _UNARY:
    _add([_name], Call(M))
_add("exp sigmoid neg abs", Call(M, out=T(3, 4)))
_add(_UNARY_INT, Call(IM))
_add(_UNARY_ANY, Call(M))
_add("clamp clip", Call(M, min=Float(-0.5), max=Float(0.5)), Call(M, Float(-0.5)))
_add("nan_to_num", Call(M, nan=Float(1.0), posinf=Float(2.0), neginf=Float(-2.0)))
_add("round", Call(M, decimals=Int(1)))
_add("bincount", Call(IDX(6, high=4), T(6), minlength=Int(5)))
_add("histc", Call(M, Int(4), Float(-1.0), Float(1.0)))
_add("bucketize", Call(M, T(5), right=True))
_add("lerp", Call(M, M2, T(4)), Call(M, M2, Float(0.5)))
_add("addcmul addcdiv", Call(M, M2, T(4), value=Float(0.5)))
_add("gelu", Call(M, approximate="tanh"))
_add("where", Call(M, MASK(3, 4), M2), Call(M, MASK(3, 4), Float(1.5)))
for _name in _REDUCE_DIMS:
    _add([_name], Call(M, Sizes([0, 1])))
    if _name != "count_nonzero":
        _add([_name], Call(M, dim=Int(1), keepdim=True))
for _name in _REDUCE_DIM:
    _add([_name], Call(M, dim=Int(1)))
_add("sum prod all any argmax max min", Call(M))
_add("max min", Call(M, Int(1), keepdim=True), Call(M, M2))
_add("var std var_mean std_mean", Call(M, dim=Sizes([0]), correction=Int(0)), Call(M))
_add("norm", Call(M, p=Float(3.0), dim=Sizes([1])), Call(M))
_add("multinomial", Call(PROB(3, 4), Int(2)), Call(PROB(4), Int(3), replacement=True))
_add("bernoulli", Call(PROB(3, 4)), Call(M, Float(0.5)))
_add("poisson", Call(PROB(3, 4)))
_add("uniform_", Call(M, Float(-1.0), Float(1.0)))
_add("normal_", Call(M, Float(0.5), Float(2.0)))
_add("random_", Call(M, Int(3), Int(10)), Call(IM, Int(5)))
_add("exponential_", Call(M, Float(2.0)))
_add("bernoulli_", Call(M, Float(0.3)), Call(M, PROB(4)))
_add("matmul mm", Call(T(3, 4), T(4, 5)))
_add("bmm", Call(T(2, 3, 4), T(2, 4, 5)))
_add("mv", Call(T(3, 4), T(4)))
_add("dot vdot", Call(T(4), T(4)))
_add("outer ger", Call(T(3), T(4)))
_add("addmm addmm_", Call(T(3, 5), T(3, 4), T(4, 5), beta=Float(0.5), alpha=Float(2.0)))
_add("baddbmm baddbmm_",
     Call(T(2, 3, 5), T(2, 3, 4), T(2, 4, 5), beta=Float(0.5), alpha=Float(2.0)))
_add("index_select", Call(T(4, 5), Int(1), IDX(3, high=5)))
_add("gather", Call(M, Int(1), IDX(3, 2, high=4)))
_add("take", Call(M, IDX(5, high=12)))
_add("scatter scatter_", Call(M, Int(1), IDX(3, 2, high=4), T(3, 2)),
     Call(M, Int(1), IDX(3, 2, high=4), Float(1.5)))
_add("scatter_add scatter_add_", Call(M, Int(1), IDX(3, 2, high=4), T(3, 2)))
_add("scatter_reduce scatter_reduce_",
     Call(M, Int(1), IDX(3, 2, high=4), T(3, 2), "amax", include_self=False))
_add("index_add index_add_", Call(T(4, 5), Int(0), IDX(3, high=4), T(3, 5), alpha=Float(2.0)))
_add("index_fill index_fill_", Call(T(4, 5), Int(1), IDX(2, high=5), Float(2.5)))
_add("index_copy index_copy_", Call(T(4, 5), Int(0), IDX(3, high=4), T(3, 5)))
_add("put put_", Call(M, IDX(5, high=12), T(5), accumulate=True))
_add("masked_fill masked_fill_", Call(M, MASK(3, 4), Float(1.5)))
_add("masked_select", Call(M, MASK(3, 4)))
_add("index_put index_put_",
     Call(T(4, 5), Tensors([IDX(3, high=4)]), T(3, 5), accumulate=True))
_add("split", Call(T(6, 4), Int(2), dim=Int(0)), Call(T(6, 4), Sizes([2, 4])))
_add("chunk", Call(T(6, 4), Int(3), dim=Int(0)))
_add("tensor_split", Call(T(6, 4), Int(3), dim=Int(1)), Call(T(6, 4), Sizes([1, 3])))
_add("unbind", Call(M, dim=Int(1)))
_add("flip", Call(M, Sizes([0, 1])))
_add("roll", Call(M, shifts=Sizes([1, 2]), dims=Sizes([0, 1])), Call(M, Int(2)))
_add("repeat", Call(T(2, 3), Int(2), Int(3)), Call(T(2, 3), Sizes([2, 1])))
_add("tile", Call(T(2, 3), Sizes([2, 1])))
_add("repeat_interleave", Call(M, Int(2), dim=Int(0)))
_add("diagonal", Call(M, offset=Int(1), dim1=Int(0), dim2=Int(1)))
_add("diag", Call(M, Int(1)))
_add("tril triu tril_ triu_", Call(M, Int(1)))
_add("sort", Call(M, dim=Int(1), descending=True))
_add("argsort", Call(M, dim=Int(1), descending=True))
_add("topk", Call(M, Int(2), dim=Int(1)))
_add("kthvalue", Call(M, Int(2), dim=Int(1)))
_add("unique", Call(T(4, 3, dtype="int64"), dim=Int(0), return_inverse=True, return_counts=True),
     Call(IM, return_inverse=True))
_add("unique_consecutive",
     Call(T(4, 3, dtype="int64"), dim=Int(0), return_inverse=True, return_counts=True))
_add("cat concat concatenate stack", Call(Tensors([M, M2]), dim=Int(1)))
_add("hstack vstack", Call(Tensors([M, M2])))
_add("view reshape", Call(M, Int(4), Int(3)), Call(M, Sizes([2, 6])))
_add("view_as reshape_as", Call(T(4, 3), T(2, 6)))
_add("expand_as", Call(T(3, 1), T(3, 4)))
_add("flatten", Call(T(2, 3, 2), Int(0), Int(1)))
_add("transpose", Call(M, Int(0), Int(1)))
_add("permute", Call(T(2, 3, 4), Int(2), Int(0), Int(1)), Call(T(2, 3, 4), Sizes([1, 0, 2])))
_add("squeeze", Call(T(3, 1, 4), Int(1)))
_add("unsqueeze", Call(M, Int(1)))
_add("expand", Call(T(3, 1), Int(3), Int(4)), Call(T(3, 1), Sizes([2, 3, 4])))
_add("narrow", Call(M, Int(1), Int(1), Int(2)))
_add("select", Call(M, Int(0), Int(1)))
_add("unfold", Call(T(8), Int(0), Int(3), Int(2)))
_add("as_strided", Call(T(12), Sizes([3, 4]), Sizes([4, 1]), Int(0)))
_add("copy_", Call(M, T(4)))
_add("fill_", Call(M, Float(1.5)))
_add("to", Call(M, ember.float64))
_add("_one_hot", Call(IDX(4, high=3), Int(3)))
_add("result_type", Call(M, Float(2.5)))
# C methods of the tensor type (method_descriptor) that take arguments.
_add("size stride", Call(M, Int(1)), Call(M))
_add("numpy", Call(M))
_add("__array__", Call(M))
_add("__dlpack__", Call(M, max_version=Sizes([1, 0], container=tuple)))
_add("item", Call(T(1)))
_add("tolist", Call(M))
_add("requires_grad_", Call(M, False))

# Function forms whose arguments differ from the method's (the function takes
# no tensor first, or orders them otherwise).
FUNCTION_TEMPLATES = {
    "promote_types": [Call(ember.int32, ember.float32)],
    "can_cast": [Call(ember.int32, ember.float32)],
    "result_type": [Call(M, Float(2.5)), Call(M, M2)],
    "where": [Call(MASK(3, 4), M, M2), Call(MASK(3, 4), M, Float(1.5))],
    "searchsorted": [Call(T(5), M, side="right"), Call(T(3, 5), T(3, 2), out_int32=True)],
    # The C factories re-exported by ember (not operators: no input tensor).
    "tensor": [Call([[Float(1.5), 2.0], [3.0, 4.0]]), Call([[Int(1), 2], [3, 4]])],
    "zeros": [Call(Sizes([2, 3])), Call(Int(2), Int(3))],
    "ones": [Call(Sizes([2, 3])), Call(Int(2), Int(3))],
    "empty": [Call(Sizes([2, 3]))],
    "full": [Call(Sizes([2, 3]), Float(1.5))],
    "arange": [Call(Float(0.5), Float(7.0), Float(1.5)), Call(Int(10))],
    "linspace": [Call(Float(0.0), Float(1.0), Int(5))],
    "eye": [Call(Int(3), Int(4))],
    "zeros_like ones_like empty_like rand_like randn_like": [Call(M)],
    "full_like": [Call(M, Float(2.5))],
    "rand randn": [Call(Sizes([2, 3]))],
    "randint": [Call(Int(0), Int(5), Sizes([2, 3], container=tuple))],
    "randint_like": [Call(M, Int(1), Int(5))],
    "randperm": [Call(Int(5))],
    "from_numpy": [Call(np.arange(6.0))],
}
for _names in list(FUNCTION_TEMPLATES):
    if " " in _names:
        for _name in _names.split():
            FUNCTION_TEMPLATES[_name] = FUNCTION_TEMPLATES[_names]
        del FUNCTION_TEMPLATES[_names]

# Entry points deliberately left out, with the reason.
EXCLUDED = {
    "set_num_threads": "changes the worker pool for the rest of the process",
    "get_num_threads": "takes no arguments",
    "manual_seed": "reseeds the global generator",
    "seed": "reseeds the global generator from the operating system",
    "set_default_dtype": "changes the default dtype for the rest of the process",
    "get_default_dtype": "takes no arguments",
    "initial_seed": "takes no arguments",
    "is_grad_enabled": "takes no arguments",
    "from_dlpack": "takes a producer object, probed through __dlpack__",
    "_gemm_kernel": "selects the GEMM micro-kernel process-wide",
    "_gemm_blocking": "takes no arguments",
    "requires_grad_": "switches autograd on (its memory is the autograd suite's)",
}

# The generic probes for an entry point without a template: the first of
# these that the plain call accepts becomes its template.
GENERIC_PROBES = [
    Call(M), Call(M, M2), Call(M, Int(1)), Call(M, Float(2.0)), Call(M, dim=Int(1)),
    Call(M, Sizes([0])), Call(T(3, 3)), Call(T(3, 3), T(3, 3)),
]

# ---- the entry points --------------------------------------------------------------

_OP_METHOD = type(vars(_C._TensorBase)["add"])
_C_METHOD = type(vars(_C._TensorBase)["size"])
_FACTORIES = [n for n in dir(ember) if not n.startswith("_")
              and type(getattr(ember, n)) is type(_C.zeros)
              and getattr(ember, n) is getattr(_C, n, None)]


def function_names():
    names = set(_C._public_functions) | set(_FACTORIES) | {"_one_hot"}
    return sorted(n for n in names if n not in EXCLUDED)


def method_names():
    names = [n for n, v in vars(_C._TensorBase).items()
             if isinstance(v, (_OP_METHOD, _C_METHOD)) and n not in EXCLUDED]
    return sorted(names)


def entry_points():
    """[(kind, name)] for kind 'function' or 'method'."""
    return ([("function", n) for n in function_names()]
            + [("method", n) for n in method_names()])


def callable_for(kind, name):
    if kind == "function":
        return getattr(_C, name)
    return getattr(ember.Tensor, name)


def declared_templates(kind, name):
    """The templates written for this entry point (possibly none)."""
    if kind == "function" and name in FUNCTION_TEMPLATES:
        return FUNCTION_TEMPLATES[name]
    if name in TEMPLATES:
        return TEMPLATES[name]
    if name.endswith("_") and not name.endswith("__") and name[:-1] in TEMPLATES:
        # An in-place twin takes its out-of-place form's arguments (no out=).
        return [c for c in TEMPLATES[name[:-1]] if "out" not in c.kwargs]
    return []


def templates_for(kind, name):
    """(templates, is_generic): the declared ones that the plain call accepts,
    or else the first generic probe it accepts."""
    declared = declared_templates(kind, name)
    working = [c for c in declared if plain_call_error(kind, name, c) is None]
    if declared:
        return working, False
    for probe in GENERIC_PROBES:
        if plain_call_error(kind, name, probe) is None:
            return [probe], True
    return [], True


def plain_call_error(kind, name, template):
    """None when the plain call succeeds, else the exception."""
    try:
        invoke(kind, name, *materialize(template)[:2])
    except Exception as error:  # noqa: BLE001 - any failure disqualifies
        return error
    return None


def invoke(kind, name, args, kwargs):
    if kind == "function":
        return getattr(_C, name)(*args, **kwargs)
    return getattr(args[0], name)(*args[1:], **kwargs)


# ---- materializing a template ----------------------------------------------------


def make_tensor(spec, seed):
    rng = np.random.default_rng(seed)
    if spec.kind == "index":
        data = rng.integers(0, spec.high, size=spec.shape)
    elif spec.kind == "mask":
        data = rng.random(spec.shape) > 0.5
    elif spec.kind == "prob":
        data = rng.random(spec.shape)
    elif spec.dtype in ("float32", "float64"):
        data = rng.standard_normal(spec.shape)
    else:
        data = rng.integers(-5, 6, size=spec.shape)
    data = np.asarray(data).astype(spec.dtype)
    return ember.tensor(data.tolist(), dtype=getattr(ember, spec.dtype))


class Materialized:
    """The real arguments of one call: args, kwargs, and what an evil object
    may act on (the tensors and the lists they came in)."""

    def __init__(self):
        self.args, self.kwargs = [], {}
        self.tensors = []       # every tensor argument (top level or in a list)
        self.tensor_lists = []  # the lists holding tensors (Tensors placeholders)


def materialize(template, probe=None, evil_factory=None, seed=0):
    """(args, kwargs, Materialized).  `probe` is a position from
    Call.probe_positions(); evil_factory(value, placeholder, holder, call)
    builds the object that replaces it (holder: the list it sits in, if any)."""
    call = Materialized()
    counter = [seed]

    def tensor(spec):
        counter[0] += 1
        t = make_tensor(spec, counter[0])
        call.tensors.append(t)
        return t

    def convert(value, where, key):
        probe_here = probe is not None and probe[0] == where and probe[1] == key
        if isinstance(value, T):
            return tensor(value)
        if isinstance(value, Tensors):
            items = [tensor(s) for s in value.items]
            call.tensor_lists.append(items)
            return items
        if isinstance(value, (Int, Float)):
            if probe_here:
                return evil_factory(value.value, value, None, call)
            return value.value
        if isinstance(value, Sizes):
            items = list(value.values)
            if probe_here and probe[2] is None:
                return evil_factory(items, value, None, call)
            if probe_here:
                container = items  # the evil item may clear the list it is in
                items[probe[2]] = evil_factory(items[probe[2]], Int(items[probe[2]]),
                                               container, call)
                return container if value.container is list else value.container(items)
            return value.container(items)
        if isinstance(value, list):  # a nested literal (tensor(...)): convert items
            return [convert(v, where, key) for v in value]
        return value

    for i, value in enumerate(template.args):
        call.args.append(convert(value, "arg", i))
    for key, value in template.kwargs.items():
        call.kwargs[key] = convert(value, "kw", key)
    return call.args, call.kwargs, call


# ---- comparing results -------------------------------------------------------------


def snapshot(result):
    """A comparable, memory-independent copy of a result."""
    if isinstance(result, ember.Tensor):
        return ("tensor", str(result.dtype), tuple(result.shape),
                np.array(result.detach().tolist()))
    if isinstance(result, np.ndarray):
        return ("ndarray", str(result.dtype), result.shape, result.copy())
    if isinstance(result, (tuple, list)):
        return ("seq", tuple(snapshot(r) for r in result))
    if isinstance(result, (bool, int, float, str, type(None))) or result.__class__.__module__ == "ember":
        return ("value", result)
    return ("object", type(result).__name__)


def same(a, b):
    if a[0] != b[0]:
        return False
    if a[0] in ("tensor", "ndarray"):
        if a[1] != b[1] or a[2] != b[2]:
            return False
        x, y = a[3], b[3]
        if x.dtype.kind in "fc":
            return bool(np.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True))
        return bool(np.array_equal(x, y))
    if a[0] == "seq":
        return len(a[1]) == len(b[1]) and all(same(x, y) for x, y in zip(a[1], b[1]))
    if a[0] == "value":
        x, y = a[1], b[1]
        if isinstance(x, float) and isinstance(y, float) and x != x and y != y:
            return True
        return x == y
    return a == b


# ---- running a sweep in a child process --------------------------------------------


def child_env():
    """The environment of a child that imports the same ember as this process
    (the ASan gate's build included: its LD_PRELOAD and options are inherited)."""
    env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(ember.__file__))
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    paths = [package_root, tests_dir] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def run_child(script, args, log_path, timeout, failures=None, leak_check=True):
    """Runs `python script args --log log_path`.  Returns (returncode, output,
    the last case logged before the child ended): a case is logged before it
    runs, so after a crash the last one names it.  Lines the child logged as
    'FAIL ...' (misbehaviours it survived) are appended to `failures`.
    leak_check=False turns LeakSanitizer's report at the child's exit off
    (under the ASan gate); memory errors still end it."""
    env = child_env()
    if not leak_check and "ASAN_OPTIONS" in env:
        env["ASAN_OPTIONS"] += ":detect_leaks=0"
    if os.path.exists(log_path):
        os.remove(log_path)
    try:
        done = subprocess.run([sys.executable, script, *args, "--log", log_path],
                              env=env, capture_output=True, text=True,
                              timeout=timeout)
        returncode, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as expired:
        returncode = "timeout"
        output = ((expired.stdout or b"").decode(errors="replace")
                  + (expired.stderr or b"").decode(errors="replace"))
    last = None
    if os.path.exists(log_path):
        with open(log_path) as log:
            lines = log.read().splitlines()
        cases = [line for line in lines if not line.startswith("FAIL ")]
        last = cases[-1] if cases else None
        if failures is not None:
            failures.extend(line[len("FAIL "):] for line in lines if line.startswith("FAIL "))
    return returncode, output, last


class CaseLog:
    """Writes one line per case before it runs (flushed, so a crash keeps it)."""

    def __init__(self, path):
        self.file = open(path, "a") if path else None

    def write(self, text):
        if self.file is not None:
            self.file.write(text + "\n")
            self.file.flush()


def child_report(line):
    """The JSON line a child prints last (see test_reentrancy.main)."""
    for candidate in reversed(line.splitlines()):
        if candidate.startswith("REPORT "):
            return json.loads(candidate[len("REPORT "):])
    return None


@contextlib.contextmanager
def allocator_restored():
    saved = ember.memory.get_allocator("cpu")
    try:
        yield
    finally:
        ember.memory.set_allocator(saved, "cpu")
