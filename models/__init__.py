"""Stage 3a, models (installed as `tapas_tf.models`): the Keras TAPAS models.

Holds the model config, the seven token-type embeddings, the tf-models-official
encoder, the cell, column and aggregation heads, the losses (pure tensor
functions), segmented-tensor ops, and the QA and masked-LM models. The folder
sits at the top of the repository; packaging maps it to `tapas_tf.models`, so
an installed tapas-tf never claims the generic import name `models`.

May import: only the tf.Example feature names (`tapas_tf.features.example_features`).

tf-models-official builds on tf_keras, so TensorFlow must be told to use Keras 2 before it is
first imported.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# pylint: disable=wrong-import-position
from tapas_tf.models.config import SIZES, TapasConfig
from tapas_tf.models.embeddings import TOKEN_TYPE_FEATURES, TapasEmbeddings, cell_position_ids
from tapas_tf.models.encoder import TapasEncoder, get_activation
from tapas_tf.models.heads import AggregationHead, CellSelectionHead, ClassificationHead
from tapas_tf.models.pretrain_model import MaskedLMHead, TapasForMaskedLM
from tapas_tf.models.qa_model import TapasForQuestionAnswering, dummy_features

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
