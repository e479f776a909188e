"""A dual encoder for table retrieval: a question tower and a table tower, scored by inner product.

Herzig et al. (NAACL 2021, "DTR"): each tower is a TAPAS encoder. The question tower reads
`[CLS] question [SEP]` with every token type 0; the table tower reads `[CLS] title [SEP] table`
with TAPAS's token types (the title sits where a question would). Each tower's vector is pooled
and projected to a small dimension (Google: 256), and a question's score for a table is the inner
product of the two vectors:

    q = P_q pool(E_q(question))          <float32>[batch, dim]
    t = P_t pool(E_t(title, table))      <float32>[num_tables, dim]
    score(q, t) = q . t                  (times `logit_scale` in the loss)

Pooling is "pooled" (the tanh dense on [CLS], as Google's retriever), "cls" (the raw [CLS]
vector) or "mean" (the masked mean of the sequence, as sentence-transformers' MiniLM). With
`normalize`, vectors are L2-normalised (cosine scores), and `logit_scale` sharpens the in-batch
softmax (`losses.in_batch_retrieval_loss`); Google's model is inner product with scale 1.

`share_encoders` uses one encoder for both towers (fewer weights, and a text BERT's start is
the same for both); Google's checkpoints have two (`bert/` tables, `bert_1/` questions).

Example:

    config = DualEncoderConfig(encoder=TapasConfig.from_preset("tiny"), projection_dim=64)
    model = TableDualEncoder(config)
    outputs = model(features)   # features: the table's, and question_input_ids / _mask
    outputs["query_embeddings"].shape, outputs["table_embeddings"].shape   # [b, 64], [b, 64]
"""

import dataclasses
import os
from typing import Any, Dict, Mapping, Optional

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# pylint: disable=wrong-import-position
import tensorflow as tf
import tf_keras

from tapas_tf.models.config import TapasConfig, read_json_object, write_json_object
from tapas_tf.models.embeddings import TOKEN_TYPE_FEATURES
from tapas_tf.models.encoder import TapasEncoder

POOLINGS = ("pooled", "cls", "mean")
QUESTION_IDS = "question_input_ids"
QUESTION_MASK = "question_input_mask"
# Google's TF1 names of the projections, each <float32>[dim, hidden] (used as h @ P^T).
TABLE_PROJECTION = "table_projection"
TEXT_PROJECTION = "text_projection"


@dataclasses.dataclass(frozen=True)
class DualEncoderConfig:
    """Every option of a `TableDualEncoder`.

    Args:
      encoder: TapasConfig of both towers' encoders (their heads' fields are unused).
      projection_dim: int, size of the vectors; 0 keeps the encoder's hidden size (no projection).
      pooling: str, one of POOLINGS.
      normalize: bool, L2-normalise both towers' vectors.
      share_encoders: bool, one encoder for questions and tables.
      max_query_length: int, word pieces of a question, [CLS] and [SEP] included.
      max_table_length: int, word pieces of a table's input (title, header and the first rows
        that fit).
      logit_scale: float, multiplies the scores in the training loss.
    """

    encoder: TapasConfig
    projection_dim: int = 256
    pooling: str = "pooled"
    normalize: bool = False
    share_encoders: bool = False
    max_query_length: int = 128
    max_table_length: int = 256
    logit_scale: float = 1.0

    def __post_init__(self):
        if isinstance(self.encoder, Mapping):
            object.__setattr__(self, "encoder", TapasConfig.from_dict(self.encoder))
        if not isinstance(self.encoder, TapasConfig):
            raise ValueError(f"encoder must be a TapasConfig, got {type(self.encoder).__name__}")
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}")
        if self.projection_dim < 0:
            raise ValueError(f"projection_dim must be 0 (none) or positive, got {self.projection_dim}")
        limit = self.encoder.max_position_embeddings
        for name in ("max_query_length", "max_table_length"):
            value = getattr(self, name)
            if not 3 <= value <= limit:
                raise ValueError(f"{name} must be in [3, {limit}] (the position table), got {value}")
        if self.logit_scale <= 0:
            raise ValueError(f"logit_scale must be positive, got {self.logit_scale}")

    @property
    def embedding_dim(self) -> int:
        return self.projection_dim or self.encoder.hidden_size

    def to_dict(self) -> Dict[str, Any]:
        values = dataclasses.asdict(self)
        values["encoder"] = self.encoder.to_dict()
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "DualEncoderConfig":
        unknown = sorted(set(values) - {field.name for field in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"Unknown DualEncoderConfig keys: {', '.join(unknown)}.")
        return cls(**values)

    def to_json_file(self, path: str) -> None:
        write_json_object(path, self.to_dict())

    @classmethod
    def from_json_file(cls, path: str) -> "DualEncoderConfig":
        return cls.from_dict(read_json_object(path))

    def replace(self, **changes: Any) -> "DualEncoderConfig":
        return self.from_dict({**self.to_dict(), **changes})


@tf_keras.utils.register_keras_serializable(package="tapas_tf")
class TowerPooling(tf_keras.layers.Layer):
    """One vector per sequence from an encoder's outputs.

    Call args:
      outputs: the encoder's dict: "sequence_output" <float>[batch, seq_len, hidden] and, for
        "pooled", "pooled_output" <float>[batch, hidden].
      input_mask: <int32>[batch, seq_len], 1 for real tokens.

    Returns:
      <float32>[batch, hidden].
    """

    def __init__(self, pooling: str = "pooled", **kwargs):
        super().__init__(**kwargs)
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
        self.pooling = pooling

    def call(self, outputs: Mapping[str, tf.Tensor], input_mask: tf.Tensor) -> tf.Tensor:
        if self.pooling == "pooled":
            return tf.cast(outputs["pooled_output"], tf.float32)
        sequence = tf.cast(outputs["sequence_output"], tf.float32)
        if self.pooling == "cls":
            return sequence[:, 0, :]
        mask = tf.cast(input_mask, tf.float32)[:, :, None]
        return tf.reduce_sum(sequence * mask, axis=1) / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)

    def get_config(self) -> Dict[str, Any]:
        return {**super().get_config(), "pooling": self.pooling}


class TableDualEncoder(tf_keras.Model):
    """Question and table towers; see the module docstring.

    Args:
      config: DualEncoderConfig.

    Call args:
      features: the table tower's features, <int32>[num_tables, table_len] "input_ids",
        "input_mask" and the seven token types; and the question tower's
        "question_input_ids", "question_input_mask" <int32>[batch, query_len]. Either half may
        be missing; its output is then missing too.
      training: bool, apply dropout.

    Returns:
      dict with "table_embeddings" <float32>[num_tables, dim] and "query_embeddings"
      <float32>[batch, dim], for the halves given.
    """

    def __init__(self, config: DualEncoderConfig, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(config, DualEncoderConfig):
            raise ValueError(f"config must be a DualEncoderConfig, got {type(config).__name__}.")
        add_pooler = config.pooling == "pooled"
        # === Layers ===
        self.table_encoder = TapasEncoder.from_tapas_config(config.encoder, add_pooling_layer=add_pooler,
                                                            name="table_encoder")
        self.query_encoder = self.table_encoder if config.share_encoders else TapasEncoder.from_tapas_config(
            config.encoder, add_pooling_layer=add_pooler, name="query_encoder")
        self.pooling = TowerPooling(config.pooling, name="pooling", dtype="float32")
        self.table_projection = self.query_projection = None
        if config.projection_dim:
            stddev = config.encoder.initializer_range
            # Projections run in float32 (like the QA heads): the scores are compared across a
            # whole collection, and bfloat16 keeps only ~3 significant digits.
            self.table_projection = tf_keras.layers.Dense(
                config.projection_dim, use_bias=False, kernel_initializer=tf_keras.initializers.TruncatedNormal(stddev=stddev),
                name="table_projection",
                dtype="float32")
            self.query_projection = tf_keras.layers.Dense(
                config.projection_dim, use_bias=False, kernel_initializer=tf_keras.initializers.TruncatedNormal(stddev=stddev),
                name="query_projection",
                dtype="float32")
        # === Config ===
        self.dual_config = config

    def call(self, features: Mapping[str, tf.Tensor], training=False) -> Dict[str, tf.Tensor]:
        outputs = {}
        if "input_ids" in features:
            outputs["table_embeddings"] = self.embed_tables(features, training=training)
        if QUESTION_IDS in features:
            outputs["query_embeddings"] = self.embed_queries(features[QUESTION_IDS], features[QUESTION_MASK],
                                                             training=training)
        if not outputs:
            raise ValueError(f"TableDualEncoder needs table features (input_ids, ...) or {QUESTION_IDS}.")
        return outputs

    def embed_tables(self, features: Mapping[str, tf.Tensor], training=False) -> tf.Tensor:
        """<float32>[num_tables, dim] from the table tower's features."""
        encoded = self.table_encoder(features, training=training)
        vectors = self.pooling(encoded, features["input_mask"])
        return self._finish(vectors, self.table_projection)

    def embed_queries(self, input_ids: tf.Tensor, input_mask: tf.Tensor, training=False) -> tf.Tensor:
        """<float32>[batch, dim] from <int32>[batch, query_len] word-piece ids and mask.

        The question tower sees every token type at 0, as a question with an empty table.
        """
        zeros = tf.zeros_like(input_ids)
        features = {"input_ids": input_ids, "input_mask": input_mask}
        features.update({name: zeros for name in TOKEN_TYPE_FEATURES})
        encoded = self.query_encoder(features, training=training)
        vectors = self.pooling(encoded, input_mask)
        return self._finish(vectors, self.query_projection)

    def _finish(self, vectors: tf.Tensor, projection: Optional[tf_keras.layers.Layer]) -> tf.Tensor:
        if projection is not None:
            vectors = projection(vectors)
        if self.dual_config.normalize:
            vectors = tf.math.l2_normalize(vectors, axis=-1)
        return vectors

    def weight_map(self) -> Dict[str, tf.Variable]:
        """TF1 name -> variable in Google's retriever layout: the table tower under `bert/`, the
        question tower under `bert_1/` (the same variables when shared), and the projections.

        Our projection kernels are [hidden, dim]; Google's `table_projection` and
        `text_projection` are [dim, hidden] (the transpose): an importer transposes them.
        """
        names = self.table_encoder.weight_map("bert")
        names.update(self.query_encoder.weight_map("bert_1"))
        if self.table_projection is not None:
            names[TABLE_PROJECTION] = self.table_projection.kernel
            names[TEXT_PROJECTION] = self.query_projection.kernel
        return names

    def get_config(self) -> Dict[str, Any]:
        return {"name": self.name, "config": self.dual_config.to_dict()}

    @classmethod
    def from_config(cls, config: Mapping[str, Any], custom_objects=None) -> "TableDualEncoder":
        return cls(DualEncoderConfig.from_dict(config["config"]), name=config.get("name"))


def dummy_retrieval_features(batch_size: int = 1, table_length: int = 8,
                             query_length: int = 4) -> Dict[str, tf.Tensor]:
    """All-ones masks and zero ids: enough to build a `TableDualEncoder`'s variables."""
    table = {name: tf.zeros([batch_size, table_length], tf.int32) for name in TOKEN_TYPE_FEATURES}
    table["input_ids"] = tf.zeros([batch_size, table_length], tf.int32)
    table["input_mask"] = tf.ones([batch_size, table_length], tf.int32)
    table[QUESTION_IDS] = tf.zeros([batch_size, query_length], tf.int32)
    table[QUESTION_MASK] = tf.ones([batch_size, query_length], tf.int32)
    return table
