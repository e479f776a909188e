"""Keras (tf_keras, Keras 2) models of tapas-tf: config, embeddings, encoder, heads, losses.

tf-models-official builds on tf_keras, so TensorFlow must be told to use Keras 2 before it is
first imported.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# pylint: disable=wrong-import-position
from models.config import SIZES, TapasConfig
from models.embeddings import TOKEN_TYPE_FEATURES, TapasEmbeddings, cell_position_ids
from models.encoder import TapasEncoder, get_activation
from models.heads import AggregationHead, CellSelectionHead, ClassificationHead
from models.pretrain_model import MaskedLMHead, TapasForMaskedLM
from models.qa_model import TapasForQuestionAnswering, dummy_features

__all__ = [
    "SIZES",
    "TOKEN_TYPE_FEATURES",
    "AggregationHead",
    "CellSelectionHead",
    "ClassificationHead",
    "MaskedLMHead",
    "TapasConfig",
    "TapasEmbeddings",
    "TapasEncoder",
    "TapasForMaskedLM",
    "TapasForQuestionAnswering",
    "cell_position_ids",
    "dummy_features",
    "get_activation",
]
