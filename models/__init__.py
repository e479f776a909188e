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

# Where each public name lives. Loaded on first use (PEP 562), so that reading the config or the
# size presets (`tapas_tf.models.config`: a command line's --model_size) loads no TensorFlow.
_EXPORTS = {
    "SIZES": "config", "TapasConfig": "config",
    "TOKEN_TYPE_FEATURES": "embeddings", "TapasEmbeddings": "embeddings", "cell_position_ids": "embeddings",
    "TapasEncoder": "encoder", "get_activation": "encoder",
    "AggregationHead": "heads", "CellSelectionHead": "heads", "ClassificationHead": "heads",
    "MaskedLMHead": "pretrain_model", "TapasForMaskedLM": "pretrain_model",
    "TapasForQuestionAnswering": "qa_model", "dummy_features": "qa_model",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
