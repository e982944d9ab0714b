"""The nn.Module classes of ember.nn (re-exported by ember.nn)."""

from .module import Module
from .linear import Identity, Linear
from .activation import GELU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .container import ModuleDict, ModuleList, Sequential
from .dropout import Dropout
from .flatten import Flatten
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, L1Loss,
                   MSELoss, NLLLoss)
from .normalization import LayerNorm
from .sparse import Embedding

__all__ = [
    "Module", "Identity", "Linear", "GELU", "LogSoftmax", "ReLU", "Sigmoid",
    "SiLU", "Softmax", "Tanh", "ModuleDict", "ModuleList", "Sequential",
    "Dropout", "Flatten", "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss",
    "L1Loss", "MSELoss", "NLLLoss", "LayerNorm", "Embedding",
]
