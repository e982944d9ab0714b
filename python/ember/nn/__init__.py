"""ember.nn: neural-network building blocks (PyTorch's torch.nn).

    Parameter          a tensor a Module registers as learnable
    Module             the base class: registration, walks, state_dict, hooks
    modules/           layers, containers and losses built on it
    functional         the stateless functions the layers call
    init               in-place weight initialisers
    utils              gradient clipping, parameters <-> one vector
"""

from . import functional, init, parallel, utils  # noqa: F401
from .modules import *  # noqa: F401,F403
from .modules import __all__ as _modules_all
from .parallel import DataParallel
from .parameter import Buffer, Parameter

__all__ = ["Buffer", "DataParallel", "Parameter", "functional", "init", "utils"] + list(_modules_all)
