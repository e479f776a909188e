"""Output heads of the question-answering model.

- `CellSelectionHead`: a logit per token (which cells answer the question) and, for the
  hierarchical loss, a logit per column.
- `AggregationHead`: logits of the aggregation operators (NONE, SUM, AVERAGE, COUNT) from the
  pooled [CLS] vector.
- `ClassificationHead`: class logits from the pooled vector (e.g. entailment on TabFact).

The weights keep the shapes and names of the original TAPAS checkpoints, so a TF1 or HF value is
assigned without a transpose (HF uses the same names, with `aggregation_classifier.weight` and
`classifier.weight` for the pooled heads):

    output_weights <float32>[hidden], output_bias <float32>[]
    column_output_weights <float32>[hidden], column_output_bias <float32>[]
    output_weights_agg <float32>[num_agg, hidden], output_bias_agg <float32>[num_agg]
    output_weights_cls <float32>[num_classes, hidden], output_bias_cls <float32>[num_classes]
"""

from typing import Any, Dict

import tensorflow as tf
import tf_keras

from tapas_tf.models import segmented
from tapas_tf.models.losses import CLOSE_ENOUGH_TO_LOG_ZERO, EPSILON_ZERO_DIVISION


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
class CellSelectionHead(tf_keras.layers.Layer):
    """Token logits for cell selection and, optionally, column logits.

    token_logits = (h . output_weights + output_bias) / temperature.
    column_logits: per-token logits h . column_output_weights + column_output_bias (no
    temperature) are averaged per cell, then per column over the cells that exist
    (`cell_mask`). Columns without any cell, and column 0 ("no column") unless
    `allow_empty_column_selection`, get CLOSE_ENOUGH_TO_LOG_ZERO added.

    Args:
      temperature: float > 0, divides the token logits.
      initializer_range: float, stddev of the truncated normal initialiser.
      init_cell_selection_weights_to_zero: bool, start both weight vectors at zero so every
        token has the same prior probability.
      select_one_column: bool, build the column weights and return column logits.
      allow_empty_column_selection: bool, let column 0 be selected.

    Call args:
      sequence_output: <float32>[batch, seq_len, hidden].
      cell_index: segmented.ProductIndexMap of rows (outer) and columns (inner), indices
        <int32>[batch, seq_len]; needed only with select_one_column.
      cell_mask: <float32>[batch, num_rows * num_columns], 1 for cells that exist.

    Returns:
      dict with "token_logits" <float32>[batch, seq_len] and, with select_one_column,
      "column_logits" <float32>[batch, num_columns].
    """

    def __init__(
        self,
        temperature: float = 1.0,
        initializer_range: float = 0.02,
        init_cell_selection_weights_to_zero: bool = False,
        select_one_column: bool = True,
        allow_empty_column_selection: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}.")
        # === Config ===
        self.temperature = temperature
        self.initializer_range = initializer_range
        self.init_cell_selection_weights_to_zero = init_cell_selection_weights_to_zero
        self.select_one_column = select_one_column
        self.allow_empty_column_selection = allow_empty_column_selection

    def build(self, input_shape):
        hidden_size = tf.TensorShape(input_shape)[-1]
        if hidden_size is None:
            raise ValueError(f"CellSelectionHead needs a known hidden size, got input shape {input_shape}.")
        self.output_weights = self._weights("output_weights", hidden_size)
        self.output_bias = self.add_weight(name="output_bias", shape=(), initializer="zeros")
        if self.select_one_column:
            self.column_output_weights = self._weights("column_output_weights", hidden_size)
            self.column_output_bias = self.add_weight(name="column_output_bias", shape=(), initializer="zeros")
        super().build(input_shape)

    def _weights(self, name: str, hidden_size: int) -> tf.Variable:
        if self.init_cell_selection_weights_to_zero:
            initializer = tf_keras.initializers.Zeros()
        else:
            initializer = tf_keras.initializers.TruncatedNormal(stddev=self.initializer_range)
        return self.add_weight(name=name, shape=(hidden_size,), initializer=initializer)

    def call(
        self, sequence_output: tf.Tensor, cell_index: segmented.ProductIndexMap = None, cell_mask: tf.Tensor = None
    ) -> Dict[str, tf.Tensor]:
        token_logits = tf.einsum("bsh,h->bs", sequence_output, self.output_weights) + self.output_bias
        outputs = {"token_logits": token_logits / self.temperature}
        if self.select_one_column:
            if cell_index is None or cell_mask is None:
                raise ValueError("CellSelectionHead with select_one_column needs cell_index and cell_mask.")
            outputs["column_logits"] = self._column_logits(sequence_output, cell_index, cell_mask)
        return outputs

    def _column_logits(
        self, sequence_output: tf.Tensor, cell_index: segmented.ProductIndexMap, cell_mask: tf.Tensor
    ) -> tf.Tensor:
        """<float32>[batch, num_columns]: mean over the column's existing cells of cell logits."""
        token_logits = tf.einsum("bsh,h->bs", sequence_output, self.column_output_weights) + self.column_output_bias
        # <float32>[batch, num_cells]
        cell_logits, cells = segmented.reduce_mean(token_logits, cell_index)
        column_index = cell_index.project_inner(cells)
        # <float32>[batch, num_columns]
        column_sum, columns = segmented.reduce_sum(cell_logits * cell_mask, column_index)
        cell_count, _ = segmented.reduce_sum(cell_mask, column_index)
        column_logits = column_sum / (cell_count + EPSILON_ZERO_DIVISION)
        is_column_zero = tf.equal(columns.indices, 0)
        is_padding = tf.logical_and(cell_count < 0.5, tf.logical_not(is_column_zero))
        column_logits += CLOSE_ENOUGH_TO_LOG_ZERO * tf.cast(is_padding, column_logits.dtype)
        if not self.allow_empty_column_selection:
            column_logits += CLOSE_ENOUGH_TO_LOG_ZERO * tf.cast(is_column_zero, column_logits.dtype)
        return column_logits

    def weight_map(self) -> Dict[str, tf.Variable]:
        """TF1 checkpoint name -> variable."""
        names = {"output_weights": self.output_weights, "output_bias": self.output_bias}
        if self.select_one_column:
            names["column_output_weights"] = self.column_output_weights
            names["column_output_bias"] = self.column_output_bias
        return names

    def get_config(self) -> Dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "temperature": self.temperature,
                "initializer_range": self.initializer_range,
                "init_cell_selection_weights_to_zero": self.init_cell_selection_weights_to_zero,
                "select_one_column": self.select_one_column,
                "allow_empty_column_selection": self.allow_empty_column_selection,
            }
        )
        return config


class _PooledLinearHead(tf_keras.layers.Layer):
    """logits = pooled . transpose(weights) + bias, weights stored [num_labels, hidden] as TF1.

    Subclasses set `weight_suffix`: the variables are output_weights_{suffix} and
    output_bias_{suffix}.
    """

    weight_suffix = ""

    def __init__(self, num_labels: int, initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels <= 0:
            raise ValueError(f"{type(self).__name__} needs a positive int num_labels, got {num_labels!r}.")
        # === Config ===
        self.num_labels = num_labels
        self.initializer_range = initializer_range

    def build(self, input_shape):
        hidden_size = tf.TensorShape(input_shape)[-1]
        if hidden_size is None:
            raise ValueError(f"{type(self).__name__} needs a known hidden size, got input shape {input_shape}.")
        self.output_weights = self.add_weight(
            name=f"output_weights_{self.weight_suffix}",
            shape=(self.num_labels, hidden_size),
            initializer=tf_keras.initializers.TruncatedNormal(stddev=self.initializer_range),
        )
        self.output_bias = self.add_weight(
            name=f"output_bias_{self.weight_suffix}", shape=(self.num_labels,), initializer="zeros"
        )
        super().build(input_shape)

    def call(self, pooled_output: tf.Tensor) -> tf.Tensor:
        """<float32>[batch, hidden] -> <float32>[batch, num_labels]."""
        return tf.matmul(pooled_output, self.output_weights, transpose_b=True) + self.output_bias

    def weight_map(self) -> Dict[str, tf.Variable]:
        """TF1 checkpoint name -> variable."""
        return {
            f"output_weights_{self.weight_suffix}": self.output_weights,
            f"output_bias_{self.weight_suffix}": self.output_bias,
        }

    def get_config(self) -> Dict[str, Any]:
        config = super().get_config()
        config.update({"num_labels": self.num_labels, "initializer_range": self.initializer_range})
        return config


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
class AggregationHead(_PooledLinearHead):
    """Aggregation operator logits <float32>[batch, num_agg] from the pooled output.

    Args:
      num_labels: int, number of operators including NONE (index 0).
      initializer_range: float, stddev of the truncated normal initialiser.
    """

    weight_suffix = "agg"


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
class ClassificationHead(_PooledLinearHead):
    """Class logits <float32>[batch, num_classes] from the pooled output.

    Args:
      num_labels: int, number of classes.
      initializer_range: float, stddev of the truncated normal initialiser.
    """

    weight_suffix = "cls"
