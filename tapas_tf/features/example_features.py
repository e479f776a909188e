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
