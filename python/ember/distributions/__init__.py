"""ember.distributions: probability distributions with PyTorch's API
(torch.distributions): sampling, reparameterised sampling for gradient
estimators, log_prob, entropy, argument validation, kl_divergence.

Built: Normal, MultivariateNormal, Categorical, OneHotCategorical,
Bernoulli, Uniform, Exponential, Laplace, Poisson, Independent, and the KL
divergences between like pairs.  Written over ember's differentiable
operators, so log_prob, entropy, kl_divergence and rsample carry gradients
to the parameters.
"""

from . import constraints
from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .exponential import Exponential, Laplace, Poisson
from .independent import Independent
from .kl import kl_divergence, register_kl
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .uniform import Uniform

__all__ = ["Bernoulli", "Categorical", "Distribution", "Exponential", "Independent",
           "Laplace", "MultivariateNormal", "Normal", "OneHotCategorical", "Poisson", "Uniform",
           "constraints", "kl_divergence", "register_kl"]
