"""ember.onnx.export: the written model is checked with onnx.checker and run
with onnx's reference evaluator on the inputs ember ran; NumPy compares the
results.  Where torch is installed, the operators and initializer names are
compared with torch.onnx.export(..., dynamo=False) of the same model."""

import io
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F

onnx = pytest.importorskip("onnx")
from onnx.reference import ReferenceEvaluator  # noqa: E402


def export_to_proto(model, args, **kwargs):
    buffer = io.BytesIO()
    ember.onnx.export(model, args, buffer, **kwargs)
    proto = onnx.load_from_string(buffer.getvalue())
    onnx.checker.check_model(proto, full_check=True)
    return proto


def run_onnx(proto, inputs):
    names = [i.name for i in proto.graph.input]
    return ReferenceEvaluator(proto).run(None, {n: np.asarray(x) for n, x in zip(names, inputs)})


def as_numpy(tensors):
    if isinstance(tensors, ember.Tensor):
        tensors = (tensors,)
    return [t.detach().numpy() for t in tensors]


def assert_runs_like_ember(proto, model, *args):
    with ember.no_grad():
        expected = as_numpy(model(*args))
    got = run_onnx(proto, [a.numpy() for a in args])
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def op_types(proto):
    return [n.op_type for n in proto.graph.node]


# ---- the models ----------------------------------------------------------------

def mlp():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        x = self.pool(F.relu(self.bn(self.conv(x))))
        return self.fc(x.flatten(1))


class Block(nn.Module):
    """Pre-norm self-attention and a GELU MLP, with residuals."""

    def __init__(self, d=8):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.up, self.down = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.drop = nn.Dropout(0.1)
        self.scale = d ** 0.5

    def forward(self, x):
        h = self.ln1(x)
        scores = self.q(h) @ self.k(h).transpose(-2, -1) / self.scale
        x = x + self.drop(F.softmax(scores, dim=-1)) @ self.v(h)
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Bag(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 6)
        self.fc = nn.Linear(6, 4)

    def forward(self, idx):
        return F.log_softmax(self.fc(self.emb(idx).mean(1)), dim=-1)


def trained_cnn():
    ember.manual_seed(1)
    model = SmallCNN()
    with ember.no_grad():       # running statistics that are not 0 and 1
        model(ember.randn(8, 3, 8, 8) * 2 + 1)
    return model.eval()


# ---- the tests -------------------------------------------------------------------

def test_mlp_runs_like_ember_and_names_initializers_by_state_dict():
    model, x = mlp(), ember.randn(2, 4)
    proto = export_to_proto(model, (x,))
    assert op_types(proto) == ["Gemm", "Relu", "Gemm"]
    assert [i.name for i in proto.graph.initializer] == list(model.state_dict())
    assert [i.name for i in proto.graph.input] == ["input"]
    assert [o.name for o in proto.graph.output] == ["output"]
    assert_runs_like_ember(proto, model, x)


def test_cnn_conv_batchnorm_relu_pool_linear():
    model, x = trained_cnn(), ember.randn(2, 3, 8, 8)
    proto = export_to_proto(model, x)
    assert op_types(proto) == ["Conv", "BatchNormalization", "Relu", "MaxPool", "Reshape",
                               "Gemm"]
    assert {i.name for i in proto.graph.initializer} >= set(
        k for k in model.state_dict() if "num_batches_tracked" not in k)
    assert_runs_like_ember(proto, model, x)


def test_transformer_block():
    ember.manual_seed(2)
    model, x = Block().eval(), ember.randn(2, 5, 8)
    proto = export_to_proto(model, x)
    ops = op_types(proto)
    assert "LayerNormalization" in ops and "Softmax" in ops and "Erf" in ops
    assert "Dropout" not in ops
    assert_runs_like_ember(proto, model, x)


def test_embedding_model():
    ember.manual_seed(3)
    model, idx = Bag(), ember.tensor([[1, 2, 3], [4, 5, 19]])
    proto = export_to_proto(model, idx, input_names=["tokens"])
    assert op_types(proto) == ["Gather", "ReduceMean", "Gemm", "LogSoftmax"]
    assert proto.graph.input[0].name == "tokens"
    assert_runs_like_ember(proto, model, idx)


def test_dynamic_axes_run_with_another_batch_size():
    model = trained_cnn()
    proto = export_to_proto(model, ember.randn(2, 3, 8, 8), input_names=["image"],
                            output_names=["logits"],
                            dynamic_axes={"image": {0: "batch"}, "logits": [0]})
    dims = proto.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch" and [d.dim_value for d in dims[1:]] == [3, 8, 8]
    assert proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param == \
        "logits_dynamic_axes_1"
    assert_runs_like_ember(proto, model, ember.randn(5, 3, 8, 8))


def test_dynamic_sequence_and_batch_in_the_block():
    ember.manual_seed(4)
    model = Block().eval()
    proto = export_to_proto(model, ember.randn(2, 5, 8),
                            dynamic_axes={"x": {0: "batch", 1: "seq"}})
    assert_runs_like_ember(proto, model, ember.randn(3, 7, 8))


def test_arithmetic_with_broadcasting_scalars_and_shape_ops():
    def f(x, y):
        z = (2 - x) * 3 + x / y - y ** 2           # (3, 4) with (1, 4)
        z = ember.cat([z, x.t().reshape(3, 4)], dim=0).permute(1, 0)  # (4, 6)
        w = z.view(2, 2, 6).sum(dim=1, keepdim=True).mean(-1)
        return ember.tanh(w).sigmoid(), z.sum(0), F.gelu(z, approximate="tanh")
    x, y = ember.randn(3, 4), ember.rand(1, 4) + 0.5
    proto = export_to_proto(f, (x, y), output_names=["a"])
    assert [o.name for o in proto.graph.output] == ["a", "output1", "output2"]
    assert_runs_like_ember(proto, f, x, y)
    for opset in (13, 18):    # Reduce*'s axes: attributes, then inputs
        assert_runs_like_ember(export_to_proto(f, (x, y), opset_version=opset), f, x, y)
    with pytest.raises(RuntimeError, match=r"number of output names provided \(4\) exceeded"):
        export_to_proto(f, (x, y), output_names=list("abcd"))


def test_grouped_strided_dilated_conv_and_avg_pool():
    ember.manual_seed(5)
    w, b = ember.randn(6, 2, 3, 3), ember.randn(6)

    def f(x):
        y = F.conv2d(x, w, b, stride=2, padding=(2, 1), dilation=2, groups=2)
        z = F.conv2d(x, w[:, :2].repeat(1, 2, 1, 1)[:2], None, padding="same")
        return F.avg_pool2d(y, 2, stride=1, padding=1, count_include_pad=False), z
    x = ember.randn(1, 4, 9, 9)
    proto = export_to_proto(f, x)
    assert op_types(proto).count("Conv") == 2
    assert_runs_like_ember(proto, f, x)


def test_conv3d_with_per_dim_geometry_and_same_padding():
    ember.manual_seed(6)
    model = nn.Sequential(nn.Conv3d(2, 4, (3, 2, 3), stride=(1, 2, 1), padding=(1, 0, 2),
                                    dilation=(2, 1, 1), groups=2), nn.ReLU(),
                          nn.Conv3d(4, 3, (2, 3, 4), padding="same")).eval()
    x = ember.randn(2, 2, 5, 6, 5)
    proto = export_to_proto(model, (x,))
    assert op_types(proto) == ["Conv", "Relu", "Conv"]
    assert_runs_like_ember(proto, model, x)


@pytest.mark.filterwarnings("ignore::ember.jit.TracerWarning")
def test_library_transformer_layer_with_dynamic_batch_and_sequence():
    # Its attention reshapes (B, T, E) -> (T, B * heads, E / heads) and
    # back through (T * B, E): sizes read from the input at run time.
    ember.manual_seed(7)
    model = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).eval()
    proto = export_to_proto(model, ember.randn(2, 3, 8), dynamic_axes={"src": [0, 1]})
    assert {"LayerNormalization", "Split", "Softmax", "Shape"} <= set(op_types(proto))
    assert_runs_like_ember(proto, model, ember.randn(4, 5, 8))
    assert_runs_like_ember(proto, model, ember.randn(1, 2, 8))


def test_sizes_that_follow_dynamic_axes_in_ways_a_trace_cannot_see():
    def mask(x):
        return x + ember.ones(x.shape[1])
    with pytest.raises(ember.onnx.OnnxExporterError, match="changes shape with the dynamic"):
        export_to_proto(mask, ember.randn(2, 3), dynamic_axes={"x": [1]})
    export_to_proto(mask, ember.randn(2, 3), dynamic_axes={"x": [0]})

    def doubled(x):
        return x.reshape(x.shape[0] * 2, -1)
    with pytest.raises(ember.onnx.OnnxExporterError, match="two sizes follow the dynamic"):
        export_to_proto(doubled, ember.randn(2, 4), dynamic_axes={"x": [0]})


def test_more_activations_adaptive_pool_split_stack_and_an_unrolled_gru():
    def f(x):
        a, b = x.chunk(2, dim=1)
        pooled = F.adaptive_avg_pool2d(F.silu(a), 1).flatten(1)
        halves = F.adaptive_avg_pool2d(F.elu(b), (2, 4))
        parts = ember.stack(x.split([1, 3], dim=1)[1].unbind(1), dim=-1)
        return pooled, F.leaky_relu(halves, 0.1), x.clamp(-0.5, 0.5), F.hardtanh(parts)
    x = ember.randn(2, 4, 4, 4)
    assert_runs_like_ember(export_to_proto(f, x), f, x)
    ember.manual_seed(8)
    gru = nn.GRU(4, 3, batch_first=True)
    x = ember.randn(2, 3, 4)
    assert_runs_like_ember(export_to_proto(gru, x), gru, x)


def test_dtype_conversions():
    def f(x, idx):
        return x.to(ember.float64) * idx.float(), (x * 10).long() + idx, x.to(idx.dtype)
    x, idx = ember.randn(2, 3), ember.tensor([[1, 2, 3], [4, 5, 6]])
    proto = export_to_proto(f, (x, idx))
    assert "Cast" in op_types(proto)
    assert_runs_like_ember(proto, f, x, idx)


def test_basic_indexing():
    def f(x):
        return x[:, 0] * 2, x[..., 1:3], x[1, ::2, -1]
    x = ember.randn(2, 3, 4)
    proto = export_to_proto(f, x)
    assert set(op_types(proto)) >= {"Slice", "Gather"}
    assert_runs_like_ember(proto, f, x)


def test_opset_20_uses_gelu_and_opset_13_has_no_layer_norm():
    ember.manual_seed(6)
    model, x = Block().eval(), ember.randn(1, 3, 8)
    proto = export_to_proto(model, x, opset_version=20)
    assert "Gelu" in op_types(proto) and proto.opset_import[0].version == 20
    assert_runs_like_ember(proto, model, x)
    with pytest.raises(RuntimeError, match="'aten::layer_norm' to ONNX opset version 13"):
        export_to_proto(model, x, opset_version=13)
    with pytest.raises(ValueError, match="Unsupported ONNX opset version: 99"):
        export_to_proto(model, x, opset_version=99)


def test_unsupported_operator_is_named():
    def f(x):
        return ember.cumsum(x, 0) + 1
    with pytest.raises(ember.onnx.UnsupportedOperatorError,
                       match=r"Exporting the operator 'aten::cumsum' to ONNX opset "
                             r"version 17 is not supported"):
        export_to_proto(f, ember.randn(3))


class Doubled(ember.autograd.Function):
    """Computes through NumPy, which the tracer cannot see."""

    @staticmethod
    def forward(ctx, x):
        return ember.from_numpy(x.detach().numpy() * 2)

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def test_a_result_the_tracer_cannot_see_is_not_baked_in():
    layer = nn.Linear(3, 3)

    def f(x):
        return Doubled.apply(layer(x)).relu()
    with ember.no_grad(), pytest.raises(ember.onnx.OnnxExporterError,
                                        match="operation the tracer cannot record"):
        export_to_proto(f, ember.randn(2, 3))


def test_unused_values_are_not_exported():
    def f(x):
        ember.cumsum(x, 0)          # traced, unused: no error, no node
        return x.relu()
    proto = export_to_proto(f, ember.randn(3))
    assert op_types(proto) == ["Relu"]


def test_file_path_and_bytesio_write_the_same_model(tmp_path):
    model, x = mlp(), ember.randn(2, 4)
    path = tmp_path / "mlp.onnx"
    ember.onnx.export(model, (x,), str(path))
    buffer = io.BytesIO()
    ember.onnx.export(model, (x,), buffer)
    assert path.read_bytes() == buffer.getvalue()
    assert_runs_like_ember(onnx.load(str(path)), model, x)


def test_export_params_false_makes_parameters_inputs():
    model, x = mlp(), ember.randn(2, 4)
    proto = export_to_proto(model, x, export_params=False)
    assert not proto.graph.initializer
    assert [i.name for i in proto.graph.input] == ["input"] + list(model.state_dict())
    params = [p.detach().numpy() for p in model.state_dict().values()]
    got = run_onnx(proto, [x.numpy()] + params)
    np.testing.assert_allclose(got[0], model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    proto = export_to_proto(model, x, keep_initializers_as_inputs=True)
    assert [i.name for i in proto.graph.input] == ["input"] + list(model.state_dict())
    assert [i.name for i in proto.graph.initializer] == list(model.state_dict())


def test_exports_in_eval_mode_and_restores_training():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    proto = export_to_proto(model, ember.randn(2, 4))
    assert op_types(proto) == ["Gemm"]
    assert model.training and model[1].training


def test_bad_arguments():
    model, x = mlp(), ember.randn(2, 4)
    with pytest.raises(TypeError, match="input 0 is a list"):
        ember.onnx.export(model, ([1.0, 2.0],), io.BytesIO())
    with pytest.raises(TypeError, match="binary file object"):
        ember.onnx.export(model, x, io.StringIO())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        export_to_proto(model, x, dynamic_axes={"nope": [0]})
    assert any("Provided key nope for dynamic axes" in str(w.message) for w in caught)


def test_same_operators_and_initializers_as_torch():
    torch = pytest.importorskip("torch")

    def torch_export(model, x):
        buffer = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (x,), buffer, dynamo=False, opset_version=17)
        return onnx.load_from_string(buffer.getvalue())

    torch_mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                    torch.nn.Linear(8, 3))
    expected = torch_export(torch_mlp, torch.randn(2, 4))
    got = export_to_proto(mlp(), ember.randn(2, 4))
    assert op_types(got) == op_types(expected)
    assert [i.name for i in got.graph.initializer] == [i.name for i in expected.graph.initializer]

    class TorchBag(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.fc = torch.nn.Embedding(20, 6), torch.nn.Linear(6, 4)

        def forward(self, idx):
            return torch.nn.functional.log_softmax(self.fc(self.emb(idx).mean(1)), dim=-1)
    expected = torch_export(TorchBag(), torch.tensor([[1, 2, 3]]))
    got = export_to_proto(Bag(), ember.tensor([[1, 2, 3]]))
    assert op_types(got) == op_types(expected)
    assert [i.name for i in got.graph.initializer] == [i.name for i in expected.graph.initializer]


def test_onnxruntime_runs_the_exported_models_where_installed():
    ort = pytest.importorskip("onnxruntime")
    ember.manual_seed(9)
    cases = [(mlp(), ember.randn(3, 4)), (trained_cnn(), ember.randn(2, 3, 8, 8)),
             (Block().eval(), ember.randn(2, 5, 8)), (Bag(), ember.tensor([[1, 2], [3, 4]]))]
    for model, x in cases:
        buffer = io.BytesIO()
        ember.onnx.export(model, x, buffer)
        session = ort.InferenceSession(buffer.getvalue(), providers=["CPUExecutionProvider"])
        got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
        with ember.no_grad():
            np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-4, atol=1e-5)
