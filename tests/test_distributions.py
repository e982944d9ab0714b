"""ember.distributions against torch.distributions with the same
parameters: log_prob, entropy, cdf/icdf, moments, kl_divergence and their
gradients; sample shapes and sample statistics; argument validation and
its messages."""

import math

import numpy as np
import pytest

import ember
from ember import distributions as D
from ember.autograd import gradcheck

torch = pytest.importorskip("torch")
TD = torch.distributions


def t64(*shape, seed=0, low=None):
    values = np.random.default_rng(seed).standard_normal(shape)
    return np.abs(values) + low if low is not None else values


def both(array, grad=True):
    """(ember tensor, torch tensor) of the same float64 values."""
    ours = ember.tensor(np.array(array, dtype=np.float64))
    theirs = torch.tensor(np.array(array, dtype=np.float64))
    if grad:
        ours.requires_grad_()
        theirs.requires_grad_()
    return ours, theirs


def close(ours, theirs):
    assert list(ours.shape) == list(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(),
                               rtol=1e-10, atol=1e-12)


# name -> (parameters as arrays, values in the support for log_prob)
FAMILIES = {
    "Normal": (lambda: {"loc": t64(2, 3), "scale": t64(2, 3, seed=1, low=0.2)},
               lambda: t64(4, 2, 3, seed=2)),
    "Categorical_probs": (lambda: {"probs": t64(2, 4, low=0.1)},
                          lambda: np.array([[0, 3], [2, 1], [1, 1]])),
    "Categorical_logits": (lambda: {"logits": t64(2, 4)},
                           lambda: np.array([[0, 3], [2, 1], [1, 1]])),
    "Bernoulli_probs": (lambda: {"probs": np.array([0.1, 0.5, 0.9])},
                        lambda: np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])),
    "Bernoulli_logits": (lambda: {"logits": t64(3)},
                         lambda: np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])),
    "Uniform": (lambda: {"low": t64(3), "high": t64(3) + t64(3, seed=1, low=0.5)},
                lambda: t64(3) + 0.25),
    "Exponential": (lambda: {"rate": t64(2, 3, low=0.3)}, lambda: t64(2, 3, seed=3, low=0.0)),
    "Laplace": (lambda: {"loc": t64(3), "scale": t64(3, seed=1, low=0.2)},
                lambda: t64(5, 3, seed=2)),
    "Poisson": (lambda: {"rate": t64(4, low=0.5)}, lambda: np.array([0.0, 1.0, 3.0, 7.0])),
    "OneHotCategorical_probs": (lambda: {"probs": t64(2, 3, low=0.1)},
                                lambda: np.array([[[1.0, 0, 0], [0, 0, 1.0]],
                                                  [[0, 1.0, 0], [0, 1.0, 0]]])),
    "MultivariateNormal_covariance_matrix": (
        lambda: {"loc": t64(2, 3), "covariance_matrix": _spd(3)},
        lambda: t64(4, 2, 3, seed=5)),
    "MultivariateNormal_scale_tril": (
        lambda: {"loc": t64(3), "scale_tril": np.linalg.cholesky(_spd(2, 3, seed=2))},
        lambda: t64(2, 3, seed=5)),
    "MultivariateNormal_precision_matrix": (
        lambda: {"loc": t64(3), "precision_matrix": _spd(3, seed=4)},
        lambda: t64(2, 3, seed=5)),
}


def _spd(*shape, seed=1):
    """Symmetric positive definite matrices of shape (..., n, n)."""
    a = t64(*shape, shape[-1], seed=seed)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def build(family, params, lib):
    name = family.split("_")[0]
    if name == "MultivariateNormal":   # symmetrised, so both see the same matrix
        params = {k: (v + v.mT) / 2 if k.endswith("matrix") else v for k, v in params.items()}
    return getattr(lib.distributions, name)(**params)


def value_for(family, array, lib):
    if family.startswith("Categorical"):
        return lib.tensor(array, dtype=lib.int64)
    return lib.tensor(np.array(array, dtype=np.float64))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_log_prob_entropy_and_moments_match_torch(family):
    params, values = FAMILIES[family]
    pairs = {k: both(v) for k, v in params().items()}
    ours = build(family, {k: p[0] for k, p in pairs.items()}, ember)
    theirs = build(family, {k: p[1] for k, p in pairs.items()}, torch)
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    assert tuple(ours.event_shape) == tuple(theirs.event_shape)
    assert repr(ours).replace("ember.", "torch.") == repr(theirs)
    value = values()
    results = [(ours.log_prob(value_for(family, value, ember)),
                theirs.log_prob(value_for(family, value, torch)))]
    if family != "Poisson":   # neither library has a Poisson entropy
        results.append((ours.entropy(), theirs.entropy()))
    else:
        with pytest.raises(NotImplementedError):
            ours.entropy()
    for ours_result, theirs_result in results:
        close(ours_result, theirs_result)
    for moment in ("mean", "variance", "stddev", "mode"):
        o, t = getattr(ours, moment), getattr(theirs, moment)
        np.testing.assert_allclose(o.detach().numpy(), t.detach().numpy(), rtol=1e-10,
                                   equal_nan=True)
    total_ours = sum(r.sum() for r, _ in results)
    total_theirs = sum(r.sum() for _, r in results)
    total_ours.backward()
    total_theirs.backward()
    for o, t in pairs.values():
        close(o.grad, t.grad)


@pytest.mark.parametrize("name", ["Normal", "Uniform", "Exponential", "Laplace"])
def test_cdf_and_icdf_match_torch(name):
    params = {"Normal": {"loc": t64(3), "scale": t64(3, seed=1, low=0.5)},
              "Uniform": {"low": t64(3), "high": t64(3) + 1.0},
              "Exponential": {"rate": t64(3, low=0.5)},
              "Laplace": {"loc": t64(3), "scale": t64(3, seed=1, low=0.5)}}[name]
    ours = getattr(D, name)(**{k: ember.tensor(v) for k, v in params.items()})
    theirs = getattr(TD, name)(**{k: torch.tensor(v) for k, v in params.items()})
    quantiles = np.array([0.1, 0.5, 0.8])
    close(ours.icdf(ember.tensor(quantiles)), theirs.icdf(torch.tensor(quantiles)))
    inside = theirs.icdf(torch.tensor(quantiles)).numpy()
    close(ours.cdf(ember.tensor(inside)), theirs.cdf(torch.tensor(inside)))


def test_independent_sums_the_reinterpreted_dims_as_torch():
    loc, scale = t64(2, 3), t64(2, 3, seed=1, low=0.2)
    ours = D.Independent(D.Normal(ember.tensor(loc), ember.tensor(scale)), 1)
    theirs = TD.Independent(TD.Normal(torch.tensor(loc), torch.tensor(scale)), 1)
    assert repr(ours).replace("ember.", "torch.") == repr(theirs)
    assert (tuple(ours.batch_shape), tuple(ours.event_shape)) == ((2,), (3,))
    value = t64(5, 2, 3, seed=4)
    close(ours.log_prob(ember.tensor(value)), theirs.log_prob(torch.tensor(value)))
    close(ours.entropy(), theirs.entropy())
    other = (t64(2, 3, seed=5), t64(2, 3, seed=6, low=0.3))
    close(D.kl_divergence(ours, D.Independent(D.Normal(*map(ember.tensor, other)), 1)),
          TD.kl_divergence(theirs, TD.Independent(TD.Normal(*map(torch.tensor, other)), 1)))


KL_PAIRS = [
    ("Normal", {"loc": t64(3), "scale": t64(3, low=0.5)},
     {"loc": t64(3, seed=1), "scale": t64(3, seed=2, low=0.5)}),
    ("Categorical", {"probs": np.array([[0.2, 0.0, 0.8], [0.5, 0.25, 0.25]])},
     {"probs": np.array([[0.1, 0.4, 0.5], [0.5, 0.5, 0.0]])}),
    ("Bernoulli", {"probs": np.array([0.0, 0.3, 1.0, 0.6])},
     {"probs": np.array([0.2, 0.0, 0.5, 1.0])}),
    ("Uniform", {"low": np.array([0.0, 0.0]), "high": np.array([1.0, 2.0])},
     {"low": np.array([-1.0, 0.5]), "high": np.array([2.0, 3.0])}),
    ("Exponential", {"rate": t64(3, low=0.2)}, {"rate": t64(3, seed=1, low=0.2)}),
    ("Laplace", {"loc": t64(3), "scale": t64(3, low=0.5)},
     {"loc": t64(3, seed=1), "scale": t64(3, seed=2, low=0.5)}),
    ("Poisson", {"rate": t64(3, low=0.2)}, {"rate": t64(3, seed=1, low=0.2)}),
    ("OneHotCategorical", {"probs": np.array([[0.2, 0.0, 0.8]])},
     {"probs": np.array([[0.1, 0.4, 0.5]])}),
    ("MultivariateNormal", {"loc": t64(2, 3), "scale_tril": np.linalg.cholesky(_spd(3))},
     {"loc": t64(3, seed=1), "scale_tril": np.linalg.cholesky(_spd(2, 3, seed=3))}),
]


@pytest.mark.parametrize("name, p, q", KL_PAIRS, ids=[pair[0] for pair in KL_PAIRS])
def test_kl_divergence_matches_torch_including_infinite_cases(name, p, q):
    def make(lib, params):
        return getattr(lib.distributions, name)(**{k: lib.tensor(v) for k, v in params.items()})
    close(D.kl_divergence(make(ember, p), make(ember, q)),
          TD.kl_divergence(make(torch, p), make(torch, q)))


def test_kl_divergence_of_unregistered_pairs_raises_as_torch():
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for "
                                                  "p type Normal and q type Bernoulli"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Bernoulli(0.5))


def test_register_kl_picks_the_most_specific_pair():
    class Wide(D.Normal):
        pass

    @D.register_kl(Wide, D.Normal)
    def _(p, q):
        return ember.tensor(-1.0)

    assert D.kl_divergence(Wide(0.0, 1.0), D.Normal(0.0, 1.0)).item() == -1.0
    assert D.kl_divergence(D.Normal(0.0, 1.0), D.Normal(0.0, 1.0)).item() == 0.0


@pytest.mark.parametrize("function", [
    lambda loc, scale: D.Normal(loc, scale).log_prob(ember.tensor([0.3, -1.0, 2.0],
                                                                  dtype=ember.float64)),
    lambda loc, scale: D.Normal(loc, scale).entropy(),
    lambda loc, scale: D.Normal(loc, scale).cdf(ember.tensor([0.3, -1.0, 2.0],
                                                             dtype=ember.float64)),
    lambda loc, scale: D.kl_divergence(D.Normal(loc, scale), D.Normal(scale, loc.exp())),
    lambda loc, scale: D.Categorical(logits=loc).log_prob(ember.tensor([0, 2])),
    lambda loc, scale: D.Categorical(probs=scale).entropy(),
    lambda loc, scale: D.Bernoulli(logits=loc).log_prob(ember.tensor([1.0, 0.0, 1.0],
                                                                     dtype=ember.float64)),
    lambda loc, scale: D.Bernoulli(logits=loc).entropy(),
    lambda loc, scale: D.Uniform(loc, loc + scale).entropy(),
    lambda loc, scale: D.Laplace(loc, scale).log_prob(ember.tensor([0.5, -1.0, 0.2],
                                                                    dtype=ember.float64)),
    lambda loc, scale: D.kl_divergence(D.Exponential(scale), D.Exponential(scale ** 2)),
    lambda loc, scale: D.Poisson(scale).log_prob(ember.tensor([0.0, 2.0, 5.0],
                                                              dtype=ember.float64)),
    lambda loc, scale: D.MultivariateNormal(
        loc, scale_tril=ember.diag(scale) + ember.tril(loc.outer(scale), -1)).log_prob(
            ember.tensor([0.5, -1.0, 0.2], dtype=ember.float64)),
    lambda loc, scale: D.MultivariateNormal(
        loc, covariance_matrix=ember.diag(scale + 1) + 0.1).entropy(),
])
def test_gradcheck(function):
    loc = ember.tensor([0.2, -0.4, 1.1], dtype=ember.float64, requires_grad=True)
    scale = ember.tensor([0.7, 1.3, 0.5], dtype=ember.float64, requires_grad=True)
    assert gradcheck(function, (loc, scale))


def test_rsample_carries_gradients_to_the_parameters():
    ember.manual_seed(0)
    loc = ember.zeros(3, dtype=ember.float64, requires_grad=True)
    scale = ember.ones(3, dtype=ember.float64, requires_grad=True)
    draw = D.Normal(loc, scale).rsample((5,))
    draw.sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [5.0, 5.0, 5.0])
    eps = (draw.detach() - loc.detach()) / scale.detach()
    np.testing.assert_allclose(scale.grad.numpy(), eps.sum(0).numpy())
    assert D.Normal(loc, scale).sample((2,)).requires_grad is False


@pytest.mark.parametrize("make, shape", [
    (lambda: D.Normal(ember.zeros(2, 3), 1.0), (4, 2, 3)),
    (lambda: D.Categorical(logits=ember.zeros(2, 5)), (4, 2)),
    (lambda: D.Bernoulli(ember.full((3,), 0.5)), (4, 3)),
    (lambda: D.Uniform(0.0, ember.ones(2)), (4, 2)),
    (lambda: D.Independent(D.Normal(ember.zeros(2, 3), 1.0), 2), (4, 2, 3)),
    (lambda: D.Exponential(ember.ones(2)), (4, 2)),
    (lambda: D.Laplace(ember.zeros(2), 1.0), (4, 2)),
    (lambda: D.Poisson(ember.ones(3)), (4, 3)),
    (lambda: D.OneHotCategorical(logits=ember.zeros(2, 5)), (4, 2, 5)),
    (lambda: D.MultivariateNormal(ember.zeros(2, 3), ember.eye(3)), (4, 2, 3)),
])
def test_sample_shapes(make, shape):
    distribution = make()
    assert tuple(distribution.sample((4,)).shape) == shape
    assert tuple(distribution.sample().shape) == shape[1:]


def test_samples_follow_the_distributions():
    """Fixed seed, 20000 draws: the sample mean within 5 standard errors."""
    ember.manual_seed(1)
    n = 20000
    probs = ember.tensor([0.1, 0.2, 0.7], dtype=ember.float64)
    counts = np.bincount(D.Categorical(probs).sample((n,)).numpy(), minlength=3) / n
    np.testing.assert_allclose(counts, probs.numpy(), atol=5 * math.sqrt(0.25 / n))
    normal = D.Normal(ember.tensor([1.0, -2.0]), ember.tensor([0.5, 3.0])).sample((n,))
    np.testing.assert_allclose(normal.numpy().mean(0), [1.0, -2.0],
                               atol=5 * 3.0 / math.sqrt(n))
    np.testing.assert_allclose(normal.numpy().std(0), [0.5, 3.0], rtol=0.05)
    heads = D.Bernoulli(0.3).sample((n,)).numpy().mean()
    assert abs(heads - 0.3) < 5 * math.sqrt(0.21 / n)
    waits = D.Exponential(ember.tensor(4.0, dtype=ember.float64)).sample((n,)).numpy()
    assert abs(waits.mean() - 0.25) < 5 * 0.25 / math.sqrt(n)
    counts = D.Poisson(ember.tensor(3.0)).sample((n,)).numpy()
    assert abs(counts.mean() - 3.0) < 5 * math.sqrt(3.0 / n)
    laplace = D.Laplace(ember.tensor(1.0, dtype=ember.float64), 2.0).sample((n,)).numpy()
    assert abs(np.median(laplace) - 1.0) < 0.1 and abs(laplace.std() - 2 * 2 ** 0.5) < 0.15
    covariance = np.array([[2.0, 0.6], [0.6, 1.0]])
    mvn = D.MultivariateNormal(ember.tensor([1.0, -1.0], dtype=ember.float64),
                               ember.tensor(covariance)).sample((n,)).numpy()
    np.testing.assert_allclose(np.cov(mvn.T), covariance, atol=0.1)
    uniform = D.Uniform(2.0, 4.0).sample((n,)).numpy()
    assert uniform.min() >= 2.0 and uniform.max() < 4.0
    assert abs(uniform.mean() - 3.0) < 5 * math.sqrt(1 / 3 / n)


def test_expand_matches_torch():
    ours = D.Normal(ember.tensor([0.0, 1.0]), 2.0).expand((3, 2))
    theirs = TD.Normal(torch.tensor([0.0, 1.0]), 2.0).expand((3, 2))
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    close(ours.log_prob(ember.zeros(3, 2)), theirs.log_prob(torch.zeros(3, 2)))
    assert tuple(D.Categorical(logits=ember.zeros(4)).expand((2,)).sample((3,)).shape) == (3, 2)


@pytest.fixture
def torch_validation():
    """torch's argument checks on: importing torch.compile's machinery (as
    another suite does) turns torch's default off for the process."""
    before = TD.Distribution._validate_args
    TD.Distribution.set_default_validate_args(True)
    yield
    TD.Distribution.set_default_validate_args(before)


def first_line(message):
    return str(message).split("\n")[0].replace("torch.", "ember.")


@pytest.mark.parametrize("call", [
    lambda lib: lib.distributions.Normal(lib.zeros(3), lib.tensor([1.0, -1.0, 2.0])),
    lambda lib: lib.distributions.Categorical(lib.tensor([0.2, 0.8]), logits=lib.zeros(2)),
    lambda lib: lib.distributions.Categorical(lib.tensor(0.2)),
    lambda lib: lib.distributions.Bernoulli(lib.tensor([0.3, 1.2])),
    lambda lib: lib.distributions.Independent(lib.distributions.Normal(lib.zeros(2, 3), 1.0),
                                              3),
    lambda lib: lib.distributions.Normal(0.0, 1.0).log_prob(3),
    lambda lib: lib.distributions.Categorical(lib.tensor([0.2, 0.8])).log_prob(lib.tensor(2)),
    lambda lib: lib.distributions.Normal(lib.zeros(3), 1.0).log_prob(lib.zeros(2)),
    lambda lib: lib.distributions.Bernoulli(0.3).log_prob(lib.tensor(0.5)),
    lambda lib: lib.distributions.Uniform(lib.tensor([0.0, 2.0]), lib.tensor([1.0, 1.0])),
    lambda lib: lib.distributions.Exponential(lib.tensor([1.0, 0.0])),
    lambda lib: lib.distributions.Poisson(lib.tensor([1.0])).log_prob(lib.tensor([1.5])),
    lambda lib: lib.distributions.MultivariateNormal(lib.zeros(2)),
    lambda lib: lib.distributions.MultivariateNormal(lib.tensor(0.0), lib.eye(2)),
    lambda lib: lib.distributions.MultivariateNormal(lib.zeros(2), lib.ones(2)),
    lambda lib: lib.distributions.MultivariateNormal(lib.zeros(2),
                                                     lib.tensor([[1.0, 2.0], [2.0, 1.0]])),
    lambda lib: lib.distributions.MultivariateNormal(
        lib.zeros(2), scale_tril=lib.tensor([[1.0, 1.0], [0.0, 1.0]])),
    lambda lib: lib.distributions.OneHotCategorical(lib.tensor([0.5, 0.5])).log_prob(
        lib.tensor([1.0, 1.0])),
])
def test_validation_errors_match_torch(call, torch_validation):
    with pytest.raises(ValueError) as theirs:
        call(torch)
    with pytest.raises(ValueError) as ours:
        call(ember)
    assert first_line(ours.value) == first_line(theirs.value)


def test_validation_can_be_turned_off():
    loose = D.Normal(0.0, -1.0, validate_args=False)
    assert math.isnan(loose.log_prob(ember.tensor(0.0)).item())
    D.Distribution.set_default_validate_args(False)
    try:
        D.Bernoulli(ember.tensor([2.0]))
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Bernoulli(ember.tensor([2.0]))


def test_constraint_reprs_match_torch():
    pairs = [(D.constraints.positive, TD.constraints.positive),
             (D.constraints.real, TD.constraints.real),
             (D.constraints.simplex, TD.constraints.simplex),
             (D.constraints.unit_interval, TD.constraints.unit_interval),
             (D.constraints.boolean, TD.constraints.boolean),
             (D.constraints.integer_interval(0, 3), TD.constraints.integer_interval(0, 3)),
             (D.constraints.independent(D.constraints.real, 1),
              TD.constraints.independent(TD.constraints.real, 1)),
             (D.constraints.greater_than(2.0), TD.constraints.greater_than(2.0)),
             (D.constraints.nonnegative, TD.constraints.nonnegative),
             (D.constraints.one_hot, TD.constraints.one_hot),
             (D.constraints.lower_cholesky, TD.constraints.lower_cholesky),
             (D.constraints.positive_definite, TD.constraints.positive_definite)]
    for ours, theirs in pairs:
        assert repr(ours) == repr(theirs)
