"""kl_divergence(p, q): KL(p || q) by closed form, looked up by the pair of
types (register_kl adds a pair; the most specific registered pair wins)."""

import math

import ember
import ember.nn.functional as F

from .bernoulli import Bernoulli
from .categorical import Categorical
from .exponential import Exponential, Laplace, Poisson
from .independent import Independent
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis, _solve_lower
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .uniform import Uniform
from .utils import _sum_rightmost

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY = {}


def register_kl(type_p, type_q):
    """Decorator: fun(p, q) computes KL(p || q) for p of type_p, q of type_q."""

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        return fun

    return decorator


def _lookup(type_p, type_q):
    """The registered pair nearest to (type_p, type_q) along both MROs."""
    matches = [(type_p.__mro__.index(p) + type_q.__mro__.index(q), fun)
               for (p, q), fun in _KL_REGISTRY.items()
               if issubclass(type_p, p) and issubclass(type_q, q)]
    return min(matches, key=lambda match: match[0])[1] if matches else None


def kl_divergence(p, q):
    fun = _lookup(type(p), type(q))
    if fun is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{p.__class__.__name__} and q type {q.__class__.__name__}")
    return fun(p, q)


def _infinite_where(values, condition):
    return ember.where(condition, math.inf, values)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _infinite_where(t, (q.probs == 0).expand_as(t))
    t = ember.where((p.probs == 0).expand_as(t), 0.0, t)   # 0 log 0 is 0
    return t.sum(-1)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = ember.where(p.probs == 0, 0.0, _infinite_where(t1, q.probs == 0))
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = ember.where(p.probs == 1, 0.0, _infinite_where(t2, q.probs == 1))
    return t1 + t2


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return _infinite_where(result, (q.low > p.low) | (q.high < p.high))


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    result = kl_divergence(p.base_dist, q.base_dist)
    return _sum_rightmost(result, p.reinterpreted_batch_ndims)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    return (-scale_ratio.log() + loc_abs_diff / q.scale
            + scale_ratio * ember.exp(-loc_abs_diff / p.scale) - 1)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    """log(det Sq / det Sp) / 2 + (tr(Sq^-1 Sp) + mahalanobis_q(mu_q - mu_p) - n) / 2,
    the trace as the squared entries of Lq^-1 Lp."""
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with "
                         "different event shapes cannot be computed")
    n = p.event_shape[0]
    half_term1 = q._half_log_det() - p._half_log_det()
    term2 = _solve_lower(q._unbroadcasted_scale_tril,
                         p._unbroadcasted_scale_tril).pow(2).sum((-2, -1))
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)
