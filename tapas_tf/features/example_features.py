"""The tf.Example features of classifier examples: names, types, writing and parsing.

Names and meanings are those of the original TAPAS release, so TFRecords made
by either code base can be read by the other. Every per-token feature has
`max_seq_length` values; padding uses id 0, mask 0, NaN numeric values and
scale 1.
"""

from typing import Mapping

import numpy as np

# The seven token types, in the order of the embedding tables.
TOKEN_TYPE_FEATURES = (
    "segment_ids",
    "column_ids",
    "row_ids",
    "prev_label_ids",
    "column_ranks",
    "inv_column_ranks",
    "numeric_relations",
)
# What the model reads to predict (labels are left out, so that it computes no loss).
MODEL_INPUT_FEATURES = ("input_ids", "input_mask") + TOKEN_TYPE_FEATURES
# What answering, prediction and the exports read from the model (the heads' outputs only when the
# model has them): probabilities <float32>[batch, seq_len], aggregation_logits <float32>[batch,
# num_agg], classification_logits <float32>[batch, num_classes].
MODEL_OUTPUTS = ("probabilities", "aggregation_logits", "classification_logits")
INT_TOKEN_FEATURES = MODEL_INPUT_FEATURES + ("label_ids",)
FLOAT_TOKEN_FEATURES = ("numeric_values", "numeric_values_scale")
INT_SCALAR_FEATURES = ("aggregation_function_id", "classification_class_index", "table_id_hash")
FLOAT_SCALAR_FEATURES = ("answer",)
STRING_FEATURES = ("question_id", "table_id")

# Question ids are also stored as a fixed-length int vector (character codes,
# zero-padded) so that they survive TPU input pipelines, which drop strings.
QUESTION_ID_INTS_LENGTH = 64


def question_id_to_ints(question_id: str) -> list:
    """Character codes of `question_id`, zero-padded to QUESTION_ID_INTS_LENGTH."""
    codes = [ord(c) for c in question_id]
    if len(codes) > QUESTION_ID_INTS_LENGTH:
        raise ValueError(
            f"question id {question_id!r} has {len(codes)} characters; "
            f"at most {QUESTION_ID_INTS_LENGTH} fit in question_id_ints")
    return codes + [0] * (QUESTION_ID_INTS_LENGTH - len(codes))


def ints_to_question_id(codes) -> str:
    return "".join(chr(int(c)) for c in codes if int(c) != 0)


def to_tf_example(features: Mapping[str, object]):
    """Serialisable `tf.train.Example` from a dict of NumPy arrays / scalars / strings."""
    import tensorflow as tf

    def int_feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=np.asarray(values).ravel().tolist()))

    def float_feature(values):
        return tf.train.Feature(float_list=tf.train.FloatList(value=np.asarray(values, np.float32).ravel().tolist()))

    def bytes_feature(value: str):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode("utf-8")]))

    feature = {}
    for name in INT_TOKEN_FEATURES + INT_SCALAR_FEATURES:
        feature[name] = int_feature(features[name])
    for name in FLOAT_TOKEN_FEATURES + FLOAT_SCALAR_FEATURES:
        feature[name] = float_feature(features[name])
    for name in STRING_FEATURES:
        feature[name] = bytes_feature(features[name])
    feature["question_id_ints"] = int_feature(question_id_to_ints(features["question_id"]))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def parsing_spec(max_seq_length: int, include_strings: bool = True) -> dict:
    """`tf.io.parse_single_example` spec of the classifier features.

    Shapes: token features `[max_seq_length]`, scalars `[1]`,
    `question_id_ints` `[QUESTION_ID_INTS_LENGTH]`.
    """
    import tensorflow as tf

    spec = {}
    for name in INT_TOKEN_FEATURES:
        spec[name] = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    for name in FLOAT_TOKEN_FEATURES:
        spec[name] = tf.io.FixedLenFeature([max_seq_length], tf.float32)
    for name in INT_SCALAR_FEATURES:
        spec[name] = tf.io.FixedLenFeature([1], tf.int64)
    for name in FLOAT_SCALAR_FEATURES:
        spec[name] = tf.io.FixedLenFeature([1], tf.float32)
    spec["question_id_ints"] = tf.io.FixedLenFeature([QUESTION_ID_INTS_LENGTH], tf.int64)
    if include_strings:
        for name in STRING_FEATURES:
            spec[name] = tf.io.FixedLenFeature([1], tf.string)
    return spec


# --- Pre-training (masked LM) examples ----------------------------------------------------------
#
# Token features as above (MODEL_INPUT_FEATURES, with prev_label_ids and numeric_relations all 0,
# and FLOAT_TOKEN_FEATURES), then, per masked position, padded to max_predictions_per_seq:
#   masked_lm_positions  <int64>[max_predictions_per_seq]  token position (0 in padding)
#   masked_lm_ids        <int64>[max_predictions_per_seq]  original word-piece id (0 in padding)
#   masked_lm_weights    <float32>[max_predictions_per_seq] 1.0 for a prediction, 0.0 in padding
#   masked_lm_location   <int64>[max_predictions_per_seq]  MASKED_LM_LOCATION_* (0 in padding)
#   masked_lm_is_number  <int64>[max_predictions_per_seq]  1 if the masked word (text) or cell
#                                                          (table) parses as a number
# The last two are ours, for the breakdown of masked-LM accuracy in Table 5 of the paper; read them
# where masked_lm_weights is 1. Scalars: next_sentence_labels (always 0, as in TAPAS, which pairs
# no random tables) and table_id_hash <int64>[1]; string: table_id.
MASKED_LM_LOCATION_TEXT = 0
MASKED_LM_LOCATION_HEADER = 1
MASKED_LM_LOCATION_CELL = 2

MASKED_LM_INT_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_location", "masked_lm_is_number")
MASKED_LM_FLOAT_FEATURES = ("masked_lm_weights",)
PRETRAIN_INT_SCALAR_FEATURES = ("next_sentence_labels", "table_id_hash")
PRETRAIN_STRING_FEATURES = ("table_id",)


def to_pretrain_tf_example(features: Mapping[str, object]):
    """Serialisable `tf.train.Example` of a masked-LM example (names above)."""
    import tensorflow as tf

    def int_feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=np.asarray(values).ravel().tolist()))

    def float_feature(values):
        return tf.train.Feature(float_list=tf.train.FloatList(value=np.asarray(values, np.float32).ravel().tolist()))

    feature = {}
    for name in MODEL_INPUT_FEATURES + MASKED_LM_INT_FEATURES + PRETRAIN_INT_SCALAR_FEATURES:
        feature[name] = int_feature(features[name])
    for name in FLOAT_TOKEN_FEATURES + MASKED_LM_FLOAT_FEATURES:
        feature[name] = float_feature(features[name])
    for name in PRETRAIN_STRING_FEATURES:
        feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[features[name].encode("utf-8")]))
    return tf.train.Example(features=tf.train.Features(feature=feature))


def pretrain_parsing_spec(max_seq_length: int, max_predictions_per_seq: int,
                          include_strings: bool = True) -> dict:
    """`tf.io.parse_single_example` spec of the masked-LM features.

    Shapes: token features `[max_seq_length]`, masked_lm_* `[max_predictions_per_seq]`,
    scalars `[1]`.
    """
    import tensorflow as tf

    spec = {}
    for name in MODEL_INPUT_FEATURES:
        spec[name] = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    for name in FLOAT_TOKEN_FEATURES:
        spec[name] = tf.io.FixedLenFeature([max_seq_length], tf.float32)
    for name in MASKED_LM_INT_FEATURES:
        spec[name] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
    for name in MASKED_LM_FLOAT_FEATURES:
        spec[name] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32)
    for name in PRETRAIN_INT_SCALAR_FEATURES:
        spec[name] = tf.io.FixedLenFeature([1], tf.int64)
    if include_strings:
        for name in PRETRAIN_STRING_FEATURES:
            spec[name] = tf.io.FixedLenFeature([1], tf.string)
    return spec
