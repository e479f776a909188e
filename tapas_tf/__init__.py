"""tapas-tf: TAPAS table question answering in TensorFlow 2 / Keras.

The package is laid out as its data flow; each subpackage's docstring says what it
holds and what it may import:

    data      -> Interaction protos, readers of the releases, text and number annotation
    features  -> tokenisation, table encoding, classifier examples, tf.Example features
    models    -> the Keras models (the repository's top-level `models/` folder)
    checkpoints -> the model directory, checkpoint import, init from a text BERT
    pipelines -> Beam transforms of the data jobs (composed in `beam_jobs/`)
    training  -> the training loop
    inference -> decoding, answer execution, sequential prediction, metrics

The names below are the public API. They are loaded on first use, so that
`import tapas_tf` stays cheap (no TensorFlow) for Beam workers and command lines.
"""

import importlib
import logging
import os
from typing import Any, List

# Before TensorFlow is first imported (it reads this once): oneDNN's CPU kernels. TensorFlow turns
# them on by default only on CPUs with AVX-512 VNNI/BF16 or AMX; on an AVX2-only CPU they train
# TAPAS 1.6-1.8x faster than its default Eigen kernels (docs/RESULTS.md, "oneDNN"). Set
# TF_ENABLE_ONEDNN_OPTS=0 to keep TensorFlow's own choice.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

__version__ = "0.1.0"

# A library logs through its modules' loggers and leaves where they go to the application: without
# a handler of the application's, what matters reaches the user with the results (diagnostics,
# notes), not as "WARNING:root:" lines on stderr. Command lines show them with -v.
logging.getLogger(__name__).addHandler(logging.NullHandler())

# Public name -> "module:attribute".
_EXPORTS = {
    # data
    "read_interactions": "tapas_tf.data.interaction_io:read_interactions",
    "write_interactions": "tapas_tf.data.interaction_io:write_interactions",
    "read_sqa_interactions": "tapas_tf.data.readers.sqa:read_sqa_interactions",
    "read_wtq_interactions": "tapas_tf.data.readers.wtq:read_wtq_interactions",
    "add_numeric_values": "tapas_tf.data.number_annotation:add_numeric_values",
    "interaction_pb2": "tapas_tf.data.protos.interaction_pb2:",
    # features
    "ConversionConfig": "tapas_tf.features.conversion_config:ConversionConfig",
    "ConversionError": "tapas_tf.features.conversion_config:ConversionError",
    "ExampleConverter": "tapas_tf.features.classifier_examples:ExampleConverter",
    "TapasTokenizer": "tapas_tf.features.tokenization:TapasTokenizer",
    "resolve_vocab_file": "tapas_tf.features.vocab:resolve_vocab_file",
    # models and model directories
    "TapasConfig": "tapas_tf.models.config:TapasConfig",
    "load_model": "tapas_tf.checkpoints.model_dir:load_model",
    # tasks, prediction
    "Task": "tapas_tf.task_registry.presets:Task",
    "predict_model_dir": "tapas_tf.inference.sequential:predict_model_dir",
    "TableQA": "tapas_tf.qa.table_qa:TableQA",
    "TableFactChecker": "tapas_tf.qa.fact_checker:TableFactChecker",
    "VerifyResult": "tapas_tf.qa.fact_checker:VerifyResult",
    "export_model_dir": "tapas_tf.serving.export:export_model_dir",
    "ServingClient": "tapas_tf.serving.serving_client:ServingClient",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    try:
        target = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'tapas_tf' has no attribute {name!r}") from None
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    value = getattr(module, attribute) if attribute else module
    globals()[name] = value  # Later look-ups skip this function.
    return value


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_EXPORTS))
