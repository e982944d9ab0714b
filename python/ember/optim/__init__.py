"""ember.optim: optimizers and learning-rate schedulers (PyTorch's torch.optim).

Every update runs PyTorch's single-tensor ("foreach=False") algorithm in
place on the parameters, under ember.no_grad(); foreach=True computes the
same update with the same loop.
"""

from . import lr_scheduler  # noqa: F401
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam
from .adamax import Adamax
from .adamw import AdamW
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adadelta", "Adagrad", "Adamax",
           "NAdam", "RAdam", "RMSprop", "Rprop", "ASGD", "LBFGS", "lr_scheduler"]
