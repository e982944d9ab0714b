"""ember.optim: optimizers and learning-rate schedulers (PyTorch's torch.optim).

Every update runs PyTorch's single-tensor ("foreach=False") algorithm in
place on the parameters, under ember.no_grad().
"""

from . import lr_scheduler  # noqa: F401
from .adam import Adam
from .adamw import AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
