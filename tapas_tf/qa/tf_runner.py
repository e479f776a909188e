"""Running a TapasForQuestionAnswering in TensorFlow for `TableQA`: one traced function per bucket.

    runner = TensorFlowRunner.from_model_dir(model_dir, checkpoint=None, config=config)
    outputs = runner(128, rows)     # rows: MODEL_INPUT_FEATURES, each <int32>[128]

The LiteRT runner (`lite_model.LiteRunner`) has the same call, so `TableQA` asks, batches and
decodes the same way whichever answers. The model is built with the heads' row and column segments
raised to what the embeddings address (`load_inference_model`); the LiteRT export converts that
same model.
"""

import contextlib
import dataclasses
import os
from typing import Callable, Dict, Mapping, Optional, Sequence, Tuple

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.features.example_features import MODEL_INPUT_FEATURES, MODEL_OUTPUTS  # noqa: E402
from tapas_tf.models.qa_model import TapasForQuestionAnswering  # noqa: E402
from tapas_tf.qa.backends import PRECISIONS  # noqa: E402

# The heads' segment counts at inference: every row and column the embeddings can address. No
# weight depends on them, and a table within the trained limits gets the same outputs.
MAX_SEGMENTS = 256
_BF16_REWRITE = "auto_mixed_precision_onednn_bfloat16"


def inference_segments(config) -> Tuple[int, int]:
    """(rows, columns) of the heads' segments at inference: every row and column the embeddings
    address (MAX_SEGMENTS), or the trained limits when they are larger."""
    return max(config.max_num_rows, MAX_SEGMENTS), max(config.max_num_columns, MAX_SEGMENTS)


def load_inference_model(model_dir: str, checkpoint: Optional[str], config,
                         segments: Optional[Tuple[int, int]] = None) -> TapasForQuestionAnswering:
    """`model_dir.load_model` with the heads' (rows, columns) segments `segments`, default
    `inference_segments(config)`."""
    rows, columns = segments or inference_segments(config)
    config = dataclasses.replace(config, max_num_rows=rows, max_num_columns=columns)
    return model_dir_lib.load_model(model_dir, checkpoint, config=config)


class TensorFlowRunner:
    """Model outputs for batches of one bucket length, one tf.function per length.

    Args:
      model: a TapasForQuestionAnswering with weights.
      jit_compile: compile each bucket's function with XLA.
      precision: "float32", or "bfloat16" for TensorFlow's oneDNN bfloat16 rewrite of the graph.
    """

    backend = "TensorFlow"

    def __init__(self, model, jit_compile: bool = False, precision: str = "float32"):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self.model = model
        self.jit_compile = jit_compile
        self.precision = precision
        self._functions: Dict[int, Callable] = {}

    @classmethod
    def from_model_dir(cls, model_dir: str, checkpoint: Optional[str], config, **options) -> "TensorFlowRunner":
        return cls(load_inference_model(model_dir, checkpoint, config), **options)

    @property
    def has_aggregation_head(self) -> bool:
        return self.model.aggregation_head is not None

    @property
    def has_classification_head(self) -> bool:
        return self.model.classification_head is not None

    def __call__(self, length: int, rows: Sequence[Mapping[str, np.ndarray]]) -> Dict[str, np.ndarray]:
        """MODEL_OUTPUTS the model has ("probabilities" <float32>[len(rows), length], and with those
        heads "aggregation_logits" <float32>[len(rows), num_agg] and "classification_logits"
        <float32>[len(rows), num_classes]) for rows of <int32>[length] features."""
        if length not in self._functions:
            spec = {name: tf.TensorSpec([None, length], tf.int32, name=name) for name in MODEL_INPUT_FEATURES}

            @tf.function(input_signature=[spec], jit_compile=self.jit_compile)
            def run(features):
                outputs = self.model(features, training=False)
                return {key: outputs[key] for key in MODEL_OUTPUTS if key in outputs}

            self._functions[length] = run
        # The rewrite option is part of how TensorFlow instantiates a function: it must be on at
        # every call (both instantiations stay cached, so switching costs nothing after the first).
        with _graph_rewrite(_BF16_REWRITE, self.precision == "bfloat16"):
            outputs = self._functions[length](_batch(rows))
        return {key: value.numpy() for key, value in outputs.items()}


def _batch(rows: Sequence[Mapping[str, np.ndarray]]) -> Dict[str, tf.Tensor]:
    return {name: tf.constant(np.stack([row[name] for row in rows]), tf.int32) for name in MODEL_INPUT_FEATURES}


@contextlib.contextmanager
def _graph_rewrite(option: str, on: bool):
    """Turns a Grappler option on for the calls inside, then restores it. The option is
    process-wide: a function another thread runs meanwhile sees it too."""
    if not on:
        yield
        return
    before = bool(tf.config.optimizer.get_experimental_options().get(option, False))
    tf.config.optimizer.set_experimental_options({option: True})
    try:
        yield
    finally:
        tf.config.optimizer.set_experimental_options({option: before})
