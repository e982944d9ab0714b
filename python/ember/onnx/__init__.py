"""ember.onnx: write a model as an ONNX file, as torch.onnx.export's
TorchScript-based exporter (``dynamo=False``) does.

    ember.onnx.export(model, (x,), "model.onnx", input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "batch"}})

Note [Exporting a trace]
~~~~~~~~~~~~~~~~~~~~~~~~
The model runs once on `args` under ember.jit's tracer (Note [Tracing] in
jit/trace.py), in eval mode; the graph it records is translated node by
node into ONNX operators (symbolic.py) with the `onnx` package's helpers,
checked with `onnx.checker.check_model` and written.  Three choices follow
PyTorch's exporter:

* Parameters and buffers become initializers named by their state_dict
  keys ("0.weight", "bn.running_mean"); with export_params=False they are
  graph inputs of those names instead.
* Inputs are named by input_names, else by the names of forward's
  parameters; outputs by output_names, else "output" (one output) or
  "output0", "output1", ... (PyTorch's tracer numbers them: "7").  A name
  list shorter than the values names the first ones; a longer one is
  PyTorch's RuntimeError.
* dynamic_axes maps an input or output name to its symbolic dims: {0:
  "batch"} or [0] (named "<name>_dynamic_axes_1", as PyTorch names them).

ember's tracer records the primitive operators a composite such as
F.conv2d runs (and cannot see inside an autograd Function at all), so the
exporter records the functional layers that have an ONNX operator of their
own (F.linear, F.conv2d, F.batch_norm, ...) as single nodes: while it
traces, those names in ember.nn.functional are wrapped (symbolic.COMPOSITES;
a module that bound one by `from ... import linear` bypasses that, and
an export must not run alongside other code on another thread).  A tensor
the tracer did not see being made is a constant; one that came out of an
autograd Function it cannot see into is refused rather than written as
one (the trace runs with grad mode on so that such a result has a
grad_fn).

Note [Sizes that vary]
~~~~~~~~~~~~~~~~~~~~~~
Python-side shape arithmetic (`x.view(x.shape[0], -1)`) reaches the trace
as constants (PyTorch's tracer records it as Shape/Gather ops).  So when
dynamic_axes names input dims, the model is traced a second time with
each of those dims one longer, and the two graphs are compared node by
node: a Reshape target's dim that is the same in both is a constant; one
that equals its input's dim at the same place in both is copied (ONNX's
0); one that equals, in both, a dim of its input or of a graph input is
read at run time (Shape, Gather, Concat); and one other dim that differs
becomes -1.  A shape with two dims that follow the dynamic sizes in other
ways (2 * batch), and a constant tensor whose shape follows them (a mask
made with ember.ones(T, T)), are refused with an error.
Without dynamic_axes (or when the two traces differ), a Reshape copies
the leading dims kept from its input and writes -1 for the first other
one when the shape has none: right for the traced sizes, and for a batch
size that reaches a leading or the first merged dim.

What it translates (symbolic.py): Linear (Gemm, or MatMul and Add above
2-D), matmul/mm/bmm, add/sub/mul/div/pow with broadcasting and Python
scalars, relu, gelu (Gelu at opset 20, Erf or Tanh below), tanh, sigmoid,
silu, leaky_relu, elu, hardtanh/clamp, exp, log, sqrt, rsqrt, neg, abs,
softmax/log_softmax, conv1d/2d/3d (pads, strides, dilations, groups,
"same"/"valid"), max_pool2d, avg_pool2d, adaptive_avg_pool2d (global or
dividing), batch_norm in eval (BatchNormalization), layer_norm
(LayerNormalization, opset 17 and above), embedding (Gather), dropout in
eval (nothing), view/reshape/flatten (Reshape), transpose/t/permute,
squeeze/unsqueeze, cat/stack, split/chunk/unbind, repeat, basic indexing
(Slice, Gather), mean/sum (ReduceMean/ReduceSum), dtype conversions
(to/float/long/..., Cast).  Any other operator the
outputs depend on raises UnsupportedOperatorError naming it ("Exporting
the operator 'aten::cumsum' to ONNX opset version 17 is not supported");
an unused one is not exported.  Opsets 13 to 20 (TorchScript's exporter
stops at 20); the default is 17, LayerNormalization's first opset
(PyTorch 2.13's is 20).  Not translated: control flow (a trace has none),
training-mode export, RNN/LSTM/GRU as single ONNX operators (a trace
unrolls them), attention as one operator (it is exported as the MatMul
and Softmax it runs), custom opsets, external data for models over 2 GB.
"""

import contextlib
import io
import os

from .. import _C
from .._tensor import Tensor
from .._C import cat
from ..autograd import enable_grad
from ..jit import types as T
from ..jit.ir import Graph
from ..jit.trace import Tracer, _parameter_names, recording
from . import symbolic

DEFAULT_OPSET = 17
SUPPORTED_OPSETS = range(13, 21)    # TorchScript's exporter stops at 20

__all__ = ["export", "DEFAULT_OPSET", "OnnxExporterError", "UnsupportedOperatorError"]


class OnnxExporterError(RuntimeError):
    """The model cannot be written as ONNX (PyTorch's name)."""


class UnsupportedOperatorError(OnnxExporterError):
    """An operator (or its arguments) has no ONNX translation here."""


def export(model, args=(), f=None, *, kwargs=None, export_params=True, verbose=None,
           input_names=None, output_names=None, opset_version=None, dynamo=False,
           keep_initializers_as_inputs=False, dynamic_axes=None,
           do_constant_folding=True, **unsupported):
    """Traces `model(*args)` and writes it to `f` (a path or a binary file
    object) as an ONNX model (Note [Exporting a trace]); returns None.

    `dynamo` is accepted for PyTorch's signature; ember always uses the
    trace-based exporter.  `do_constant_folding` is accepted: a trace
    already holds every value that does not depend on the inputs as a
    constant."""
    try:
        import onnx
    except ModuleNotFoundError as error:
        raise ModuleNotFoundError("ember.onnx.export needs the onnx package "
                                  "(pip install onnx)", name="onnx") from error
    if unsupported:
        raise TypeError(f"ember.onnx.export() does not support the argument(s) "
                        f"{', '.join(sorted(unsupported))}")
    if kwargs:
        raise OnnxExporterError("ember.onnx.export: keyword inputs (kwargs=) are not supported")
    opset = DEFAULT_OPSET if opset_version is None else int(opset_version)
    if opset not in SUPPORTED_OPSETS:
        raise ValueError(f"Unsupported ONNX opset version: {opset}. ember exports "
                         f"opsets {SUPPORTED_OPSETS[0]} to {SUPPORTED_OPSETS[-1]}.")
    args = (args,) if isinstance(args, Tensor) else tuple(args)
    input_names, dynamic_axes = list(input_names or ()), dict(dynamic_axes or {})
    with _eval_mode(model):
        graph, examples, results = _trace(model, args)
        names = symbolic.given_or_default(input_names, [v.debug_name for v in graph.inputs])
        varied = _varied_inputs(args, [dynamic_axes.get(n, ()) for n in names])
        twin = _trace(model, varied)[:2] if varied is not None else None
    proto = symbolic.build_model(
        graph, examples, results, _state_dict_names(model), opset, twin=twin,
        input_names=input_names, output_names=list(output_names or ()),
        dynamic_axes=dynamic_axes, export_params=export_params,
        keep_initializers_as_inputs=keep_initializers_as_inputs)
    onnx.checker.check_model(proto, full_check=True)
    if verbose:
        print(onnx.helper.printable_graph(proto.graph))
    _write(proto, f)


def _varied_inputs(args, dynamic_dims):
    """The inputs with every dynamic dim one longer (its first slice
    repeated, so indices stay valid), for the second trace of Note [Sizes
    that vary]; None when no input dim is dynamic."""
    if not any(dynamic_dims):
        return None
    varied = []
    for x, dims in zip(args, dynamic_dims):
        for dim in dims:
            x = cat([x, x.narrow(dim, 0, 1)], dim)
        varied.append(x)
    return tuple(varied)


def _write(proto, f):
    data = proto.SerializeToString()
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as file:
            file.write(data)
    elif isinstance(f, io.TextIOBase) or not hasattr(f, "write"):
        raise TypeError("ember.onnx.export: f must be a path or a binary file object")
    else:
        f.write(data)


@contextlib.contextmanager
def _eval_mode(model):
    """PyTorch exports in eval mode (training=TrainingMode.EVAL) and puts
    the model back as it was."""
    was_training = getattr(model, "training", None)
    if was_training:
        model.train(False)
    try:
        yield
    finally:
        if was_training:
            model.train(True)


def _state_dict_names(model):
    """id(tensor) -> its state_dict key; a tied tensor keeps its first key."""
    if not hasattr(model, "state_dict"):
        return {}
    names = {}
    for key, tensor in model.state_dict(keep_vars=True).items():
        names.setdefault(id(tensor), key)
    return names


class _ExportTracer(Tracer):
    """A tracer that remembers the tensor each value held, for its shape and
    dtype (an in-place op rebinds a tensor to a new value; the old value
    keeps its entry)."""

    def __init__(self, graph):
        super().__init__(graph)
        self.examples = {}

    def bind(self, obj, value):
        super().bind(obj, value)
        if isinstance(obj, Tensor):
            self.examples[value] = obj


def _trace(model, args):
    """Runs model(*args) under the tracer with the composites of
    symbolic.COMPOSITES recorded whole.  Returns the graph, the example
    tensor of every traced value, and the model's results."""
    for i, x in enumerate(args):
        if not isinstance(x, Tensor):
            raise TypeError(f"ember.onnx.export: input {i} is a {type(x).__name__}, "
                            f"expected a Tensor")
    graph = Graph()
    graph.name = type(model).__name__
    tracer = _ExportTracer(graph)
    names = _parameter_names(getattr(model, "forward", model), len(args))
    for x, name in zip(args, names):
        tracer.bind(x, graph.add_input(name, T.Tensor))
    # Grad mode on: a result of an operation the tracer cannot see (an
    # autograd Function's) then carries a grad_fn, which is how the
    # exporter tells it from a real constant (Exporter.constant_tensor).
    with symbolic.recording_composites(tracer), enable_grad():
        with recording(tracer.record):
            result = model(*args)
    results = list(result) if isinstance(result, (tuple, list)) else [result]
    for i, r in enumerate(results):
        if not isinstance(r, Tensor):
            raise OnnxExporterError(f"ember.onnx.export: output {i} is a "
                                    f"{type(r).__name__}; only tensors can be exported")
    graph.block.set_returns([tracer.value_of(r) for r in results])
    return graph, tracer.examples, results
