"""Tests of models/embeddings.py on a tiny hand-drawn table.

One example, seq_len 10 (the last token is padding):

    [CLS] how many [SEP]             question: row 0, column 0
    +------+--------+
    | name | age    |                header: row 0, columns 1 and 2
    | bob  | 4 ##2  |                row 1
    +------+--------+

    token        [CLS] how many [SEP] name age bob  4  ##2  [PAD]
    column_ids     0    0   0    0     1    2   1   2   2    0
    row_ids        0    0   0    0     0    0   1   1   1    0
    cell         (0,0) ...............(1,0)(2,0)(1,1)(2,1)(2,1)(0,0)
    position       0    1   2    3     0    0   0   0   1    9

[PAD] shares cell (0, 0) with the question, whose first token is [CLS] at 0, so it keeps its
absolute position 9 - 0 = 9.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from tapas_tf.models.embeddings import (  # noqa: E402
    TOKEN_TYPE_FEATURES,
    TapasEmbeddings,
    cell_position_ids,
)

COLUMN_IDS = [[0, 0, 0, 0, 1, 2, 1, 2, 2, 0]]
ROW_IDS = [[0, 0, 0, 0, 0, 0, 1, 1, 1, 0]]
TYPE_VOCAB_SIZES = (3, 5, 5, 2, 4, 4, 10)
HIDDEN = 4


def _features() -> dict:
    features = {
        "input_ids": [[1, 5, 6, 2, 7, 8, 9, 10, 11, 0]],
        "segment_ids": [[0, 0, 0, 0, 1, 1, 1, 1, 1, 0]],
        "column_ids": COLUMN_IDS,
        "row_ids": ROW_IDS,
        "prev_label_ids": [[0, 0, 0, 0, 0, 0, 1, 0, 0, 0]],
        "column_ranks": [[0, 0, 0, 0, 0, 0, 0, 1, 1, 0]],
        "inv_column_ranks": [[0, 0, 0, 0, 0, 0, 0, 1, 1, 0]],
        "numeric_relations": [[0, 0, 0, 0, 0, 0, 0, 4, 4, 0]],
    }
    return {key: tf.constant(value, tf.int32) for key, value in features.items()}


def _layer(**overrides) -> TapasEmbeddings:
    kwargs = dict(
        vocab_size=12,
        hidden_size=HIDDEN,
        max_position_embeddings=16,
        type_vocab_sizes=TYPE_VOCAB_SIZES,
        layer_norm_eps=1e-6,
        dropout_rate=0.1,
    )
    kwargs.update(overrides)
    return TapasEmbeddings(**kwargs)


def test_cell_position_ids_on_hand_drawn_table():
    positions = cell_position_ids(tf.constant(COLUMN_IDS), tf.constant(ROW_IDS), max_position_embeddings=16)
    np.testing.assert_array_equal(positions.numpy(), [[0, 1, 2, 3, 0, 0, 0, 0, 1, 9]])


def test_cell_position_ids_are_capped():
    # max_position_embeddings = 3 caps every position at 2: [CLS] how many [SEP] -> 0 1 2 2.
    positions = cell_position_ids(tf.constant(COLUMN_IDS), tf.constant(ROW_IDS), max_position_embeddings=3)
    np.testing.assert_array_equal(positions.numpy(), [[0, 1, 2, 2, 0, 0, 0, 0, 1, 2]])


def test_cell_position_ids_treat_each_example_separately():
    # The same cell ids at different places: each example finds its own first tokens.
    column_ids = tf.constant([[0, 1, 1, 2], [0, 0, 1, 1]])
    row_ids = tf.constant([[0, 1, 1, 1], [0, 0, 1, 1]])
    positions = cell_position_ids(column_ids, row_ids, max_position_embeddings=8)
    np.testing.assert_array_equal(positions.numpy(), [[0, 0, 1, 0], [0, 1, 0, 1]])


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * gamma + beta


def _expected_embeddings(layer: TapasEmbeddings, features: dict, positions: np.ndarray) -> np.ndarray:
    total = layer.word_embeddings.numpy()[features["input_ids"].numpy()]
    total = total + layer.position_embeddings.numpy()[positions]
    for name, table in zip(TOKEN_TYPE_FEATURES, layer.token_type_embeddings):
        total = total + table.numpy()[features[name].numpy()]
    return _layer_norm(total, layer.layer_norm.gamma.numpy(), layer.layer_norm.beta.numpy(), 1e-6)


@pytest.mark.parametrize(
    "reset, positions",
    [(True, [[0, 1, 2, 3, 0, 0, 0, 0, 1, 9]]), (False, [list(range(10))])],
)
def test_embeddings_sum_tables_and_normalise(reset, positions):
    tf_keras.utils.set_random_seed(1)
    layer = _layer(reset_position_index_per_cell=reset)
    features = _features()
    layer(features)
    # Non-trivial LayerNorm parameters, so gamma and beta are checked too.
    layer.layer_norm.gamma.assign([1.0, 2.0, 0.5, -1.0])
    layer.layer_norm.beta.assign([0.1, 0.0, -0.2, 0.3])
    outputs = layer(features, training=False).numpy()
    assert outputs.shape == (1, 10, HIDDEN)
    np.testing.assert_allclose(outputs, _expected_embeddings(layer, features, np.array(positions)), atol=1e-5)


def test_dropout_only_in_training():
    tf_keras.utils.set_random_seed(2)
    layer = _layer(dropout_rate=0.5)
    features = _features()
    eval_outputs = layer(features, training=False).numpy()
    train_outputs = layer(features, training=True).numpy()
    # Inverted dropout: kept entries are scaled by 1 / (1 - 0.5) = 2, dropped ones are 0.
    kept = train_outputs != 0
    assert 0 < kept.sum() < kept.size
    np.testing.assert_allclose(train_outputs[kept], 2 * eval_outputs[kept], rtol=1e-5)


def test_weights_have_tf1_names_and_shapes():
    layer = _layer()
    layer(_features())
    shapes = {name: tuple(variable.shape) for name, variable in layer.weight_map().items()}
    assert shapes == {
        "bert/embeddings/word_embeddings": (12, HIDDEN),
        "bert/embeddings/position_embeddings": (16, HIDDEN),
        "bert/embeddings/token_type_embeddings_0": (3, HIDDEN),
        "bert/embeddings/token_type_embeddings_1": (5, HIDDEN),
        "bert/embeddings/token_type_embeddings_2": (5, HIDDEN),
        "bert/embeddings/token_type_embeddings_3": (2, HIDDEN),
        "bert/embeddings/token_type_embeddings_4": (4, HIDDEN),
        "bert/embeddings/token_type_embeddings_5": (4, HIDDEN),
        "bert/embeddings/token_type_embeddings_6": (10, HIDDEN),
        "bert/embeddings/LayerNorm/gamma": (HIDDEN,),
        "bert/embeddings/LayerNorm/beta": (HIDDEN,),
    }
    assert len(layer.weights) == len(shapes)
    assert layer.embedding_table is layer.word_embeddings


def test_get_config_round_trip():
    layer = _layer(reset_position_index_per_cell=False, name="embeddings")
    config = layer.get_config()
    assert config["type_vocab_sizes"] == list(TYPE_VOCAB_SIZES)
    assert config["reset_position_index_per_cell"] is False
    restored = TapasEmbeddings.from_config(config)
    assert restored.get_config() == config
    # The registered name lets Keras rebuild the layer from its serialised form.
    clone = tf_keras.layers.deserialize(tf_keras.layers.serialize(layer))
    assert isinstance(clone, TapasEmbeddings) and clone.get_config() == config


def test_missing_features_are_named():
    features = _features()
    del features["numeric_relations"], features["row_ids"]
    with pytest.raises(ValueError, match="needs features row_ids, numeric_relations"):
        _layer()(features)


def test_wrong_number_of_token_types():
    with pytest.raises(ValueError, match="type_vocab_sizes must have 7 entries"):
        _layer(type_vocab_sizes=(3, 256, 256))
