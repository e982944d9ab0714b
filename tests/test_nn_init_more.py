"""The rest of PyTorch's nn.init (issue 12): eye_, dirac_, trunc_normal_,
orthogonal_, sparse_; reproducible through generator=, distributions and
errors as PyTorch's.  Pure Python over existing C."""

import math

import numpy as np
import pytest

import ember
from ember.nn import init


def test_eye_and_dirac_match_torch():
    torch = pytest.importorskip("torch")
    assert init.eye_(ember.empty(2, 3)).tolist() == torch.nn.init.eye_(torch.empty(2, 3)).tolist()
    for shape, groups in [((4, 2, 3, 3), 2), ((3, 5, 3), 1), ((2, 2, 3, 3, 3), 1)]:
        ours = init.dirac_(ember.empty(*shape), groups)
        theirs = torch.nn.init.dirac_(torch.empty(*shape), groups)
        assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("bounds", [(-2.0, 2.0), (-0.3, 0.3), (1.0, 3.0)])
def test_trunc_normal_is_the_truncated_distribution(bounds):
    a, b = bounds
    t = init.trunc_normal_(ember.empty(40000), mean=0.5, std=1.5, a=a, b=b,
                           generator=ember.Generator().manual_seed(1))
    values = t.numpy()
    assert values.min() >= a and values.max() <= b
    # The truncated normal's mean: mu + sigma (phi(alpha) - phi(beta)) / Z.
    alpha, beta = (a - 0.5) / 1.5, (b - 0.5) / 1.5
    phi = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    cdf = lambda x: (1 + math.erf(x / math.sqrt(2))) / 2
    expected = 0.5 + 1.5 * (phi(alpha) - phi(beta)) / (cdf(beta) - cdf(alpha))
    assert abs(values.mean() - expected) < 0.02


def test_orthogonal_rows_or_columns_are_orthonormal():
    for shape, gain in [((3, 5), 1.0), ((6, 3), 2.0), ((4, 2, 3), 1.0)]:
        t = init.orthogonal_(ember.empty(*shape), gain)
        m = t.reshape(shape[0], -1).numpy().astype(np.float64)
        small = m @ m.T if m.shape[0] <= m.shape[1] else m.T @ m
        np.testing.assert_allclose(small, gain * gain * np.eye(small.shape[0]), atol=1e-5)


def test_generator_makes_them_reproducible():
    for fill in (lambda t, g: init.trunc_normal_(t, generator=g),
                 lambda t, g: init.orthogonal_(t, generator=g),
                 lambda t, g: init.sparse_(t, 0.5, generator=g)):
        first = fill(ember.empty(6, 4), ember.Generator().manual_seed(7))
        second = fill(ember.empty(6, 4), ember.Generator().manual_seed(7))
        assert first.tolist() == second.tolist()


def test_sparse_zeroes_the_fraction_of_each_column():
    t = init.sparse_(ember.empty(10, 6), 0.25, std=0.5)
    assert (t == 0).sum(0).tolist() == [3] * 6


def test_errors_match_torch():
    torch = pytest.importorskip("torch")
    for call in [lambda lib: lib.nn.init.eye_(lib.empty(2, 2, 2)),
                 lambda lib: lib.nn.init.dirac_(lib.empty(2, 2)),
                 lambda lib: lib.nn.init.dirac_(lib.empty(3, 2, 3), 2),
                 lambda lib: lib.nn.init.orthogonal_(lib.empty(3)),
                 lambda lib: lib.nn.init.sparse_(lib.empty(2, 2, 2), 0.1)]:
        with pytest.raises(Exception) as theirs:
            call(torch)
        with pytest.raises(type(theirs.value)) as ours:
            call(ember)
        assert str(ours.value) == str(theirs.value)
    with pytest.warns(UserWarning, match="mean is more than 2 std from"):
        init.trunc_normal_(ember.empty(3), mean=10.0)
