"""Pictures of graphs: ember.autograd.graph.to_dot/to_svg and the jit's
Graph.to_dot().  The tests read the DOT text; rendering needs Graphviz's
`dot` and is skipped without it."""

import re
import shutil

import pytest

import ember
from ember import nn
from ember.autograd.graph import to_dot, to_svg

needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz's dot is not installed")


def labels(dot_text):
    return dict(re.findall(r'^\s*(\w+) \[.*?label="((?:[^"\\]|\\.)*)"', dot_text, re.M))


def edges(dot_text):
    return re.findall(r"^\s*(\w+) -> (\w+)", dot_text, re.M)


def test_nodes_are_named_as_grad_fn_prints_them():
    x = ember.ones(2, 3, requires_grad=True)
    w = ember.ones(3, requires_grad=True)
    loss = (x * w).exp().sum()
    text = to_dot(loss)
    names = labels(text)
    chain = [loss.grad_fn, loss.grad_fn.next_functions[0][0],
             loss.grad_fn.next_functions[0][0].next_functions[0][0]]
    assert [names[f"n{i}"] for i in (1, 2, 3)] == [type(n).__name__ for n in chain] \
        == ["SumBackward0", "ExpBackward0", "MulBackward0"]
    # gradient direction: result -> SumBackward0 -> ... -> the leaves
    assert ("t0", "n1") in edges(text) and ("n1", "n2") in edges(text)
    leaves = [names[a] for a in names if names[a].startswith("AccumulateGrad")]
    assert leaves == ["AccumulateGrad\\n[2, 3] float32", "AccumulateGrad\\n[3] float32"]
    # saved tensors with their shapes: exp saved its output, mul both factors
    assert names["n2_s0"] == "saved output\\n[2, 3] float32"
    assert names["n3_s0"] == "saved 0\\n[2, 3] float32"
    assert names["n3_s1"] == "saved 1\\n[3] float32"


def test_output_is_deterministic_and_names_parameters():
    def draw():
        ember.manual_seed(0)
        model = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1))
        loss = model(ember.randn(4, 2)).sum()
        return to_dot(loss, params=dict(model.named_parameters()))
    first = draw()
    assert first == draw()
    named = [label for label in labels(first).values() if label.startswith("AccumulateGrad")]
    assert sorted(named) == sorted(
        f"AccumulateGrad\\n{name}\\n{shape} float32"
        for name, shape in [("0.weight", [3, 2]), ("0.bias", [3]),
                            ("2.weight", [1, 3]), ("2.bias", [1])])


def test_a_node_reached_twice_is_drawn_once():
    x = ember.ones(3, requires_grad=True)
    y = x.exp()
    text = to_dot(y * y)
    assert list(labels(text).values()).count("ExpBackward0") == 1
    assert edges(text).count(("n1", "n2")) == 2     # both factors are y


def test_a_leaf_and_a_tensor_without_history():
    leaf = ember.ones(2, requires_grad=True)
    assert "AccumulateGrad\\n[2] float32" in to_dot(leaf)
    assert edges(to_dot(ember.ones(2))) == []
    with pytest.raises(TypeError, match="expects a tensor"):
        to_dot([1, 2])


def test_after_backward_the_released_saves_are_not_drawn():
    x = ember.ones(3, requires_grad=True)
    loss = (x * x).sum()
    assert "saved 0" in to_dot(loss)
    loss.backward()
    assert "saved" not in to_dot(loss)


def test_names_match_pytorch():
    torch = pytest.importorskip("torch")

    def chain(fn):
        names, node = [], fn
        while node is not None and type(node).__name__ != "AccumulateGrad":
            names.append(type(node).__name__)
            node = node.next_functions[0][0]
        return names

    ours = ember.ones(3, requires_grad=True)
    theirs = torch.ones(3, requires_grad=True)
    expected = chain(((theirs * 2).exp().sum()).grad_fn)
    drawn = [label for label in labels(to_dot((ours * 2).exp().sum())).values()
             if "Backward" in label]
    assert drawn == expected


def test_to_svg_without_dot_says_so(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="Graphviz's `dot` program"):
        to_svg(ember.ones(2, requires_grad=True) * 2)


@needs_dot
def test_to_svg_writes_the_rendering(tmp_path):
    path = tmp_path / "graph.svg"
    svg = to_svg(ember.ones(2, requires_grad=True).exp(), path)
    assert "<svg" in svg and path.read_text() == svg
    assert "ExpBackward0" in svg


# ---- the jit's IR ---------------------------------------------------------------


def branchy(x, n: int):
    if n > 0:
        y = x * n
    else:
        y = -x
    return y + 1


def elementwise(x, w):
    h = x * w
    return (h + 0.5 * h * h).tanh()


def test_ir_blocks_are_clusters():
    scripted = ember.jit.script(branchy)
    graph = scripted.graph_for(ember.ones(2, 2), 3)
    text = graph.to_dot()
    assert text == graph.to_dot()
    assert text.count("subgraph cluster_") == 2
    assert 'label="prim::If block0"' in text and 'label="prim::If block1"' in text
    # node labels use the printer's value names
    assert '"%y : Tensor(float32, 2d) =\\nprim::If"' in text
    assert '"%x : Tensor(float32, 2d)"' in text
    assert "return (" in text


def test_ir_fusion_group_is_boxed_with_its_subgraph():
    scripted = ember.jit.script(elementwise)
    x = ember.ones(4, 4)
    graph = scripted.graph_for(x, x)
    assert "prim::FusionGroup_0" in str(graph)
    text = graph.to_dot()
    assert 'label="prim::FusionGroup_0"' in text
    assert "aten::tanh" in text     # the subgraph is drawn inside
    # each group input feeds a subgraph input
    assert len(re.findall(r'"%[xw] : Tensor\(float32, 2d\)"', text)) == 4


def test_ir_loop_body_is_a_cluster():
    def loop(x, n: int):
        for i in range(n):
            x = x * 2
        return x

    text = ember.jit.script(loop).graph.to_dot()
    assert 'label="prim::Loop block0"' in text
