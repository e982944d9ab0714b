"""The nn.Module classes of ember.nn (re-exported by ember.nn)."""

from .module import Module
from .lazy import LazyModuleMixin
from .linear import Bilinear, Identity, LazyLinear, Linear
from .activation import *  # noqa: F401,F403
from .activation import __all__ as _activation_all
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .dropout import *  # noqa: F401,F403
from .dropout import __all__ as _dropout_all
from .flatten import Flatten, Unflatten
from .padding import *  # noqa: F401,F403
from .padding import __all__ as _padding_all
from .pooling import *  # noqa: F401,F403
from .pooling import __all__ as _pooling_all
from .loss import *  # noqa: F401,F403
from .loss import __all__ as _loss_all
from .distance import CosineSimilarity, PairwiseDistance
from .conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
                   LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d,
                   LazyConvTranspose3d)
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                          TransformerEncoder, TransformerEncoderLayer)
from .normalization import *  # noqa: F401,F403
from .normalization import __all__ as _normalization_all
from .sparse import Embedding, EmbeddingBag
from .channelshuffle import ChannelShuffle
from .fold import Fold, Unfold

__all__ = [
    "Module", "Identity", "Linear", "Bilinear", "ModuleDict", "ModuleList", "Sequential",
    "ParameterList", "ParameterDict",
    "Flatten", "Embedding", "EmbeddingBag", "CosineSimilarity",
    "PairwiseDistance", "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell",
    "LSTMCell", "GRUCell", "Transformer", "TransformerEncoder", "TransformerDecoder",
    "TransformerEncoderLayer", "TransformerDecoderLayer", "Conv1d", "Conv2d", "Conv3d",
    "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    "Unflatten", "ChannelShuffle", "Fold", "Unfold", "LazyModuleMixin", "LazyLinear",
    "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
    "LazyConvTranspose3d",
] + (list(_dropout_all) + list(_padding_all) + list(_activation_all) + list(_loss_all)
     + list(_normalization_all) + list(_pooling_all))
