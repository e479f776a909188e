"""TAPAS pre-training: masked language modelling on tables and text snippets.

The masked-LM head transforms the encoder output at the masked positions (dense, activation,
LayerNorm) and scores it against the word embedding table (decoder weights tied to the
embeddings) plus an output bias. An optional next-sentence head, off by default as in TAPAS
pre-training, classifies the pooled output.

Weights (TF1 names; HF uses `cls.predictions.transform.dense.weight` etc. and
`cls.predictions.bias`):

    cls/predictions/transform/dense/kernel    <float32>[hidden, hidden]
    cls/predictions/transform/dense/bias      <float32>[hidden]
    cls/predictions/transform/LayerNorm/gamma <float32>[hidden]  (and beta)
    cls/predictions/output_bias               <float32>[vocab_size]
    cls/seq_relationship/output_weights       <float32>[2, hidden]  (next sentence only)
    cls/seq_relationship/output_bias          <float32>[2]
"""

from typing import Any, Dict, Mapping

import tensorflow as tf
import tf_keras

from tapas_tf.models.config import TapasConfig
from tapas_tf.models.encoder import TapasEncoder, get_activation
from tapas_tf.models.heads import ClassificationHead
from tapas_tf.models.qa_model import dummy_features

# BERT's guard against batches whose masked_lm_weights are all zero.
_MLM_WEIGHT_EPSILON = 1e-5


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
class MaskedLMHead(tf_keras.layers.Layer):
    """Vocabulary logits at the masked positions, with the decoder tied to the embeddings.

    Args:
      vocab_size: int, number of word ids (rows of the embedding table).
      hidden_act: str, activation of the transform ("gelu", "gelu_tanh" or "relu").
      initializer_range: float, stddev of the truncated normal initialiser.
      layer_norm_eps: float, LayerNorm epsilon.

    Call args:
      sequence_output: <float32>[batch, seq_len, hidden].
      masked_positions: <int32>[batch, num_predictions] positions to score.
      embedding_table: <float32>[vocab_size, hidden] word embeddings (the tied decoder).

    Returns:
      <float32>[batch, num_predictions, vocab_size] logits.
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_act: str = "gelu",
        initializer_range: float = 0.02,
        layer_norm_eps: float = 1e-12,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.activation = get_activation(hidden_act)
        # === Config ===
        self.vocab_size = vocab_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps

    def build(self, input_shape):
        hidden_size = tf.TensorShape(input_shape)[-1]
        if hidden_size is None:
            raise ValueError(f"MaskedLMHead needs a known hidden size, got input shape {input_shape}.")
        # === Layers ===
        self.dense = tf_keras.layers.Dense(
            hidden_size,
            activation=self.activation,
            kernel_initializer=tf_keras.initializers.TruncatedNormal(stddev=self.initializer_range),
            name="transform",
            dtype=self.dtype_policy,  # Sublayers do not inherit the head's policy (float32).
        )
        self.layer_norm = tf_keras.layers.LayerNormalization(axis=-1, epsilon=self.layer_norm_eps, name="LayerNorm",
                                                             dtype=self.dtype_policy)
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,), initializer="zeros")
        super().build(input_shape)

    def call(self, sequence_output: tf.Tensor, masked_positions: tf.Tensor, embedding_table: tf.Tensor) -> tf.Tensor:
        # <float32>[batch, num_predictions, hidden]
        masked_output = tf.gather(sequence_output, tf.cast(masked_positions, tf.int32), batch_dims=1)
        transformed = self.layer_norm(self.dense(masked_output))
        # The tied table is the encoder's variable: under a mixed policy the encoder reads it in
        # bfloat16, and this head computes in float32.
        embedding_table = tf.cast(embedding_table, transformed.dtype)
        return tf.einsum("bph,vh->bpv", transformed, embedding_table) + self.output_bias

    def weight_map(self, prefix: str = "cls/predictions") -> Dict[str, tf.Variable]:
        """TF1 checkpoint name -> variable."""
        return {
            f"{prefix}/transform/dense/kernel": self.dense.kernel,
            f"{prefix}/transform/dense/bias": self.dense.bias,
            f"{prefix}/transform/LayerNorm/gamma": self.layer_norm.gamma,
            f"{prefix}/transform/LayerNorm/beta": self.layer_norm.beta,
            f"{prefix}/output_bias": self.output_bias,
        }

    def get_config(self) -> Dict[str, Any]:
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "hidden_act": self.hidden_act,
                "initializer_range": self.initializer_range,
                "layer_norm_eps": self.layer_norm_eps,
            }
        )
        return config


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
class TapasForMaskedLM(tf_keras.Model):
    """The TAPAS encoder with a masked-LM head (and an optional next-sentence head).

    Args:
      config: TapasConfig; only the encoder fields are used.
      use_next_sentence_prediction: bool, add the pooler and a 2-way next-sentence head.

    Call args:
      features: dict with "input_ids", "input_mask", the seven token-type features
        (<int32>[batch, seq_len]) and "masked_lm_positions" <int32>[batch, num_predictions].
        Labels: "masked_lm_ids" <int32>[batch, num_predictions] and "masked_lm_weights"
        <float32>[batch, num_predictions] (1 for real predictions, 0 for padding); with the
        next-sentence head, "next_sentence_labels" <int32>[batch] or [batch, 1].
      training: bool, apply dropout.

    Returns:
      dict with "mlm_logits" <float32>[batch, num_predictions, vocab_size], with the
      next-sentence head "nsp_logits" <float32>[batch, 2], and, when "masked_lm_ids" is given,
      "mlm_loss" (sum of weighted cross-entropies / (sum of weights + 1e-5)), "nsp_loss" (mean
      cross-entropy, next-sentence head only) and "total_loss", all <float32>[].
    """

    def __init__(self, config: TapasConfig, use_next_sentence_prediction: bool = False, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(config, TapasConfig):
            raise ValueError(f"config must be a TapasConfig, got {type(config).__name__}.")
        # === Layers ===
        # Without the next-sentence head the pooler would get no gradient, so it is left out.
        self.encoder = TapasEncoder.from_tapas_config(
            config, add_pooling_layer=use_next_sentence_prediction, name="encoder"
        )
        self.mlm_head = MaskedLMHead(
            vocab_size=config.vocab_size,
            hidden_act=config.hidden_act,
            initializer_range=config.initializer_range,
            layer_norm_eps=config.layer_norm_eps,
            name="mlm_head",
            dtype="float32",  # The vocabulary softmax stays float32 under a mixed-precision policy.
        )
        self.nsp_head = None
        if use_next_sentence_prediction:
            self.nsp_head = ClassificationHead(2, config.initializer_range, name="next_sentence", dtype="float32")

        # === Config ===
        self.tapas_config = config
        self.use_next_sentence_prediction = use_next_sentence_prediction

    def call(self, features: Mapping[str, tf.Tensor], training=False) -> Dict[str, tf.Tensor]:
        if "masked_lm_positions" not in features:
            raise ValueError("TapasForMaskedLM needs the feature masked_lm_positions.")
        encoded = self.encoder(features, training=training)
        outputs = {
            "mlm_logits": self.mlm_head(
                tf.cast(encoded["sequence_output"], tf.float32), features["masked_lm_positions"],
                self.encoder.get_embedding_table()
            )
        }
        if self.nsp_head is not None:
            outputs["nsp_logits"] = self.nsp_head(tf.cast(encoded["pooled_output"], tf.float32))
        if "masked_lm_ids" in features:
            outputs.update(self._loss_terms(features, outputs))
        return outputs

    def _loss_terms(self, features: Mapping[str, tf.Tensor], outputs: Mapping[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        if "masked_lm_weights" not in features:
            raise ValueError("The masked-LM loss needs the feature masked_lm_weights.")
        weights = tf.cast(features["masked_lm_weights"], tf.float32)
        # <float32>[batch, num_predictions]
        cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(features["masked_lm_ids"], tf.int32), logits=outputs["mlm_logits"]
        )
        mlm_loss = tf.reduce_sum(cross_entropy * weights) / (tf.reduce_sum(weights) + _MLM_WEIGHT_EPSILON)
        terms = {"mlm_loss": mlm_loss, "total_loss": mlm_loss}
        if self.nsp_head is not None:
            if "next_sentence_labels" not in features:
                raise ValueError("The next-sentence loss needs the feature next_sentence_labels.")
            labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
            terms["nsp_loss"] = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=outputs["nsp_logits"])
            )
            terms["total_loss"] = mlm_loss + terms["nsp_loss"]
        return terms

    def weight_map(self) -> Dict[str, tf.Variable]:
        """Every variable under its TF1 checkpoint name (see the module docstring).

        Builds the model on dummy features if it was never called.
        """
        if not self.built:
            features = dummy_features()
            features["masked_lm_positions"] = tf.zeros([1, 1], tf.int32)
            self(features)
        names = self.encoder.weight_map("bert")
        names.update(self.mlm_head.weight_map("cls/predictions"))
        if self.nsp_head is not None:
            names["cls/seq_relationship/output_weights"] = self.nsp_head.output_weights
            names["cls/seq_relationship/output_bias"] = self.nsp_head.output_bias
        return names

    def get_config(self) -> Dict[str, Any]:
        return {
            "name": self.name,
            "config": self.tapas_config.to_dict(),
            "use_next_sentence_prediction": self.use_next_sentence_prediction,
        }

    @classmethod
    def from_config(cls, config: Mapping[str, Any], custom_objects=None) -> "TapasForMaskedLM":
        return cls(
            TapasConfig.from_dict(config["config"]),
            use_next_sentence_prediction=config.get("use_next_sentence_prediction", False),
            name=config.get("name"),
        )
