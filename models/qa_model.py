"""TAPAS for table question answering: encoder, cell/column/aggregation heads and the full loss.

The forward pass and every loss term follow Hugging Face's `TapasForQuestionAnswering` and the
original TAPAS classifier, so logits and losses can be compared with HF on the same weights.
All branching is on the config (Python), shapes are static, and `call` runs under
`tf.function(jit_compile=True)`.

Example:

    config = TapasConfig.from_preset("tiny", num_aggregation_labels=4, ...)
    model = TapasForQuestionAnswering(config)
    outputs = model(features, training=True)   # features as written by the converters
    outputs["total_loss"]                      # when features hold label_ids
"""

from typing import Any, Dict, Mapping, Optional, Tuple

import tensorflow as tf
import tf_keras

from tapas_tf.models import losses, segmented
from tapas_tf.models.config import TapasConfig
from tapas_tf.models.embeddings import TOKEN_TYPE_FEATURES
from tapas_tf.models.encoder import TapasEncoder
from tapas_tf.models.heads import AggregationHead, CellSelectionHead, ClassificationHead

# Keys of the per-example loss terms returned with labels; zeros where a term does not apply.
LOSS_TERMS = ("selection_loss", "aggregation_loss", "answer_loss", "aggregate_mask", "expected_result")
# Keys of the same terms as they enter total_loss (masked as the paper masks them), so that
# total_loss is the sum of their batch means (plus the classification loss, if the model has a
# classifier); and answer_loss_cut, 1 where an aggregation
# example's answer loss is over the cutoff (it then contributes nothing).
LOSS_PARTS = ("selection_loss_in_total", "aggregation_loss_in_total", "answer_loss_in_total", "answer_loss_cut")


def dummy_features(batch_size: int = 1, seq_length: int = 4) -> Dict[str, tf.Tensor]:
    """All-zero input features (question tokens only), enough to build a model's variables.

    Returns:
      dict of "input_ids", "input_mask" (ones) and the seven token types, <int32>[batch, seq].
    """
    features = {key: tf.zeros([batch_size, seq_length], tf.int32) for key in ("input_ids",) + TOKEN_TYPE_FEATURES}
    features["input_mask"] = tf.ones([batch_size, seq_length], tf.int32)
    return features


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
class TapasForQuestionAnswering(tf_keras.Model):
    """Cell selection, aggregation and classification on top of the TAPAS encoder.

    Args:
      config: TapasConfig with every model and loss option.

    Call args:
      features: dict of <int32>[batch, seq_len] "input_ids", "input_mask" and the seven
        token-type features (`models.embeddings.TOKEN_TYPE_FEATURES`). Optional labels:
        "label_ids" <int32>[batch, seq_len]; with aggregation, "aggregation_function_id"
        <int32>[batch] (strong supervision) or "answer" <float32>[batch] (NaN when none),
        "numeric_values" and "numeric_values_scale" <float32>[batch, seq_len] (answer
        supervision); with classification, "classification_class_index" <int32>[batch].
        Per-example labels may also be shaped [batch, 1], as tf.Example parsing gives them.
      training: bool, apply dropout.

    Returns:
      dict with
        token_logits <float32>[batch, seq_len]: (h . w + b) / temperature;
        column_logits <float32>[batch, max_num_columns] (select_one_column only);
        logits <float32>[batch, seq_len]: what prediction thresholds: the single-column
          logits (cells outside the argmax column get about -10000) with select_one_column,
          else the token logits, first averaged per cell with average_logits_per_cell;
        probabilities <float32>[batch, seq_len]: sigmoid(logits) * input_mask;
        aggregation_logits <float32>[batch, num_agg] (num_aggregation_labels > 0);
        classification_logits <float32>[batch, num_classes] (num_classification_labels > 0);
      and, when "label_ids" is given: total_loss <float32>[] and the per-example terms
      <float32>[batch] selection_loss, aggregation_loss, answer_loss, aggregate_mask and
      expected_result (zeros where a term does not apply), and LOSS_PARTS <float32>[batch]:
      the terms as masked in total_loss, and answer_loss_cut.
    """

    def __init__(self, config: TapasConfig, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(config, TapasConfig):
            raise ValueError(f"config must be a TapasConfig, got {type(config).__name__}.")
        # === Layers ===
        self.encoder = TapasEncoder.from_tapas_config(config, name="encoder")
        # The heads and the loss run in float32 under a mixed-precision policy too: segment means,
        # the column softmax and the Huber loss lose too much in bfloat16, and they are cheap.
        self.sequence_dropout = tf_keras.layers.Dropout(config.hidden_dropout_prob, name="sequence_dropout",
                                                        dtype="float32")
        self.cell_selection_head = CellSelectionHead(
            temperature=config.temperature,
            initializer_range=config.initializer_range,
            init_cell_selection_weights_to_zero=config.init_cell_selection_weights_to_zero,
            select_one_column=config.select_one_column,
            allow_empty_column_selection=config.allow_empty_column_selection,
            name="cell_selection",
            dtype="float32",
        )
        self.aggregation_head = None
        if config.num_aggregation_labels > 0:
            self.aggregation_head = AggregationHead(
                config.num_aggregation_labels, config.initializer_range, name="aggregation", dtype="float32"
            )
        self.classification_head = None
        if config.num_classification_labels > 0:
            self.classification_head = ClassificationHead(
                config.num_classification_labels, config.initializer_range, name="classification", dtype="float32"
            )

        # === Config ===
        self.tapas_config = config

    def call(self, features: Mapping[str, tf.Tensor], training=False) -> Dict[str, tf.Tensor]:
        config = self.tapas_config
        encoded = self.encoder(features, training=training)
        # <float32>: the encoder computes in the policy's dtype (bfloat16 under mixed_bfloat16).
        sequence_output = self.sequence_dropout(tf.cast(encoded["sequence_output"], tf.float32), training=training)
        pooled_output = tf.cast(encoded["pooled_output"], tf.float32)

        _, col_index, cell_index = segmented.table_indices(features, config.max_num_rows, config.max_num_columns)
        input_mask = tf.cast(features["input_mask"], tf.float32)
        # <float32>[batch, num_cells]: the share of real tokens per cell (as HF): 1 for table
        # cells, 0 for absent cells, in between for cell (0, 0) of question plus padding.
        cell_mask, _ = segmented.reduce_mean(input_mask, cell_index)

        outputs = self.cell_selection_head(sequence_output, cell_index=cell_index, cell_mask=cell_mask)
        token_logits = outputs["token_logits"]
        if config.average_logits_per_cell:
            cell_logits, _ = segmented.reduce_mean(token_logits, cell_index)
            token_logits = segmented.gather(cell_logits, cell_index)
        if config.select_one_column:
            logits = losses.single_column_selection_logits(
                token_logits, outputs["column_logits"], cell_index, cell_mask
            )
        else:
            logits = token_logits
        outputs["logits"] = logits
        outputs["probabilities"] = tf.sigmoid(logits) * input_mask
        if self.aggregation_head is not None:
            outputs["aggregation_logits"] = self.aggregation_head(pooled_output)
        if self.classification_head is not None:
            outputs["classification_logits"] = self.classification_head(pooled_output)

        if "label_ids" in features:
            indices = (col_index, cell_index, cell_mask)
            outputs.update(self._loss_terms(features, outputs, token_logits, indices))
        return outputs

    def _loss_terms(
        self,
        features: Mapping[str, tf.Tensor],
        outputs: Mapping[str, tf.Tensor],
        token_logits: tf.Tensor,
        indices: Tuple[segmented.IndexMap, segmented.ProductIndexMap, tf.Tensor],
    ) -> Dict[str, tf.Tensor]:
        """total_loss and the per-example LOSS_TERMS (HF's loss, term by term)."""
        config = self.tapas_config
        label_ids = tf.cast(features["label_ids"], tf.int32)
        zeros = tf.zeros(tf.shape(label_ids)[:1], tf.float32)
        terms = {name: zeros for name in LOSS_TERMS + LOSS_PARTS}
        terms["selection_loss"] = self._selection_loss(features, outputs, token_logits, label_ids, indices)

        aggregate_mask = None
        if config.is_weakly_supervised:
            answer = _per_example(features, "answer", tf.float32)
            aggregate_mask = losses.compute_aggregate_mask(
                answer, outputs["aggregation_logits"], label_ids, config.cell_selection_preference
            )
            terms["aggregate_mask"] = aggregate_mask

        if config.disable_per_token_loss:
            pass
        elif aggregate_mask is None:
            terms["selection_loss_in_total"] = terms["selection_loss"]
        else:
            # Examples routed to aggregation learn from the answer, not from the cell labels.
            terms["selection_loss_in_total"] = terms["selection_loss"] * (1.0 - aggregate_mask)
        total_loss = tf.reduce_mean(terms["selection_loss_in_total"])

        if config.num_aggregation_labels > 0:
            self._aggregation_terms(features, outputs, aggregate_mask, terms)
            total_loss += tf.reduce_mean(terms["aggregation_loss_in_total"] + terms["answer_loss_in_total"])
        if config.num_classification_labels > 0:
            class_index = _per_example(features, "classification_class_index", tf.int32)
            total_loss += tf.reduce_mean(
                losses.classification_loss(outputs["classification_logits"], class_index)
            )
        terms["total_loss"] = total_loss
        return terms

    def _selection_loss(
        self,
        features: Mapping[str, tf.Tensor],
        outputs: Mapping[str, tf.Tensor],
        token_logits: tf.Tensor,
        label_ids: tf.Tensor,
        indices: Tuple[segmented.IndexMap, segmented.ProductIndexMap, tf.Tensor],
    ) -> tf.Tensor:
        """<float32>[batch]: hierarchical single-column loss, or the weighted per-token loss.

        token_logits <float32>[batch, seq_len] are already averaged per cell when
        average_logits_per_cell (a no-op for the single-column loss, which averages anyway).
        """
        config = self.tapas_config
        col_index, cell_index, cell_mask = indices
        if config.select_one_column:
            return losses.single_column_cell_selection_loss(
                token_logits, outputs["column_logits"], label_ids, cell_index, col_index, cell_mask
            )
        return losses.per_token_selection_loss(
            token_logits, label_ids, features["input_mask"], config.positive_label_weight
        )

    def _aggregation_terms(
        self,
        features: Mapping[str, tf.Tensor],
        outputs: Mapping[str, tf.Tensor],
        aggregate_mask: Optional[tf.Tensor],
        terms: Dict[str, tf.Tensor],
    ) -> None:
        """Fills the aggregation and answer terms, raw and as they enter total_loss."""
        config = self.tapas_config
        aggregation_logits = outputs["aggregation_logits"]
        if config.is_weakly_supervised:
            aggregation_function_id = None
        else:
            aggregation_function_id = _per_example(features, "aggregation_function_id", tf.int32)
        terms["aggregation_loss"] = losses.aggregation_loss(
            aggregation_logits,
            aggregate_mask,
            aggregation_function_id,
            config.is_weakly_supervised,
            config.num_aggregation_labels,
            config.aggregation_loss_weight,
        )
        if not config.is_weakly_supervised:
            terms["aggregation_loss_in_total"] = terms["aggregation_loss"]
            return

        _require(features, ("numeric_values", "numeric_values_scale"), "use_answer_as_supervision")
        table_mask = tf.cast(tf.cast(features["row_ids"], tf.int32) > 0, tf.float32)
        terms["expected_result"] = losses.expected_result(
            # Without the input mask: the table mask already excludes padding.
            tf.sigmoid(outputs["logits"]),
            tf.cast(features["numeric_values"], tf.float32),
            tf.cast(features["numeric_values_scale"], tf.float32),
            table_mask,
            aggregation_logits,
            config.average_approximation_function,
            config.aggregation_temperature,
        )
        terms["answer_loss"], large_answer_loss_mask = losses.answer_loss(
            _per_example(features, "answer", tf.float32),
            aggregate_mask,
            terms["expected_result"],
            config.huber_loss_delta,
            config.answer_loss_cutoff,
            config.answer_loss_importance,
            config.use_normalized_answer_loss,
        )
        # Examples whose answer loss exceeds the cutoff get no aggregation or answer loss.
        terms["aggregation_loss_in_total"] = terms["aggregation_loss"] * large_answer_loss_mask
        terms["answer_loss_in_total"] = terms["answer_loss"] * large_answer_loss_mask
        terms["answer_loss_cut"] = aggregate_mask * (1.0 - large_answer_loss_mask)

    def weight_map(self) -> Dict[str, tf.Variable]:
        """Every variable under the name it has in an original TAPAS (TF1) checkpoint.

        Names: `bert/embeddings/...`, `bert/encoder/layer_{i}/...`, `bert/pooler/dense/...`
        (shapes in `models.encoder`), `output_weights`, `output_bias`, `column_output_weights`,
        `column_output_bias`, `output_weights_agg`, `output_bias_agg`, `output_weights_cls`,
        `output_bias_cls` (shapes in `models.heads`). Hugging Face names are the same path
        with `tapas.` for `bert/`, dots for slashes, `layer.{i}` for `layer_{i}`, `weight` for
        `kernel`/`gamma` (Linear weights transposed), `bias` for `beta`, `.weight` after the
        embedding tables, and `aggregation_classifier.{weight,bias}` / `classifier.{weight,bias}`
        for the pooled heads. Builds the model on dummy features if it was never called.
        """
        if not self.built:
            self(dummy_features())
        names = self.encoder.weight_map("bert")
        names.update(self.cell_selection_head.weight_map())
        for head in (self.aggregation_head, self.classification_head):
            if head is not None:
                names.update(head.weight_map())
        return names

    def get_config(self) -> Dict[str, Any]:
        return {"name": self.name, "config": self.tapas_config.to_dict()}

    @classmethod
    def from_config(cls, config: Mapping[str, Any], custom_objects=None) -> "TapasForQuestionAnswering":
        return cls(TapasConfig.from_dict(config["config"]), name=config.get("name"))


def _require(features: Mapping[str, tf.Tensor], keys: Tuple[str, ...], reason: str) -> None:
    """Raises a ValueError naming the `keys` missing from `features`."""
    missing = [key for key in keys if key not in features]
    if missing:
        raise ValueError(f"{reason} needs the features {', '.join(missing)}.")


def _per_example(features: Mapping[str, tf.Tensor], key: str, dtype: tf.DType) -> tf.Tensor:
    """A per-example label as <dtype>[batch], accepting [batch] or [batch, 1]."""
    _require(features, (key,), "The loss of this config")
    value = tf.cast(features[key], dtype)
    if value.shape.rank == 2 and value.shape[1] == 1:
        value = tf.squeeze(value, axis=1)
    if value.shape.rank != 1:
        raise ValueError(f"Feature {key} must have shape [batch] or [batch, 1], got {value.shape}.")
    return value
