"""The activations, losses and distances of issue 12 (ember.nn.functional and
their modules): values and every gradient against PyTorch (float64, points
on each piece's boundary included), gradcheck of each, module reprs and
argument errors.  Pure Python composites over existing C operators."""

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.autograd import gradcheck

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# Inputs that sit on every activation's boundaries (0, +-3, +-1, 6, 20, ...).
BOUNDARY_POINTS = np.array([-25.0, -6.0, -3.0, -2.5, -1.0, -0.5, -1e-3, 0.0, 1e-3, 0.1, 0.5,
                            1.0, 2.0, 3.0, 4.0, 6.0, 7.0, 19.9, 20.0, 20.1, 30.0])


def pair(array, requires_grad=True):
    """(ember tensor, torch tensor) holding the same float64 values."""
    array = np.array(array, dtype=np.float64)
    return (ember.tensor(array, requires_grad=requires_grad),
            torch.tensor(array, requires_grad=requires_grad))


def check_same(ours, theirs, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(),
                               rtol=rtol, atol=atol)


ACTIVATIONS = [
    ("threshold", dict(threshold=0.1, value=20.0)),
    ("leaky_relu", dict(negative_slope=0.2)),
    ("elu", dict(alpha=1.5)),
    ("selu", {}),
    ("celu", dict(alpha=0.7)),
    ("softplus", dict(beta=2.0, threshold=20.0)),
    ("softplus", {}),
    ("softsign", {}),
    ("mish", {}),
    ("hardtanh", dict(min_val=-1.0, max_val=1.0)),
    ("hardtanh", dict(min_val=-2.5, max_val=3.0)),
    ("relu6", {}),
    ("hardsigmoid", {}),
    ("hardswish", {}),
    ("tanhshrink", {}),
    ("hardshrink", dict(lambd=0.5)),
    ("softshrink", dict(lambd=0.5)),
    ("logsigmoid", {}),
]


@pytest.mark.parametrize("name, kwargs", ACTIVATIONS,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(ACTIVATIONS)])
def test_activation_values_and_gradients_match_torch(name, kwargs):
    ours_x, theirs_x = pair(BOUNDARY_POINTS)
    ours = getattr(F, name)(ours_x, **kwargs)
    theirs = getattr(TF, name)(theirs_x, **kwargs)
    check_same(ours, theirs)
    weights = np.linspace(0.5, 1.5, BOUNDARY_POINTS.size)
    (ours * ember.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    # PyTorch's celu backward rounds 1/alpha to float32 (derivatives.yaml:
    # 1.0/alpha.toFloat()); ember keeps it in float64, so they agree to ~1e-7.
    # and its hardsigmoid backward multiplies by a float32 1/6.
    check_same(ours_x.grad, theirs_x.grad,
               rtol=1e-6 if name in ("celu", "hardsigmoid") else 1e-10)


@pytest.mark.parametrize("name, kwargs", ACTIVATIONS,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(ACTIVATIONS)])
def test_activation_gradcheck(name, kwargs):
    # Points away from the kinks, where finite differences are meaningful.
    x = ember.tensor([-4.2, -2.1, -0.7, 0.3, 1.6, 2.4, 5.1], dtype=ember.float64,
                     requires_grad=True)
    assert gradcheck(lambda t: getattr(F, name)(t, **kwargs), (x,))


@pytest.mark.parametrize("name", ["leaky_relu", "elu", "selu", "celu", "hardtanh",
                                  "relu6", "hardsigmoid", "hardswish", "mish", "threshold"])
def test_inplace_forms_write_the_input(name):
    args = (0.5, -1.0) if name == "threshold" else ()
    ours_x = ember.tensor(BOUNDARY_POINTS)
    theirs_x = torch.tensor(BOUNDARY_POINTS)
    ours = getattr(F, name)(ours_x, *args, inplace=True)
    theirs = getattr(TF, name)(theirs_x, *args, inplace=True)
    assert ours is ours_x
    check_same(ours_x, theirs_x)


def test_inplace_on_a_leaf_that_requires_grad_raises_like_torch():
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        F.elu(ember.ones(2, requires_grad=True), inplace=True)


def test_inplace_through_autograd_matches_torch():
    ours_x, theirs_x = pair([-1.0, 0.5, 2.0])
    ours = F.leaky_relu(ours_x * 2, 0.1, inplace=True)
    theirs = TF.leaky_relu(theirs_x * 2, 0.1, inplace=True)
    ours.sum().backward()
    theirs.sum().backward()
    check_same(ours_x.grad, theirs_x.grad)


def test_prelu_and_glu_and_softmin_match_torch():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4))
    ours_x, theirs_x = pair(x)
    ours_w, theirs_w = pair([0.25, -0.5, 1.5])
    check_same(F.prelu(ours_x, ours_w), TF.prelu(theirs_x, theirs_w))
    (F.prelu(ours_x, ours_w) ** 2).sum().backward()
    (TF.prelu(theirs_x, theirs_w) ** 2).sum().backward()
    check_same(ours_x.grad, theirs_x.grad)
    check_same(ours_w.grad, theirs_w.grad)
    ours_x, theirs_x = pair(x)
    check_same(F.glu(ours_x, 2), TF.glu(theirs_x, 2))
    check_same(F.softmin(ours_x, 1), TF.softmin(theirs_x, 1))
    w = ember.tensor([0.3, 0.1, -0.2], dtype=ember.float64, requires_grad=True)
    xg = ember.tensor(x, requires_grad=True)
    assert gradcheck(F.prelu, (xg, w))
    assert gradcheck(lambda t: F.glu(t, 1), (ember.tensor(x[:, :2], requires_grad=True),))
    assert gradcheck(lambda t: F.softmin(t, 2), (xg,))


def test_activation_errors_match_torch():
    def message(call):
        with pytest.raises(Exception) as info:
            call()
        return type(info.value), str(info.value)

    for ours, theirs in [
        (lambda: F.glu(ember.ones(2, 3), 1), lambda: TF.glu(torch.ones(2, 3), 1)),
        (lambda: F.glu(ember.ones(()), 0), lambda: TF.glu(torch.ones(()), 0)),
        (lambda: F.prelu(ember.ones(2, 3), ember.ones(2)),
         lambda: TF.prelu(torch.ones(2, 3), torch.ones(2))),
        (lambda: F.softshrink(ember.ones(2), -1.0), lambda: TF.softshrink(torch.ones(2), -1.0)),
        (lambda: nn.Hardtanh(1.0, 0.0), lambda: torch.nn.Hardtanh(1.0, 0.0)),
    ]:
        ours_type, ours_text = message(ours)
        theirs_type, theirs_text = message(theirs)
        assert ours_type is theirs_type and ours_text == theirs_text


MODULES = [
    ("LeakyReLU", ()), ("LeakyReLU", (0.2, True)), ("ELU", ()), ("SELU", ()), ("CELU", ()),
    ("Softplus", ()), ("Softsign", ()), ("Mish", ()), ("Hardtanh", ()), ("ReLU6", ()),
    ("ReLU6", (True,)), ("Hardswish", ()), ("Hardsigmoid", ()), ("PReLU", ()),
    ("PReLU", (3,)), ("GLU", ()), ("LogSigmoid", ()), ("Softmin", (1,)),
    ("Threshold", (0.1, 20)), ("Tanhshrink", ()), ("Hardshrink", ()), ("Softshrink", ()),
    ("SmoothL1Loss", ()), ("HuberLoss", ()), ("KLDivLoss", ()), ("PoissonNLLLoss", ()),
    ("GaussianNLLLoss", ()), ("CosineEmbeddingLoss", ()), ("MarginRankingLoss", ()),
    ("TripletMarginLoss", ()), ("MultiLabelSoftMarginLoss", ()), ("SoftMarginLoss", ()),
    ("HingeEmbeddingLoss", ()), ("CosineSimilarity", ()), ("PairwiseDistance", ()),
]


@pytest.mark.parametrize("name, args", MODULES)
def test_module_repr_state_and_attributes_match_torch(name, args):
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    public = {k: v for k, v in vars(theirs).items()
              if not k.startswith("_") and k != "training"}
    for key, value in public.items():
        assert getattr(ours, key) == value, key


def test_prelu_module_forward_backward_matches_torch():
    ours, theirs = nn.PReLU(3).double(), torch.nn.PReLU(3).double()
    x = np.random.default_rng(1).standard_normal((4, 3, 2))
    ours_x, theirs_x = pair(x)
    ours(ours_x).pow(2).sum().backward()
    theirs(theirs_x).pow(2).sum().backward()
    check_same(ours.weight.grad, theirs.weight.grad)
    check_same(ours_x.grad, theirs_x.grad)


# ---------------------------------------------------------------- losses

def _loss_inputs(seed=0, shape=(4, 5)):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape), rng.standard_normal(shape)


REDUCTIONS = ["mean", "sum", "none"]


def _compare_loss(ours_fn, theirs_fn, arrays, rtol=1e-10, atol=1e-12):
    ours_in = [pair(a) for a in arrays]
    ours = ours_fn(*[o for o, _ in ours_in])
    theirs = theirs_fn(*[t for _, t in ours_in])
    check_same(ours, theirs, rtol=rtol, atol=atol)
    weights = np.linspace(0.5, 1.5, max(ours.numel(), 1)).reshape(tuple(ours.shape))
    (ours * ember.tensor(weights)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    for (o, t) in ours_in:
        check_same(o.grad, t.grad, rtol=rtol, atol=atol)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("beta", [1.0, 0.5, 0.0])
def test_smooth_l1_and_huber(reduction, beta):
    x, y = _loss_inputs()
    y[0, :3] = x[0, :3] + np.array([0.5, -0.5, 1.0])   # on the |d| = beta boundary
    _compare_loss(lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=beta),
                  lambda a, b: TF.smooth_l1_loss(a, b, reduction=reduction, beta=beta),
                  [x, y])
    if beta > 0:
        _compare_loss(lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=beta),
                      lambda a, b: TF.huber_loss(a, b, reduction=reduction, delta=beta),
                      [x, y])


@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    rng = np.random.default_rng(2)
    log_probs = np.log(rng.dirichlet(np.ones(5), size=4))
    target = rng.dirichlet(np.ones(5), size=4)
    target[0, 0] = 0.0                                  # 0 * log 0 counts as 0
    if log_target:
        target = np.log(target + 1e-3)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _compare_loss(lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target),
                      lambda a, b: TF.kl_div(a, b, reduction=reduction, log_target=log_target),
                      [log_probs, target])


@pytest.mark.parametrize("log_input, full", [(True, False), (False, False), (True, True)])
def test_poisson_nll(log_input, full):
    rng = np.random.default_rng(3)
    x = rng.uniform(0.1, 3, (4, 5)) if not log_input else rng.standard_normal((4, 5))
    target = rng.poisson(2.0, (4, 5)).astype(np.float64)
    _compare_loss(lambda a, b: F.poisson_nll_loss(a, b, log_input=log_input, full=full),
                  lambda a, b: TF.poisson_nll_loss(a, b, log_input=log_input, full=full),
                  [x, target])


@pytest.mark.parametrize("var_shape", [(4, 5), (4,), (4, 1)])
@pytest.mark.parametrize("full", [False, True])
def test_gaussian_nll(var_shape, full):
    x, y = _loss_inputs(4)
    var = np.random.default_rng(5).uniform(1e-8, 2, var_shape)
    var.flat[0] = 1e-9                                  # clamped to eps
    _compare_loss(lambda a, b, v: F.gaussian_nll_loss(a, b, v, full=full),
                  lambda a, b, v: TF.gaussian_nll_loss(a, b, v, full=full),
                  [x, y, var], rtol=1e-8)
    with pytest.raises(ValueError, match="var has negative entry"):
        F.gaussian_nll_loss(ember.ones(2), ember.ones(2), -ember.ones(2))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_margin_and_embedding_losses(reduction):
    rng = np.random.default_rng(6)
    a, b, c = (rng.standard_normal((6, 3)) for _ in range(3))
    sign = np.array([1.0, -1.0, 1.0, -1.0, -1.0, 1.0])
    for ours_fn, theirs_fn, arrays in [
        (lambda x, y: F.cosine_embedding_loss(x, y, ember.tensor(sign), margin=0.2,
                                              reduction=reduction),
         lambda x, y: TF.cosine_embedding_loss(x, y, torch.tensor(sign), margin=0.2,
                                               reduction=reduction), [a, b]),
        (lambda x, y: F.margin_ranking_loss(x, y, ember.tensor(sign[:, None] * np.ones(3)),
                                            margin=0.1, reduction=reduction),
         lambda x, y: TF.margin_ranking_loss(x, y, torch.tensor(sign[:, None] * np.ones(3)),
                                             margin=0.1, reduction=reduction), [a, b]),
        (lambda x, y, z: F.triplet_margin_loss(x, y, z, margin=1.0, p=2, reduction=reduction),
         lambda x, y, z: TF.triplet_margin_loss(x, y, z, margin=1.0, p=2,
                                                reduction=reduction), [a, b, c]),
        (lambda x, y, z: F.triplet_margin_loss(x, y, z, p=1, swap=True, reduction=reduction),
         lambda x, y, z: TF.triplet_margin_loss(x, y, z, p=1, swap=True,
                                                reduction=reduction), [a, b, c]),
        (lambda x: F.hinge_embedding_loss(x, ember.tensor(sign[:, None] * np.ones(3)),
                                          reduction=reduction),
         lambda x: TF.hinge_embedding_loss(x, torch.tensor(sign[:, None] * np.ones(3)),
                                           reduction=reduction), [a]),
        (lambda x: F.soft_margin_loss(x, ember.tensor(sign[:, None] * np.ones(3)),
                                      reduction=reduction),
         lambda x: TF.soft_margin_loss(x, torch.tensor(sign[:, None] * np.ones(3)),
                                       reduction=reduction), [a]),
        (lambda x: F.multilabel_soft_margin_loss(x, ember.tensor((b > 0) * 1.0),
                                                 reduction=reduction),
         lambda x: TF.multilabel_soft_margin_loss(x, torch.tensor((b > 0) * 1.0),
                                                  reduction=reduction), [a]),
    ]:
        _compare_loss(ours_fn, theirs_fn, arrays)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_distances(dim):
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    a[0] = 1e-10                                        # a norm below eps
    # a's first row has a norm below eps: gradients of ~5e8 there.
    _compare_loss(lambda x, y: F.cosine_similarity(x, y, dim=dim),
                  lambda x, y: TF.cosine_similarity(x, y, dim=dim), [a, b], rtol=1e-8,
                  atol=1e-6)
    _compare_loss(lambda x, y: F.normalize(x, p=2.0, dim=dim) + 0 * y,
                  lambda x, y: TF.normalize(x, p=2.0, dim=dim) + 0 * y, [a, b], atol=1e-6)
    for p in (1.0, 2.0, 3.0):
        _compare_loss(lambda x, y: F.pairwise_distance(x, y, p=p, keepdim=dim == 0),
                      lambda x, y: TF.pairwise_distance(x, y, p=p, keepdim=dim == 0), [a, b])


def test_broadcast_cosine_similarity_matches_torch():
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((1, 4)), rng.standard_normal((5, 4))
    _compare_loss(lambda x, y: F.cosine_similarity(x, y, dim=1),
                  lambda x, y: TF.cosine_similarity(x, y, dim=1), [a, b], rtol=1e-8)


LOSS_GRADCHECKS = [
    lambda x, y: F.smooth_l1_loss(x, y, beta=0.7),
    lambda x, y: F.huber_loss(x, y, delta=0.7),
    lambda x, y: F.kl_div(x, y.exp(), reduction="batchmean"),
    lambda x, y: F.kl_div(x, y, reduction="sum", log_target=True),
    lambda x, y: F.poisson_nll_loss(x, y.abs(), full=True),
    lambda x, y: F.gaussian_nll_loss(x, y, (x * x) + 0.5),
    lambda x, y: F.cosine_embedding_loss(x, y, ember.tensor([1.0, -1.0, 1.0])),
    lambda x, y: F.margin_ranking_loss(x, y, -ember.ones(3, 4), margin=5.0),
    lambda x, y: F.triplet_margin_loss(x, y, x * 0.5 + 1.0),
    lambda x, y: F.multilabel_soft_margin_loss(x, (y > 0).double()),
    lambda x, y: F.soft_margin_loss(x, ember.ones(3, 4)),
    lambda x, y: F.hinge_embedding_loss(x, ember.ones(3, 4)),
    lambda x, y: F.cosine_similarity(x, y),
    lambda x, y: F.pairwise_distance(x, y, p=3.0),
    lambda x, y: F.normalize(x, dim=0),
]


@pytest.mark.parametrize("index", range(len(LOSS_GRADCHECKS)))
def test_loss_gradcheck(index):
    rng = np.random.default_rng(index)
    x = ember.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    y = ember.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    assert gradcheck(LOSS_GRADCHECKS[index], (x, y))


def test_loss_argument_errors_match_torch():
    for ours, theirs in [
        (lambda: F.smooth_l1_loss(ember.ones(2), ember.ones(2), beta=-1.0),
         lambda: TF.smooth_l1_loss(torch.ones(2), torch.ones(2), beta=-1.0)),
        (lambda: F.huber_loss(ember.ones(2), ember.ones(2), delta=0.0),
         lambda: TF.huber_loss(torch.ones(2), torch.ones(2), delta=0.0)),
        (lambda: F.kl_div(ember.ones(2), ember.ones(2), reduction="avg"),
         lambda: TF.kl_div(torch.ones(2), torch.ones(2), reduction="avg")),
        (lambda: nn.TripletMarginLoss(margin=0.0), lambda: torch.nn.TripletMarginLoss(margin=0.0)),
        (lambda: F.gaussian_nll_loss(ember.ones(2, 3), ember.ones(2, 3), ember.ones(3)),
         lambda: TF.gaussian_nll_loss(torch.ones(2, 3), torch.ones(2, 3), torch.ones(3))),
    ]:
        with pytest.raises(Exception) as theirs_info:
            theirs()
        with pytest.raises(type(theirs_info.value)) as ours_info:
            ours()
        assert str(ours_info.value) == str(theirs_info.value)
