"""Translating a traced graph into ONNX operators (Note [Exporting a trace]
in __init__.py).

Each traced call node is handed to the symbolic function registered for
its operator's name ("add", "conv2d", "view": the callee without its
namespace, so `ember.add`, `Tensor.add`, `x + y` and `x.add_(y)` share
one), called with the node's arguments as the Python call had them:
tensors as graph Values, everything else (ints, lists, None) as the
Python value the trace recorded.  A symbolic emits ONNX nodes through the
Exporter and returns the name of its result.
"""

import contextlib
import math
import warnings

import numpy as np

from .. import _C
from .._tensor import Tensor
from ..jit.ir import Value

# Functional layers recorded as one node each (Note [Exporting a trace]).
COMPOSITES = ("linear", "conv1d", "conv2d", "conv3d", "batch_norm", "layer_norm", "embedding",
              "dropout", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "leaky_relu",
              "elu", "hardtanh")

SYMBOLICS = {}


def symbolic(*names):
    def register(fn):
        for name in names:
            SYMBOLICS[name] = fn
        return fn
    return register


@contextlib.contextmanager
def recording_composites(tracer):
    """Wraps COMPOSITES in ember.nn.functional for the length of a trace:
    a call runs with the tracer hook off and is recorded as one node.  A
    composite called inside another runs unrecorded, inside its caller."""
    from ..nn import functional as F
    originals = {name: getattr(F, name) for name in COMPOSITES}
    depth = [0]

    def wrap(name, original):
        def recorded(*args, **kwargs):
            if depth[0]:
                return original(*args, **kwargs)
            depth[0] += 1
            _C._set_tracer(None)
            try:
                result = original(*args, **kwargs)
            finally:
                _C._set_tracer(tracer.record)
                depth[0] -= 1
            inputs = [tracer.value_of(a) for a in (*args, *kwargs.values())]
            tracer.bind_result(result, tracer.call_node(f"F.{name}", inputs, tuple(kwargs)))
            return result
        return recorded

    for name, original in originals.items():
        setattr(F, name, wrap(name, original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(F, name, original)


def _unsupported(kind, opset, why=""):
    from . import UnsupportedOperatorError
    return UnsupportedOperatorError(
        f"Exporting the operator '{kind}' to ONNX opset version {opset} is not "
        f"supported{why}.")


def _np_dtype(tensor):
    name = str(tensor.dtype).replace("ember.", "")
    try:
        return np.dtype(name)
    except TypeError:
        raise _unsupported(f"dtype {name}", "any") from None


def _to_numpy(tensor):
    return np.ascontiguousarray(tensor.detach().numpy())


class Exporter:
    """Emits ONNX nodes and initializers for one traced graph."""

    def __init__(self, graph, examples, param_names, opset):
        import onnx
        self.onnx = onnx
        self.helper = onnx.helper
        self.graph = graph
        self.examples = examples          # Value -> the tensor it held in the trace
        self.param_names = param_names    # id(tensor) -> state_dict key
        self.opset = opset
        self.nodes = []
        self.initializers = {}            # name -> TensorProto
        self.parameters = {}              # name -> tensor (the state_dict ones)
        self.names = {}                   # Value -> ONNX name
        self.node = None                  # the traced node being translated
        self._count = 0
        self.twin_values = {}             # Value -> the same value in the second trace
        self.twin_examples = {}

    def pair_with(self, twin_graph, twin_examples):
        """Matches the second trace's values to this one's (Note [Sizes that
        vary] in __init__.py); leaves them unmatched if the traces differ."""
        nodes, twin_nodes = self.graph.block.nodes, twin_graph.block.nodes
        if len(nodes) != len(twin_nodes) or any(
                a.kind != b.kind or len(a.outputs) != len(b.outputs)
                for a, b in zip(nodes, twin_nodes)):
            warnings.warn("ember.onnx.export: the model ran different operators for "
                          "other sizes of the dynamic axes; sizes are exported as traced")
            return
        self.twin_examples = twin_examples
        pairs = list(zip(self.graph.inputs, twin_graph.inputs))
        for a, b in zip(nodes, twin_nodes):
            pairs += zip(a.outputs, b.outputs)
        self.twin_values = dict(pairs)

    def twin_example(self, value):
        """The tensor `value` held in the second trace, or None."""
        return self.twin_examples.get(self.twin_values.get(value))

    def twin_arguments(self):
        """The current node's arguments in the second trace, or None."""
        if not self.twin_values:
            return None
        return [self.argument(self.twin_values[v]) for v in self.node.inputs]

    # -- names and constants ------------------------------------------------------
    def fresh(self, hint):
        self._count += 1
        return f"/{hint}_{self._count}"

    def name(self, value):
        if value not in self.names:
            self.names[value] = self.constant_tensor(value)
        return self.names[value]

    def constant_tensor(self, value):
        """The initializer of a tensor the trace saw as a constant: a
        parameter or buffer by its state_dict key, any other by a fresh name."""
        from . import OnnxExporterError
        tensor = value.node.attrs["value"]
        key = self.param_names.get(id(tensor))
        if key is None and tensor.grad_fn is not None:
            raise OnnxExporterError(
                f"ember.onnx.export: a tensor of shape {list(tensor.shape)} was computed "
                f"by an operation the tracer cannot record ({type(tensor.grad_fn).__name__}); "
                f"it would be written as a constant")
        twin = self.twin_values.get(value)
        if key is None and twin is not None and \
                list(twin.node.attrs["value"].shape) != list(tensor.shape):
            raise OnnxExporterError(
                f"ember.onnx.export: a constant tensor of shape {list(tensor.shape)} "
                f"changes shape with the dynamic axes (made from a traced size, "
                f"e.g. ember.ones(x.shape[1])); it cannot be exported as a constant")
        name = key or f"onnx::Constant_{value.id}"
        if key is not None:
            self.parameters[name] = tensor
        self.initializers[name] = self.onnx.numpy_helper.from_array(_to_numpy(tensor), name)
        return name

    def const(self, array, hint="Constant"):
        self._count += 1
        name = f"onnx::{hint}_{self._count}"
        self.initializers[name] = self.onnx.numpy_helper.from_array(np.asarray(array), name)
        return name

    def ints(self, values):
        return self.const(np.array(list(values), dtype=np.int64), "Shape")

    def scalar_like(self, number, dtype):
        return self.const(np.array(number, dtype=dtype), "Scalar")

    # -- emitting -----------------------------------------------------------------
    def op(self, op_type, *inputs, outputs=1, **attrs):
        """Appends one ONNX node; returns its output name(s)."""
        names = [self.fresh(f"{op_type}_output") for _ in range(outputs)]
        inputs = ["" if i is None else i for i in inputs]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(self.helper.make_node(op_type, inputs, names,
                                                name=self.fresh(op_type), **attrs))
        return names[0] if outputs == 1 else names

    def reduce(self, op_type, x, axes, keepdims):
        """Reduce* with axes as an attribute before opset 18 (ReduceSum: 13)
        and as an input since."""
        keepdims = int(bool(keepdims))
        if axes is None:
            return self.op(op_type, x, keepdims=keepdims)
        if op_type == "ReduceSum" or self.opset >= 18:
            return self.op(op_type, x, self.ints(axes), keepdims=keepdims)
        return self.op(op_type, x, axes=list(axes), keepdims=keepdims)

    # -- what the trace knows about a value ---------------------------------------
    def example(self, value):
        return self.examples[value]

    def out_dtype(self):
        return _np_dtype(self.examples[self.node.outputs[0]])

    def cast_to(self, name, value, dtype):
        """`name` (the ONNX name of `value`) in dtype, with a Cast if needed."""
        if _np_dtype(self.example(value)) == dtype:
            return name
        return self.op("Cast", name, to=self.helper.np_dtype_to_tensor_dtype(dtype))

    def operand(self, x, dtype):
        """A tensor Value or a Python number as an ONNX name in `dtype`."""
        if isinstance(x, Value):
            return self.cast_to(self.name(x), x, dtype)
        return self.scalar_like(x, dtype)

    # -- translating a node -------------------------------------------------------
    def argument(self, value):
        """A node input as the call had it: a tensor Value or a Python value."""
        node = value.node
        if node.kind == "prim::Constant":
            constant = node.attrs["value"]
            return value if isinstance(constant, Tensor) else constant
        if node.callee in ("prim.list", "prim.tuple"):
            items = [self.argument(v) for v in node.inputs]
            return items if node.callee == "prim.list" else tuple(items)
        return value

    def translate(self, node):
        self.node = node
        if node.kind == "prim::Constant" or node.callee in ("prim.list", "prim.tuple"):
            return      # read through argument() by the nodes that use them
        if node.callee == "operator.getitem" and isinstance(self.names.get(node.inputs[0]),
                                                              list):
            self.names[node.output] = self.names[node.inputs[0]][self.argument(node.inputs[1])]
            return
        base = operator_name(node.callee)
        fn = SYMBOLICS.get(base)
        if fn is None:
            raise _unsupported(node.kind, self.opset)
        arguments = [self.argument(v) for v in node.inputs]
        npos = len(arguments) - len(node.kwnames)
        result = fn(self, *arguments[:npos], **dict(zip(node.kwnames, arguments[npos:])))
        self.names[node.outputs[0]] = result

    def unsupported(self, why=""):
        return _unsupported(self.node.kind, self.opset, why)


_OPERATOR_ALIASES = {"truediv": "div", "T": "t", "__getitem__": "getitem"}


def operator_name(callee):
    """'Tensor.add_' -> 'add', 'operator.truediv' -> 'div', 'F.conv2d' -> 'conv2d'."""
    name = callee.rpartition(".")[2]
    if name.startswith("__") and name.endswith("__"):
        return _OPERATOR_ALIASES.get(name, name)
    if name.startswith("i") and callee.startswith("operator.") and name[1:] in (
            "add", "sub", "mul", "truediv", "matmul"):
        name = name[1:]                   # operator.iadd: x += y
    name = name.rstrip("_")               # x.add_(y): the trace rebinds x
    return _OPERATOR_ALIASES.get(name, name)


def live_nodes(graph):
    """The nodes the returns depend on, in graph order (a trace records
    everything the model ran, used or not)."""
    live, stack = set(), list(graph.outputs)
    while stack:
        node = stack.pop().node
        if node not in live and node.kind != "prim::Param":
            live.add(node)
            stack.extend(node.inputs)
    return [n for n in graph.block.nodes if n in live]


# ---------------------------------------------------------------------------
# Building the model


def build_model(graph, examples, results, param_names, opset, *, twin, input_names,
                output_names, dynamic_axes, export_params, keep_initializers_as_inputs):
    import onnx
    helper = onnx.helper
    g = Exporter(graph, examples, param_names, opset)
    if twin is not None:
        g.pair_with(*twin)
    inputs = given_or_default(input_names, [v.debug_name for v in graph.inputs])
    default_outputs = ["output"] if len(results) == 1 else \
        [f"output{i}" for i in range(len(results))]
    outputs = given_or_default(output_names, default_outputs, "output")
    _check_dynamic_axes(dynamic_axes, inputs + outputs)
    for value, name in zip(graph.inputs, inputs):
        g.names[value] = name
    for node in live_nodes(graph):
        g.translate(node)
    _name_outputs(g, [g.name(v) for v in graph.outputs], outputs)

    def info(name, tensor):
        return helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(_np_dtype(tensor)),
            _shape(name, tensor, dynamic_axes))

    graph_inputs = [info(n, g.example(v)) for v, n in zip(graph.inputs, inputs)]
    initializers = list(g.initializers.values())
    if not export_params:
        graph_inputs += [info(n, t) for n, t in g.parameters.items()]
        initializers = [i for i in initializers if i.name not in g.parameters]
    elif keep_initializers_as_inputs:
        graph_inputs += [info(n, t) for n, t in g.parameters.items()]
    proto = helper.make_graph(g.nodes, graph.name, graph_inputs,
                              [info(n, r) for n, r in zip(outputs, results)],
                              initializer=initializers)
    # The oldest IR version that has the opset, so older runtimes load it.
    opsets = [helper.make_opsetid("", opset)]
    return helper.make_model(proto, producer_name="ember", opset_imports=opsets,
                             ir_version=helper.find_min_ir_version_for(opsets))


def given_or_default(given, defaults, what="input"):
    """input_names/output_names: the first values take the given names."""
    if len(given) > len(defaults):
        raise RuntimeError(f"number of {what} names provided ({len(given)}) exceeded "
                         f"number of {what}s ({len(defaults)})")
    return list(given) + defaults[len(given):]


def _check_dynamic_axes(dynamic_axes, names):
    for key in dynamic_axes:
        if key not in names:
            warnings.warn(f"Provided key {key} for dynamic axes is not a valid "
                          f"input/output name")


def _shape(name, tensor, dynamic_axes):
    axes = dynamic_axes.get(name, {})
    if not isinstance(axes, dict):      # [0, 1]: PyTorch's generated names
        axes = {a: f"{name}_dynamic_axes_{i + 1}" for i, a in enumerate(axes)}
    axes = {a % max(tensor.dim(), 1): n for a, n in axes.items()}
    return [axes.get(i, size) for i, size in enumerate(tensor.shape)]


def _name_outputs(g, internal, outputs):
    """Gives the graph's results their output names: renames the node that
    made each, or adds an Identity where a result is an input, a constant
    or another result too."""
    graph_inputs = set(g.names[v] for v in g.graph.inputs)
    seen = set()
    for old, new in zip(internal, outputs):
        producer = next((n for n in g.nodes if old in n.output), None)
        if producer is None or old in seen or old in graph_inputs:
            g.nodes.append(g.helper.make_node("Identity", [old], [new], name=g.fresh("Identity")))
        else:
            for node in g.nodes:
                for field in (node.input, node.output):
                    for i, name in enumerate(field):
                        if name == old:
                            field[i] = new
        seen.add(old)


# ---------------------------------------------------------------------------
# The symbolic functions


def _binary(op_type):
    def emit(g, a, b, *extra, alpha=1, rounding_mode=None):
        if extra or rounding_mode is not None:
            raise g.unsupported(" with these arguments")
        dtype = g.out_dtype()
        b_name = g.operand(b, dtype)
        if alpha != 1:
            b_name = g.op("Mul", b_name, g.scalar_like(alpha, dtype))
        return g.op(op_type, g.operand(a, dtype), b_name)
    return emit


symbolic("add")(_binary("Add"))
symbolic("sub")(_binary("Sub"))
symbolic("mul")(_binary("Mul"))
symbolic("div")(_binary("Div"))
symbolic("pow")(_binary("Pow"))


@symbolic("radd", "rsub", "rmul", "rdiv", "rtruediv")
def _reflected(g, a, b):
    op_type = {"radd": "Add", "rsub": "Sub", "rmul": "Mul"}.get(
        operator_name(g.node.callee), "Div")
    dtype = g.out_dtype()
    return g.op(op_type, g.operand(b, dtype), g.operand(a, dtype))


def _unary(op_type):
    def emit(g, x, *ignored_inplace):
        return g.op(op_type, g.name(x))
    return emit


for _name, _op_type in {"relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid", "exp": "Exp",
                        "log": "Log", "sqrt": "Sqrt", "neg": "Neg", "abs": "Abs",
                        "erf": "Erf"}.items():
    symbolic(_name)(_unary(_op_type))


@symbolic("rsqrt")
def _rsqrt(g, x):
    return g.op("Reciprocal", g.op("Sqrt", g.name(x)))


@symbolic("contiguous", "clone", "detach")
def _same(g, x, *ignored, **ignored_kw):
    return g.name(x)


@symbolic("dropout")
def _dropout(g, x, p=0.5, training=True, inplace=False):
    if training and p > 0:
        raise g.unsupported(" in training mode (dropout is exported in eval mode)")
    return g.name(x)


@symbolic("gelu")
def _gelu(g, x, approximate="none"):
    if g.opset >= 20:
        return g.op("Gelu", g.name(x), approximate=approximate)
    x_name, dtype = g.name(x), g.out_dtype()
    if approximate == "tanh":   # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = g.op("Mul", g.op("Mul", x_name, x_name), x_name)
        inner = g.op("Add", x_name, g.op("Mul", cube, g.scalar_like(0.044715, dtype)))
        gate = g.op("Tanh", g.op("Mul", inner, g.scalar_like(math.sqrt(2 / math.pi), dtype)))
    else:                       # 0.5 x (1 + erf(x / sqrt 2))
        gate = g.op("Erf", g.op("Div", x_name, g.scalar_like(math.sqrt(2), dtype)))
    half_x = g.op("Mul", x_name, g.scalar_like(0.5, dtype))
    return g.op("Mul", half_x, g.op("Add", gate, g.scalar_like(1.0, dtype)))


def _softmax_like(op_type):
    def emit(g, x, dim=None, *unused, dtype=None):
        name = g.name(x)
        if dtype is not None:
            name = g.cast_to(name, x, _np_dtype(g.examples[g.node.outputs[0]]))
        return g.op(op_type, name, axis=dim)
    return emit


symbolic("softmax")(_softmax_like("Softmax"))
symbolic("log_softmax")(_softmax_like("LogSoftmax"))


@symbolic("matmul", "mm", "bmm")
def _matmul(g, a, b):
    return g.op("MatMul", g.name(a), g.name(b))


@symbolic("linear")
def _linear(g, x, weight, bias=None):
    if g.example(x).dim() == 2:
        return g.op("Gemm", g.name(x), g.name(weight),
                    None if bias is None else g.name(bias), transB=1)
    out = g.op("MatMul", g.name(x), g.op("Transpose", g.name(weight), perm=[1, 0]))
    return out if bias is None else g.op("Add", out, g.name(bias))


def _pair(v, n):
    return list(v) if isinstance(v, (list, tuple)) else [v] * n


@symbolic("conv1d", "conv2d", "conv3d")
def _conv(g, x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    w = g.example(weight)
    spatial = w.dim() - 2
    if g.example(x).dim() != spatial + 2:
        raise g.unsupported(" for an unbatched input")
    dilation, kernel = _pair(dilation, spatial), list(w.shape[2:])
    if padding == "valid":
        padding = [0] * spatial
    if padding == "same":   # PyTorch puts an odd extra pad at the end
        total = [d * (k - 1) for d, k in zip(dilation, kernel)]
        pads = [t // 2 for t in total] + [t - t // 2 for t in total]
    else:
        pads = _pair(padding, spatial) * 2
    return g.op("Conv", g.name(x), g.name(weight), None if bias is None else g.name(bias),
                kernel_shape=kernel, strides=_pair(stride, spatial), pads=pads,
                dilations=dilation, group=groups)


@symbolic("max_pool2d")
def _max_pool2d(g, x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                return_indices=False):
    if return_indices:
        raise g.unsupported(" with return_indices=True")
    kernel = _pair(kernel_size, 2)
    return g.op("MaxPool", g.name(x), kernel_shape=kernel,
                strides=_pair(stride or kernel, 2), pads=_pair(padding, 2) * 2,
                dilations=_pair(dilation, 2), ceil_mode=int(ceil_mode))


@symbolic("avg_pool2d")
def _avg_pool2d(g, x, kernel_size, stride=None, padding=0, ceil_mode=False,
                count_include_pad=True, divisor_override=None):
    if divisor_override is not None:
        raise g.unsupported(" with divisor_override")
    kernel = _pair(kernel_size, 2)
    return g.op("AveragePool", g.name(x), kernel_shape=kernel,
                strides=_pair(stride or kernel, 2), pads=_pair(padding, 2) * 2,
                ceil_mode=int(ceil_mode), count_include_pad=int(count_include_pad))


def _ones_or(g, tensor_value, fill, size, dtype):
    if tensor_value is not None:
        return g.name(tensor_value)
    return g.const(np.full(size, fill, dtype=dtype), "Fill")


@symbolic("batch_norm")
def _batch_norm(g, x, running_mean, running_var, weight=None, bias=None, training=False,
                momentum=0.1, eps=1e-5):
    if training or running_mean is None or running_var is None:
        raise g.unsupported(" in training mode or without running statistics")
    channels, dtype = g.example(x).shape[1], g.out_dtype()
    return g.op("BatchNormalization", g.name(x), _ones_or(g, weight, 1, channels, dtype),
                _ones_or(g, bias, 0, channels, dtype), g.name(running_mean),
                g.name(running_var), epsilon=float(eps))


@symbolic("layer_norm")
def _layer_norm(g, x, normalized_shape, weight=None, bias=None, eps=1e-5):
    if g.opset < 17:
        raise g.unsupported(" (LayerNormalization needs opset 17)")
    shape, dtype = list(_pair(normalized_shape, 1)), g.out_dtype()
    return g.op("LayerNormalization", g.name(x), _ones_or(g, weight, 1, shape, dtype),
                _ones_or(g, bias, 0, shape, dtype), axis=-len(shape), epsilon=float(eps))


@symbolic("embedding")
def _embedding(g, indices, weight, padding_idx=None, max_norm=None, *unused, **unused_kw):
    if max_norm is not None:
        raise g.unsupported(" with max_norm")
    return g.op("Gather", g.name(weight), g.name(indices), axis=0)


def _reshape(g, x, target, twin_target=None):
    """Reshape to a traced shape (Note [Sizes that vary] in __init__.py)."""
    source, target = list(g.example(x).shape), list(target)
    twin = g.twin_example(x)
    if twin_target is None or twin is None:
        return g.op("Reshape", g.name(x), g.ints(_guess_sizes(source, target)))
    twin_source, varying, read = list(twin.shape), [], {}
    for i, (size, twin_size) in enumerate(zip(target, twin_target)):
        if size == twin_size:
            continue
        if i < len(source) and (source[i], twin_source[i]) == (size, twin_size):
            target[i] = 0
        else:
            found = _find_size(g, [x, *g.graph.inputs], size, twin_size)
            if found:
                read[i] = found
            else:
                varying.append(i)
    if len(varying) > 1 or varying and -1 in target:
        raise g.unsupported(f" for a shape {list(g.example(g.node.outputs[0]).shape)} "
                            f"in which two sizes follow the dynamic axes")
    for i in varying:
        target[i] = -1
    return g.op("Reshape", g.name(x), _shape_with_sizes_of(g, target, read))


def _find_size(g, values, size, twin_size):
    """A (value, dim) whose size was `size` in the first trace and
    `twin_size` in the second, or None."""
    for value in values:
        pairs = zip(g.example(value).shape, g.twin_example(value).shape)
        for dim, sizes in enumerate(pairs):
            if sizes == (size, twin_size):
                return value, dim
    return None


def _shape_with_sizes_of(g, target, read):
    """`target` as an int64 tensor, where dims i in `read` are taken at run
    time from the size of read[i] = (value, dim) (Shape, Gather, Concat)."""
    if not read:
        return g.ints(target)
    pieces = []
    for i, size in enumerate(target):
        if i in read:
            value, dim = read[i]
            shape = g.op("Shape", g.name(value))
            pieces.append(g.op("Gather", shape, g.ints([dim]), axis=0))
        else:
            pieces.append(g.ints([size]))
    return g.op("Concat", *pieces, axis=0)


def _guess_sizes(source, target):
    """Without a second trace: the leading dims kept from the source are
    copied (0), and the first other one is -1 if the shape has none."""
    kept = 0
    while kept < min(len(source), len(target)) and target[kept] == source[kept]:
        target[kept] = 0
        kept += 1
    if -1 not in target and kept < len(target):
        target[kept] = -1
    return target


def _shape_argument(shape):
    return list(shape[0]) if len(shape) == 1 and isinstance(shape[0], (list, tuple)) \
        else list(shape)


@symbolic("view", "reshape")
def _view(g, x, *shape):
    twin = g.twin_arguments()
    return _reshape(g, x, _shape_argument(shape),
                    None if twin is None else _shape_argument(twin[1:]))


def _flattened(shape, start_dim, end_dim):
    rank = max(len(shape), 1)
    return shape[:start_dim % rank] + [-1] + shape[end_dim % rank + 1:]


@symbolic("flatten")
def _flatten(g, x, start_dim=0, end_dim=-1):
    twin = g.twin_example(x)
    return _reshape(g, x, _flattened(list(g.example(x).shape), start_dim, end_dim),
                    None if twin is None else _flattened(list(twin.shape), start_dim, end_dim))


@symbolic("unsqueeze")
def _unsqueeze(g, x, dim):
    return g.op("Unsqueeze", g.name(x), g.ints([dim % (g.example(x).dim() + 1)]))


@symbolic("squeeze")
def _squeeze(g, x, dim=None):
    if dim is None:
        return g.op("Squeeze", g.name(x))
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    shape = g.example(x).shape
    dims = [d % len(shape) for d in dims if shape[d] == 1]
    return g.op("Squeeze", g.name(x), g.ints(dims)) if dims else g.name(x)


@symbolic("t", "transpose", "swapaxes")
def _transpose(g, x, dim0=0, dim1=1):
    rank = g.example(x).dim()
    perm = list(range(rank))
    if rank >= 2:
        a, b = dim0 % rank, dim1 % rank
        perm[a], perm[b] = perm[b], perm[a]
    return g.op("Transpose", g.name(x), perm=perm)


@symbolic("permute")
def _permute(g, x, *dims):
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = dims[0]
    rank = g.example(x).dim()
    return g.op("Transpose", g.name(x), perm=[d % rank for d in dims])


@symbolic("cat", "concat", "concatenate")
def _cat(g, tensors, dim=0):
    dtype = g.out_dtype()
    return g.op("Concat", *[g.operand(t, dtype) for t in tensors], axis=dim)


def _reduction(op_type):
    def emit(g, x, dim=None, keepdim=False, *, dtype=None):
        name = g.name(x)
        if dtype is not None or op_type == "ReduceSum" and g.out_dtype() != _np_dtype(
                g.example(x)):    # sum of ints/bools is int64
            name = g.cast_to(name, x, g.out_dtype())
        axes = None if dim is None else dim if isinstance(dim, (list, tuple)) else [dim]
        return g.reduce(op_type, name, axes, keepdim)
    return emit


symbolic("mean")(_reduction("ReduceMean"))
symbolic("sum")(_reduction("ReduceSum"))


@symbolic("getitem")
def _getitem(g, x, key):
    """Basic indexing: ints, slices and one Ellipsis (Slice, then Gather for
    each int, which drops its dim)."""
    key = key if isinstance(key, tuple) else (key,)
    shape = list(g.example(x).shape)
    if any(k is not Ellipsis and not isinstance(k, (int, slice)) for k in key) or \
            key.count(Ellipsis) > 1:
        raise g.unsupported(" with this index (basic indexing only: ints, slices, ...)")
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (len(shape) - len(key) + 1) + key[at + 1:]
    starts, ends, axes, steps, ints = [], [], [], [], []
    for axis, k in enumerate(key):
        if isinstance(k, int):
            ints.append((axis, k))
        elif k != slice(None):
            start, stop, step = k.indices(shape[axis])
            starts.append(start), ends.append(stop), axes.append(axis), steps.append(step)
    name = g.name(x)
    if axes:
        name = g.op("Slice", name, g.ints(starts), g.ints(ends), g.ints(axes), g.ints(steps))
    for dropped, (axis, index) in enumerate(ints):
        name = g.op("Gather", name, g.const(np.array(index, np.int64), "Index"),
                    axis=axis - dropped)
    return name


@symbolic("repeat")
def _repeat(g, x, *sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)):
        sizes = sizes[0]
    if len(sizes) != g.example(x).dim():
        raise g.unsupported(" with more repeats than dims")
    return g.op("Tile", g.name(x), g.ints(sizes))


@symbolic("silu")
def _silu(g, x, inplace=False):
    name = g.name(x)
    return g.op("Mul", name, g.op("Sigmoid", name))


@symbolic("leaky_relu")
def _leaky_relu(g, x, negative_slope=0.01, inplace=False):
    return g.op("LeakyRelu", g.name(x), alpha=float(negative_slope))


@symbolic("elu")
def _elu(g, x, alpha=1.0, inplace=False):
    return g.op("Elu", g.name(x), alpha=float(alpha))


@symbolic("clamp", "clip")
def _clamp(g, x, min=None, max=None):
    if isinstance(min, Value) or isinstance(max, Value):
        raise g.unsupported(" with tensor bounds")
    dtype = g.out_dtype()
    bound = (lambda v: None if v is None else g.scalar_like(v, dtype))
    return g.op("Clip", g.name(x), bound(min), bound(max))


@symbolic("hardtanh")
def _hardtanh(g, x, min_val=-1.0, max_val=1.0, inplace=False):
    return _clamp(g, x, min_val, max_val)


@symbolic("adaptive_avg_pool2d")
def _adaptive_avg_pool2d(g, x, output_size):
    """GlobalAveragePool for 1x1; AveragePool where the output size divides
    the input's (PyTorch's exporter does the same)."""
    shape = list(g.example(x).shape)
    if len(shape) != 4:
        raise g.unsupported(" for an unbatched input")
    out = [s if o is None else o for o, s in zip(_pair(output_size, 2), shape[2:])]
    if out == [1, 1]:
        return g.op("GlobalAveragePool", g.name(x))
    if any(s % o for s, o in zip(shape[2:], out)):
        raise g.unsupported(" when the output size does not divide the input size")
    kernel = [s // o for s, o in zip(shape[2:], out)]
    return g.op("AveragePool", g.name(x), kernel_shape=kernel, strides=kernel)


def _split_sizes(length, size):
    return [min(size, length - start) for start in range(0, length, size)]


def _split_into(g, x, sizes, dim):
    names = g.op("Split", g.name(x), g.ints(sizes), axis=dim, outputs=len(sizes))
    return names if isinstance(names, list) else [names]


@symbolic("split")
def _split(g, x, split_size_or_sections, dim=0):
    length = g.example(x).shape[dim]
    sizes = split_size_or_sections if isinstance(split_size_or_sections, (list, tuple)) \
        else _split_sizes(length, split_size_or_sections)
    return _split_into(g, x, list(sizes), dim)


@symbolic("chunk")
def _chunk(g, x, chunks, dim=0):
    length = g.example(x).shape[dim]
    return _split_into(g, x, _split_sizes(length, -(-length // chunks)), dim)


@symbolic("unbind")
def _unbind(g, x, dim=0):
    dim %= g.example(x).dim()
    pieces = _split_into(g, x, [1] * g.example(x).shape[dim], dim)
    return [g.op("Squeeze", p, g.ints([dim])) for p in pieces]


@symbolic("stack")
def _stack(g, tensors, dim=0):
    dtype, rank = g.out_dtype(), g.example(g.node.outputs[0]).dim()
    axis = g.ints([dim % rank])
    return g.op("Concat", *[g.op("Unsqueeze", g.operand(t, dtype), axis) for t in tensors],
                axis=dim % rank)


@symbolic("to", "type", "float", "double", "half", "long", "int", "bool", "cpu")
def _cast(g, x, *ignored, **ignored_kw):
    """A dtype (or device) conversion: a Cast to the dtype the trace saw."""
    return g.cast_to(g.name(x), x, g.out_dtype())
